"""Keep the model busy: read and tokenize ahead on one thread, write behind on another.

Both are bounded (a chunk or two), so memory does not grow with the shard; an error on either
thread is raised in the caller at the next hand-over, never lost.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")
_DONE = object()


def prefetched(source: Iterator[T], depth: int = 2) -> Iterator[T]:
    """Yields what `source` yields, produced up to `depth` items ahead on a daemon thread."""
    items: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in source:
                while not stop.is_set():
                    try:
                        items.put((item, None), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            items.put((_DONE, None))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            items.put((_DONE, exc))

    thread = threading.Thread(target=produce, name="prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item, error = items.get()
            if error is not None:
                raise error
            if item is _DONE:
                return
            yield item
    finally:
        stop.set()
        thread.join(timeout=30)


class WriteBehind:
    """Runs `write(item)` on a background thread, one item in flight; `submit` blocks while busy.

    `close()` waits for the last write and raises its error, if any.
    """

    def __init__(self, write: Callable[[T], None]):
        self._write = write
        self._closed = False
        self._items: queue.Queue = queue.Queue(maxsize=1)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="write-behind", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._items.get()
            if item is _DONE:
                return
            if self._error is None:
                try:
                    self._write(item)
                except BaseException as exc:  # noqa: BLE001 - raised in the caller
                    self._error = exc

    def submit(self, item: T) -> None:
        self._raise()
        self._items.put(item)

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def close(self) -> None:
        """Waits for the write in flight; raises its error. Safe to call twice."""
        if not self._closed:
            self._closed = True
            self._items.put(_DONE)
            self._thread.join()
        self._raise()

    def abort(self) -> None:
        """The caller failed: nothing to stop early here (`close` still waits for the write in flight)."""


class WriteInline:
    """WriteBehind's interface without its thread: each `write(item)` runs in the caller's thread at `submit`
    (benchmarks and tests that want one chunk after another)."""

    def __init__(self, write: Callable[[T], None]):
        self._write = write

    def submit(self, item: T) -> None:
        self._write(item)

    def close(self) -> None:
        """Nothing is in flight."""

    def abort(self) -> None:
        """Nothing is in flight."""
