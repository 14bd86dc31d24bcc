"""Free TCP ports on 127.0.0.1: every server a session starts listens on one the kernel picked, so two
sessions on one machine never ask for the same fixed port."""

from __future__ import annotations

import socket

_handed_out: set[int] = set()


def free_port() -> int:
    """A port nothing listens on right now, and never one this process handed out before (the kernel happily
    offers a just-released port again, and several servers are started from ports picked in a row). Another
    process may still take it before the server binds it: servers started on such a port are retried on a
    fresh one when they fail to come up (see postgres.py and redis.py)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def answers(host: str, port: int, timeout: float = 1.0) -> bool:
    """Something accepts TCP connections there."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
