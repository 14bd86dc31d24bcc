"""infer_shard's chunk transactions in a process of their own (`INFERENCE_WRITER=process`).

A shard process holds one GIL for its threads: reading and tokenizing the next chunk, driving the model and
writing the previous chunk take turns on it. With the writer in a child process the chunk transactions
(take the items, check the source's row versions, validate, upsert, settle, the chunk's metrics) run beside
the reading on a core of their own, with their own GIL and their own database connection. They are the very
same transactions (`infer_step.commit`), in the same order, each chunk all or nothing.

- The child is a fresh interpreter (`python -m inference.pipeline.writer_process FD`: nothing of the
  parent's threads, locks, CUDA context or connection pool is inherited, and no multiprocessing start method
  re-imports the parent's main module, which under Airflow is the worker's) talking over a socket pair. It
  builds its own Runtime, so it checks the database as every step does. It is in the parent's process group:
  a signal Airflow sends to the task's group reaches it too.
- At most two chunks are handed over and not yet committed (one in the child's transaction, one waiting), as
  with the write-behind thread; `submit` blocks beyond that, so memory does not grow with the shard.
- What the child sends back is counts only (no ticket text, no outputs), and at the end its own peak memory
  (`peak_rss_mib`: its VmHWM; the rusage of a child would report the parent's, inherited).
- An error in the child is raised in the parent at the next hand-over or at `close` (its type kept where it
  can be pickled); the child then stops. A child that dies (killed, out of memory) is an error in the parent
  naming its exit code. Chunks committed before stay committed; the items of the others were claimed, so a
  rerun of the shard redoes them one at a time, as after any crash.
- If the parent dies, the child sees its end of the pipe close: it commits what it was already handed (at
  most two chunks, each all or nothing, as if the parent had lived a moment longer) and exits. It never
  outlives its parent by more than that.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import pickle
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

log = logging.getLogger("inference")

_DEPTH = 2  # chunks handed over and not yet acknowledged


@dataclass(frozen=True)
class WriterJob:
    """What the child needs to commit a shard's chunks."""

    settings: Any  # inference.config.Settings (picklable)
    run_id: str
    version: str
    step: str
    shard: int
    started_at: dt.datetime
    load: bool


@dataclass(frozen=True)
class Written:
    """One committed chunk, as counts: what the parent's tally needs."""

    counts: Mapping[str, float]
    loaded: int
    seconds: float  # the chunk's transaction, in the child


class WriterDied(RuntimeError):
    """The writer process ended without reporting an error (killed, out of memory)."""


class WriteProcess:
    """WriteBehind's interface (`submit`, `close`), the writes in a child process. `on_written(Written)` is
    called in the parent, in order, for every chunk the child committed."""

    def __init__(self, job: WriterJob, on_written: Callable[[Written], None]):
        self._on_written = on_written
        self._pending = 0
        self._closed = False
        self.peak_rss_mib: float | None = None  # the child's own, once it has closed
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        if Path(_IMPORT_ROOT).name not in ("site-packages", "dist-packages"):  # a checkout, a dags/plugins folder
            env["PYTHONPATH"] = os.pathsep.join(p for p in (_IMPORT_ROOT, os.environ.get("PYTHONPATH")) if p)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", __name__, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                env=env,
            )
        finally:
            theirs.close()
        self._conn = Connection(ours.detach())
        self._conn.send_bytes(pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL))

    @property
    def pid(self) -> int:
        return self._proc.pid

    def submit(self, item: tuple[int, Any, Any]) -> None:
        """Hands over (seq, outcome, as_read); blocks while two chunks are still uncommitted."""
        self._drain(block=False)
        while self._pending >= _DEPTH:
            self._receive()
        try:
            self._conn.send_bytes(pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL))
        except OSError:  # broken pipe, reset: the child is gone
            self._receive_last()
            raise self._died() from None
        self._pending += 1

    def _drain(self, block: bool) -> None:
        while self._pending and (block or self._conn.poll()):
            self._receive()

    def _receive(self) -> None:
        try:
            kind, payload = pickle.loads(self._conn.recv_bytes())
        except (EOFError, OSError):
            raise self._died() from None
        if kind == "error":
            self._pending = 0
            raise payload
        self._pending -= 1
        self._on_written(payload)

    def _receive_last(self) -> None:
        """What a child that went away sent before it went: acknowledgements, or the error that stopped it."""
        while self._pending:
            self._receive()

    def _died(self) -> WriterDied:
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        return WriterDied(
            f"the shard's writer process ended unexpectedly (exit code {code}); "
            "chunks it had not committed are redone by the shard's next attempt"
        )

    def close(self) -> None:
        """Waits for every chunk handed over; raises the child's error, if any. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        try:
            self._drain(block=True)
            self._conn.send_bytes(_STOP)
            kind, payload = pickle.loads(self._conn.recv_bytes())  # its goodbye: ("done", peak memory)
            if kind == "done":
                self.peak_rss_mib = payload
        except (EOFError, BrokenPipeError, ConnectionResetError):
            pass
        finally:
            self._end(timeout=60)

    def abort(self) -> None:
        """The parent failed: stop the child after the transaction it is in, without waiting for the rest."""
        if not self._closed:
            self._closed = True
            self._end(timeout=60)

    def _end(self, timeout: float) -> None:
        self._conn.close()  # the child sees EOF once it has read what was sent, and exits
        try:
            self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:  # never expected: it has at most two chunks left
            self._proc.kill()
            self._proc.wait()


def _serve(conn: Connection) -> None:
    """The child: commit each chunk handed over, acknowledge it with counts; stop at None, EOF or an error."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    inbox: queue.Queue = queue.Queue(maxsize=1)

    def receive() -> None:  # reads the next chunk while the current one commits
        try:
            while True:
                data = conn.recv_bytes()
                inbox.put(data)
                if data == _STOP:
                    return
        except (EOFError, OSError):
            inbox.put(None)  # the parent is gone, or has closed: nothing more comes

    try:
        job = pickle.loads(conn.recv_bytes())
        threading.Thread(target=receive, name="writer-inbox", daemon=True).start()
        _commit_all(conn, job, inbox)
    except EOFError:
        pass  # the parent went before it sent the job
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        try:
            conn.send_bytes(_error_payload(exc))
        except OSError:
            pass
    finally:
        conn.close()


