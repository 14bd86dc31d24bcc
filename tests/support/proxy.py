"""A TCP proxy on 127.0.0.1 in front of PostgreSQL that a test can cut: the whole connection, at a byte
count, or before or after one chosen protocol message (psycopg2 speaks the simple query protocol)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

import sqlalchemy as sa

# PostgreSQL startup-phase request codes that are not the StartupMessage itself.
_SSL_REQUEST, _GSSENC_REQUEST, _CANCEL_REQUEST = 80877103, 80877104, 80877102


class _Link:
    """One proxied connection: client socket, upstream socket, and its pumps."""

    def __init__(self, client: socket.socket, upstream: socket.socket):
        self.client, self.upstream = client, upstream
        self.hold = threading.Event()  # swallow what the server says from now on
        self.replied = threading.Event()  # the server answered while held
        self.dead = False

    def close(self) -> None:
        self.dead = True
        for sock in (self.client, self.upstream):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


Rule = Callable[[bytes, bytes], "str | None"]


class PgProxy:
    """A TCP proxy on 127.0.0.1 in front of PostgreSQL that the test can cut at will.

    Client-to-server bytes are split into protocol messages (startup packet, then type byte + length),
    so faults can be aimed at one message: `rule(type, body)` returns None (forward), "cut_before"
    (close every connection without forwarding it) or "cut_after" (forward it, wait until the server
    has answered, swallow the answer, close every connection). `cut_at_byte` cuts once, when that many
    client bytes have passed, even inside a message. `cut()` cuts now. Server bytes pass untouched.
    """

    def __init__(self, upstream_host: str, upstream_port: int):
        self.upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._links: list[_Link] = []
        self.rule: Rule | None = None
        self.cut_at_byte: int | None = None
        self.client_bytes = 0
        self.queries: list[bytes] = []  # the start of every simple query that passed
        self.cuts = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="pg-proxy-accept").start()

    def url(self, base_url: str) -> str:
        url = sa.make_url(base_url).set(host="127.0.0.1", port=self.port)
        # plain bytes on the wire, so the proxy can read the protocol
        url = url.update_query_dict({"sslmode": "disable", "gssencmode": "disable"})
        return url.render_as_string(hide_password=False)

    def reset(self, rule: Rule | None = None, cut_at_byte: int | None = None) -> None:
        with self._lock:
            self.rule, self.cut_at_byte, self.client_bytes, self.queries, self.cuts = rule, cut_at_byte, 0, [], 0

    def cut(self) -> None:
        with self._lock:
            links, self._links = self._links, []
            self.cuts += 1
        for link in links:
            link.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.cut()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            link = _Link(client, upstream)
            with self._lock:
                self._links.append(link)
            threading.Thread(target=self._client_to_server, args=(link,), daemon=True).start()
            threading.Thread(target=self._server_to_client, args=(link,), daemon=True).start()

    def _server_to_client(self, link: _Link) -> None:
        try:
            while data := link.upstream.recv(65536):
                if link.hold.is_set():
                    link.replied.set()
                    continue
                link.client.sendall(data)
        except OSError:
            pass
        finally:
            link.replied.set()

    def _client_to_server(self, link: _Link) -> None:
        buf, started = b"", False
        try:
            while data := link.client.recv(65536):
                buf += data
                while True:
                    if not started:
                        if len(buf) < 8 or len(buf) < int.from_bytes(buf[:4], "big"):
                            break
                        size = int.from_bytes(buf[:4], "big")
                        msg, buf = buf[:size], buf[size:]
                        code = int.from_bytes(msg[4:8], "big")
                        started = code not in (_SSL_REQUEST, _GSSENC_REQUEST, _CANCEL_REQUEST)
                        kind, body = b"", msg[8:]
                    else:
                        if len(buf) < 5 or len(buf) < 1 + int.from_bytes(buf[1:5], "big"):
                            break
                        size = 1 + int.from_bytes(buf[1:5], "big")
                        msg, buf = buf[:size], buf[size:]
                        kind, body = msg[:1], msg[5:]
                    if not self._forward(link, msg, kind, body):
                        return
        except OSError:
            pass
        finally:
            link.close()

    def _forward(self, link: _Link, msg: bytes, kind: bytes, body: bytes) -> bool:
        with self._lock:
            action = self.rule(kind, body) if (self.rule and kind) else None
            if kind == b"Q":
                self.queries.append(body[:60])
            budget = None if self.cut_at_byte is None else self.cut_at_byte - self.client_bytes
            self.client_bytes += len(msg)
            if budget is not None and budget < len(msg):
                self.cut_at_byte = None  # one cut; whatever reconnects afterwards passes
        if action == "cut_before":
            self.cut()
            return False
        if budget is not None and budget < len(msg):
            if budget > 0:
                link.upstream.sendall(msg[:budget])  # half a message, then the line goes dead
            self.cut()
            return False
        if action == "cut_after":
            link.hold.set()  # before sending: the answer must never reach the client
            link.upstream.sendall(msg)
            link.replied.wait(10)
            self.cut()
            return False
        link.upstream.sendall(msg)
        return True


def nth_query(prefix: bytes, n: int, action: str) -> Rule:
    """A proxy rule: `action` on the n-th simple query whose SQL starts with `prefix` (psycopg2 sends
    every statement, BEGIN and COMMIT as a simple query: b"Q" + length + SQL + NUL)."""
    seen = 0

    def rule(kind: bytes, body: bytes) -> str | None:
        nonlocal seen
        if kind == b"Q" and body.startswith(prefix):
            seen += 1
            if seen == n:
                return action
        return None

    return rule
