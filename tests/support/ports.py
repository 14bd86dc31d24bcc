"""Free TCP ports on 127.0.0.1: every server a session starts listens on one the kernel picked, so two
sessions on one machine never ask for the same fixed port."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on right now. Another process may take it before we bind it: servers started
    on such a port are retried on a fresh one when they fail to come up (see postgres.py and redis.py)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(host: str, port: int, timeout: float = 1.0) -> bool:
    """Something accepts TCP connections there."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
