"""Fault injection for real: a cuttable TCP proxy in front of PostgreSQL, infer_shard in a process the
test can SIGKILL, and plain views of the run tables. No database mocks; the real model and PostgreSQL.

Helpers are handed to the tests as fixtures (conftest modules are not importable by name).
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

from inference.config import Settings
from inference.seed import seed_backlog
from inference.store.db import writing
from inference.store.schema import (
    OUR_TABLES,
    inference_run_items,
    inference_staging,
    ticket_failures,
    ticket_results,
    tickets,
)
from inference.textprep import content_hash
from inference.window import window_for_date

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("shard_worker.py")
DAY = dt.date(2026, 11, 30)
TEXT_CHARS = 240  # short tickets keep the model cheap: these tests are about the database and processes
POISON = "zebra"  # one WordPiece token in MiniLM's vocabulary

# PostgreSQL startup-phase request codes that are not the StartupMessage itself.
_SSL_REQUEST, _GSSENC_REQUEST, _CANCEL_REQUEST = 80877103, 80877104, 80877102


# --- settings and data --------------------------------------------------------------------------------------


@pytest.fixture
def pg_settings(pg_engine, pg_url):
    """Settings on this session's PostgreSQL database (schema freshly reset by pg_engine)."""

    def make(**changes):
        return Settings(db_url=pg_url, device="cpu", **{"chunk_size": 10, **changes})

    return make


@pytest.fixture
def add_tickets(pg_engine):
    """Seeds n synthetic tickets spread over the nightly windows of `days`, bodies cut short.
    Returns their IDs as text, in the database's ORDER BY order (the order pages are cut in)."""

    def add(n: int, days: tuple[dt.date, ...] = (DAY,), seed: int = 11) -> list[str]:
        seed_backlog(pg_engine, n, [window_for_date(d) for d in days], seed=seed)
        with writing(pg_engine) as conn:
            conn.execute(sa.update(tickets).values(body=sa.func.substr(tickets.c.body, 1, TEXT_CHARS)))
            text_id = sa.cast(tickets.c.ticket_id, sa.String(128))
            return list(conn.scalars(sa.select(text_id).order_by(text_id)))

    return add


@pytest.fixture
def poison_token_id(model) -> int:
    ids = model.encoder.tokenize([POISON])[0][0]
    assert len(ids) == 3, "the poison word must be one token ([CLS] token [SEP])"
    return ids[1]


# --- views of the tables ----------------------------------------------------------------------------------------


class DbView:
    """What is in the run tables, as plain Python values."""

    TIMESTAMPS = ("created_at", "updated_at")

    def __init__(self, engine):
        self.engine = engine

    def _rows(self, table, *where, order=None):
        stmt = sa.select(table).where(*where)
        if order is not None:
            stmt = stmt.order_by(order)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(stmt)]

    def items(self, run_id: str) -> dict[str, tuple[str, str | None, int]]:
        """ticket_id -> (status, reason, attempts)."""
        items = inference_run_items
        rows = self._rows(items, items.c.run_id == run_id)
        return {r["ticket_id"]: (r["status"], r["reason"], r["attempts"]) for r in rows}

    def statuses(self, run_id: str) -> dict[str, str]:
        return {k: v[0] for k, v in self.items(run_id).items()}

    def item_counts(self, run_id: str) -> dict[str, int]:
        """status -> count, plus 'in_flight': planned items a process has claimed (attempts > 0)."""
        i = inference_run_items.c
        in_flight = sa.and_(i.status == "planned", i.attempts > 0)
        stmt = sa.select(i.status, in_flight, sa.func.count()).where(i.run_id == run_id).group_by(i.status, in_flight)
        out: dict[str, int] = {}
        with self.engine.connect() as conn:
            for status, flying, n in conn.execute(stmt):
                out[status] = out.get(status, 0) + n
                if flying:
                    out["in_flight"] = n
        return out

    def staging(self, run_id: str) -> dict[str, dict]:
        st = inference_staging
        return {r["ticket_id"]: r for r in self._rows(st, st.c.run_id == run_id)}

    def staging_order(self, run_id: str) -> list[str]:
        """Staged ticket IDs in the order load_results pages them."""
        st = inference_staging
        return [r["ticket_id"] for r in self._rows(st, st.c.run_id == run_id, order=st.c.ticket_id)]

    def results(self) -> dict[str, dict]:
        """ticket_id -> result row without its write timestamps (which differ between equal runs)."""
        return {
            r["ticket_id"]: {k: v for k, v in r.items() if k not in self.TIMESTAMPS} for r in self._rows(ticket_results)
        }

    def failures(self) -> list[dict]:
        return [
            {k: v for k, v in r.items() if k not in (*self.TIMESTAMPS, "id")}
            for r in self._rows(ticket_failures, order=ticket_failures.c.id)
        ]

    def source_hashes(self) -> dict[str, str]:
        return {str(r["ticket_id"]): content_hash(r["subject"], r["body"]) for r in self._rows(tickets)}

    def final_state(self, run_id: str) -> dict:
        return {
            "results": self.results(),
            "items": self.items(run_id),
            "staging": sorted(self.staging(run_id)),
            "failures": self.failures(),
        }

    def forget_results(self) -> None:
        """Deletes every result and failure, so the same tickets are backlog again (a second, fresh run)."""
        with writing(self.engine) as conn:
            conn.execute(sa.delete(ticket_results))
            conn.execute(sa.delete(ticket_failures))


