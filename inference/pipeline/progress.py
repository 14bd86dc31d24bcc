"""Progress of a model task: one plain log line per committed chunk, with an ETA.

Airflow task logs are not terminals, so progress is plain lines: tickets done/total, tickets/s and tokens/s over
the last chunk and overall, padding efficiency, failures so far, and the time left. Each line's record carries
the numbers as `record.progress` (a Snapshot); the CLI draws them as a bar when stderr is a terminal
(`TerminalBar`).

The ETA divides the tickets left by the rate since the first chunk was committed: the first chunk also pays for
filling the pipeline (reading and tokenizing ahead while the model waits), the later ones run at the steady
pace that the rest of the shard will run at.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from dataclasses import dataclass

log = logging.getLogger("inference")

clock = time.monotonic  # the tests replace it with a clock of their own


@dataclass(frozen=True)
class Snapshot:
    run_id: str
    step: str
    shard: int
    done: int  # tickets of the shard out of `planned` (this task's and any earlier attempt's)
    total: int
    chunk_tickets: int
    chunk_seconds: float
    chunk_tokens: int
    elapsed: float  # since this task started on the shard
    tickets_per_second: float | None  # overall, this task
    tokens_per_second: float | None
    last_tickets_per_second: float | None
    last_tokens_per_second: float | None
    padding_efficiency: float | None  # real / padded tokens, this task
    failed: int  # failures so far, this task
    eta_seconds: float | None

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 1.0

    def line(self) -> str:
        where = f"run {self.run_id} {self.step}" + (f" shard {self.shard}" if self.shard >= 0 else "")
        parts = [
            f"{where}: {self.done:,}/{self.total:,} tickets ({self.fraction:.0%})",
            f"last chunk {_rate(self.last_tickets_per_second)} tickets/s, {_rate(self.last_tokens_per_second)} tokens/s",
            f"overall {_rate(self.tickets_per_second)} tickets/s, {_rate(self.tokens_per_second)} tokens/s",
            f"padding efficiency {_pct(self.padding_efficiency)}",
            f"failed {self.failed:,}",
            f"ETA {duration(self.eta_seconds)}",
        ]
        return " | ".join(parts)


def _rate(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def duration(seconds: float | None) -> str:
    """1h02m, 3m05s, 42s, or '-'."""
    if seconds is None:
        return "-"
    s = int(round(max(seconds, 0.0)))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


class Progress:
    """Counts one task's committed chunks against its shard's size; logs a line for each (thread-safe)."""

    def __init__(self, run_id: str, step: str, shard: int, total: int, done_before: int = 0):
        self.run_id, self.step, self.shard = run_id, step, shard
        self.total, self.done = total, done_before
        self.started = self._last = clock()
        self._first: tuple[float, int] | None = None  # (time, done) when the first chunk was committed
        self._tickets = self._real = self._padded = self._failed = 0
        self._lock = threading.Lock()

    def chunk(self, tickets: int, failed: int, real_tokens: int, padded_tokens: int) -> Snapshot:
        """A chunk was committed: `tickets` left `planned` (staged, failed or skipped), `failed` of them failed."""
        with self._lock:
            now = clock()
            seconds, self._last = now - self._last, now
            self.done += tickets
            self._tickets += tickets
            self._failed += failed
            self._real += real_tokens
            self._padded += padded_tokens
            elapsed = now - self.started
            if self._first is None:
                self._first = (now, self.done)
                rate = _per(self._tickets, elapsed)
            else:
                rate = _per(self.done - self._first[1], now - self._first[0]) or _per(self._tickets, elapsed)
            left = max(self.total - self.done, 0)
            snapshot = Snapshot(
                run_id=self.run_id,
                step=self.step,
                shard=self.shard,
                done=self.done,
                total=self.total,
                chunk_tickets=tickets,
                chunk_seconds=seconds,
                chunk_tokens=real_tokens,
                elapsed=elapsed,
                tickets_per_second=_per(self._tickets, elapsed),
                tokens_per_second=_per(self._real, elapsed),
                last_tickets_per_second=_per(tickets, seconds),
                last_tokens_per_second=_per(real_tokens, seconds),
                padding_efficiency=self._real / self._padded if self._padded else None,
                failed=self._failed,
                eta_seconds=0.0 if left == 0 else (left / rate if rate else None),
            )
        log.info("%s", snapshot.line(), extra={"progress": snapshot})
        return snapshot


def _per(count: float, seconds: float) -> float | None:
    return count / seconds if seconds > 0 else None


class TerminalBar(logging.StreamHandler):
    """For a terminal: progress records redraw one bar line in place; other records print above it."""

    WIDTH = 28

    def __init__(self, stream=None):
        super().__init__(stream or sys.stderr)
        self._bar_shown = False

    def emit(self, record: logging.LogRecord) -> None:
        try:
            snapshot = getattr(record, "progress", None)
            if snapshot is None:
                if self._bar_shown:
                    self.stream.write("\n")
                    self._bar_shown = False
                super().emit(record)
                return
            self.stream.write("\r\033[K" + self.bar(snapshot))
            self.stream.flush()
            self._bar_shown = snapshot.done < snapshot.total
            if not self._bar_shown:
                self.stream.write("\n")
        except Exception:  # noqa: BLE001 - logging must never break the task
            self.handleError(record)

    def bar(self, s: Snapshot) -> str:
        filled = int(round(self.WIDTH * min(s.fraction, 1.0)))
        where = f"shard {s.shard}" if s.shard >= 0 else s.step
        return (
            f"{where} [{'#' * filled}{'.' * (self.WIDTH - filled)}] {s.fraction:4.0%} "
            f"{s.done:,}/{s.total:,} · {_rate(s.tickets_per_second)} tickets/s · "
            f"pad {_pct(s.padding_efficiency)} · failed {s.failed:,} · ETA {duration(s.eta_seconds)}"
        )


def use_terminal_bar(stream=None) -> None:
    """Swaps the root logger's stderr handlers for a TerminalBar with the same formatter (the CLI, on a tty)."""
    root = logging.getLogger()
    stream = stream or sys.stderr
    for handler in list(root.handlers):
        if isinstance(handler, logging.StreamHandler) and getattr(handler, "stream", None) is stream:
            bar = TerminalBar(stream)
            bar.setFormatter(handler.formatter)
            bar.setLevel(handler.level)
            root.removeHandler(handler)
            root.addHandler(bar)