_STOP = pickle.dumps(None)
_IMPORT_ROOT = str(Path(__file__).resolve().parents[2])  # the directory `inference` is imported from


def _commit_all(conn, job: WriterJob, inbox: queue.Queue) -> None:
    from inference.pipeline.infer_step import TaskInfo, commit, outcome_counts
    from inference.pipeline.load_step import Loader
    from inference.pipeline.runtime import Runtime
    from inference.procmem import peak_rss_mib

    with Runtime(job.settings) as rt:
        loader = Loader(rt, job.run_id, job.version) if job.load else None
        chunks = 0
        while True:
            data = inbox.get()
            if data is None or data == _STOP:
                peak = peak_rss_mib()
                log.info(
                    "run %s shard %d: writer process %d committed %d chunks, peak memory %.1f MiB%s",
                    job.run_id,
                    job.shard,
                    os.getpid(),
                    chunks,
                    peak,
                    "" if data == _STOP else " (its shard process went away)",
                )
                if data == _STOP:
                    conn.send_bytes(pickle.dumps(("done", peak)))
                return
            chunks += 1
            seq, outcome, as_read = pickle.loads(data)
            task = TaskInfo(job.step, job.shard, job.started_at, iter((seq,)))
            started = time.perf_counter()
            applied, loaded = commit(rt, job.run_id, job.version, outcome, task, loader, as_read, dense=True)
            seconds = time.perf_counter() - started
            conn.send_bytes(pickle.dumps(("ok", Written(outcome_counts(applied), loaded, seconds))))


def _error_payload(exc: BaseException) -> bytes:
    """The error as the parent raises it: the library's own errors as they are; a database error as the
    library's error for it (`database_error`: typed, its text scrubbed, so that nothing of a row crosses the
    pipe, not even in a driver exception's attributes); anything else as a RuntimeError naming its type and the
    first line of its message."""
    from inference.errors import InferenceError
    from inference.store.db import database_error

    ours = exc if isinstance(exc, InferenceError) else database_error(exc)
    if ours is None:
        lines = str(exc).strip().splitlines()
        ours = RuntimeError(f"writer process: {type(exc).__name__}: {lines[0][:300] if lines else ''}")
    try:
        data = pickle.dumps(("error", ours))
        pickle.loads(data)
        return data
    except Exception:  # noqa: BLE001 - an error type that does not pickle: its type and message instead
        return pickle.dumps(("error", RuntimeError(f"writer process: {type(ours).__name__}: {ours}")))


if __name__ == "__main__":  # the child; its classes must be the module's own, not __main__'s, to pickle back
    from inference.pipeline.writer_process import _serve as serve

    serve(Connection(int(sys.argv[1])))