@pytest.fixture
def view(pg_engine) -> DbView:
    return DbView(pg_engine)


class Snapshot:
    """Every row of our tables (not the source), to put a run back exactly where it was."""

    def __init__(self, engine):
        self.engine = engine
        with engine.connect() as conn:
            self.rows = {t: [dict(r._mapping) for r in conn.execute(t.select())] for t in OUR_TABLES}

    def restore(self) -> None:
        with writing(self.engine) as conn:
            for table, rows in self.rows.items():
                conn.execute(table.delete())
                if rows:
                    conn.execute(table.insert(), rows)


@pytest.fixture
def snapshot(pg_engine) -> Callable[[], Snapshot]:
    return lambda: Snapshot(pg_engine)


def committed_pages(view: DbView, run_id: str, order: list[str], page: int) -> int:
    """Checks that load_results left the run all-or-nothing per page; returns how many pages committed.

    `order` is the staged IDs in load order before the load. Every item is either succeeded, with its
    result row (written by this run) and no staging row left, or still staged, with its staging row and
    no result row; and the succeeded ones are whole pages from the front.
    """
    items, results, staging = view.statuses(run_id), view.results(), set(view.staging(run_id))
    for ticket_id in order:
        if items[ticket_id] == "succeeded":
            assert ticket_id in results, f"{ticket_id} succeeded without a result row"
            assert results[ticket_id]["run_id"] == run_id
            assert ticket_id not in staging, f"{ticket_id} succeeded but is still staged"
        else:
            assert items[ticket_id] == "staged", f"{ticket_id} is {items[ticket_id]}"
            assert ticket_id not in results, f"{ticket_id} has a result but its item is still staged"
            assert ticket_id in staging, f"{ticket_id} left staging without succeeding"
    assert set(results) <= set(order)
    done = [t for t in order if items[t] == "succeeded"]
    assert done == order[: len(done)], "pages commit in order"
    assert len(done) % page == 0 or len(done) == len(order), f"a partial page committed: {len(done)} of {page}"
    assert view.failures() == []
    return -(-len(done) // page)


@pytest.fixture
def check_pages(view) -> Callable[[str, list[str], int], int]:
    return lambda run_id, order, page: committed_pages(view, run_id, order, page)


# --- a process the test can kill -------------------------------------------------------------------------------


@pytest.fixture
def shard_worker(tmp_path):
    """Starts tests/faults/shard_worker.py (infer_shard in its own process, as an Airflow worker runs it).
    Settings travel as the environment variables a deployment sets; fault switches as FAULT_*."""
    procs: list[subprocess.Popen] = []

    def start(settings, run_id: str, shard: int, **faults) -> subprocess.Popen:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("INFERENCE_", "TICKETS_", "FAULT_"))}
        env.update(
            TICKETS_DB_URL=settings.db_url,
            INFERENCE_DEVICE=settings.device,
            INFERENCE_CHUNK_SIZE=str(settings.chunk_size),
            INFERENCE_MAX_ATTEMPTS=str(settings.max_attempts),
            PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
            **{f"FAULT_{k.upper()}": str(v) for k, v in faults.items()},
        )
        if getattr(settings, "heads", None):  # part of the model version: the worker must match the plan
            env["INFERENCE_HEADS"] = ",".join(settings.heads)
        log = tmp_path / f"worker-{len(procs)}.log"
        with open(log, "w") as out:
            proc = subprocess.Popen(
                [sys.executable, str(WORKER), run_id, str(shard)], cwd=ROOT, env=env, stdout=out, stderr=out
            )
        proc.log = log  # type: ignore[attr-defined]
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)


def worker_log(proc) -> str:
    return proc.log.read_text()[-3000:]


@pytest.fixture
def read_worker_log():
    return worker_log


# --- a PostgreSQL connection the test can cut --------------------------------------------------------------------


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


@pytest.fixture
def pg_proxy(pg_url):
    url = sa.make_url(pg_url)
    proxy = PgProxy(url.host or "127.0.0.1", url.port or 5432)
    yield proxy
    proxy.close()


@pytest.fixture
def query_rule() -> Callable[[bytes, int, str], Rule]:
    return nth_query


# --- threads that must both finish ------------------------------------------------------------------------------


def run_together(*calls: Callable[[], object], timeout: float = 300) -> list[object]:
    """Runs the calls in threads released at the same instant; returns their results, re-raises the first error."""
    barrier = threading.Barrier(len(calls))
    results: list[object] = [None] * len(calls)
    errors: list[BaseException | None] = [None] * len(calls)

    def body(k: int) -> None:
        barrier.wait()
        try:
            results[k] = calls[k]()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread below
            errors[k] = exc

    threads = [threading.Thread(target=body, args=(k,), name=f"copy-{k}") for k in range(len(calls))]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(1.0, timeout - (time.monotonic() - started)))
    assert not any(t.is_alive() for t in threads), "a concurrent call hung (lock wait or deadlock)"
    for exc in errors:
        if exc is not None:
            raise exc
    return results


@pytest.fixture
def together():
    return run_together
