"""Calls that must run at the same instant, and both finish."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


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
