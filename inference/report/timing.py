"""Wall time of a run's steps, and the throughput and cost derived from it (no pandas: finish_run uses it).

Throughput counts only the time when at least one model task (infer_shard, retry_failed) was running: time
spent queued for the `gpu` pool, or in plan and load, is not the model's. Device-seconds are what the model
tasks held a device for (each invocation's wall time, added up), which is what a provider bills.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MODEL_STEPS = ("infer_shard", "retry_failed")


@dataclass(frozen=True)
class StepSpan:
    step: str
    shard: int
    started_at: dt.datetime
    finished_at: dt.datetime | None
    status: str

    @property
    def seconds(self) -> float | None:
        return (self.finished_at - self.started_at).total_seconds() if self.finished_at else None


def spans(rows: Iterable) -> list[StepSpan]:
    return [StepSpan(r.step, r.shard, r.started_at, r.finished_at, r.status) for r in rows]


def union_seconds(intervals: Iterable[tuple[dt.datetime, dt.datetime]]) -> float:
    """Seconds covered by at least one of the intervals (overlaps counted once)."""
    total, end = 0.0, None
    for start, stop in sorted(intervals):
        if end is None or start > end:
            total += (stop - start).total_seconds()
            end = stop
        elif stop > end:
            total += (stop - end).total_seconds()
            end = stop
    return total


@dataclass(frozen=True)
class Timing:
    model_wall_seconds: float  # while at least one model task ran
    device_seconds: float  # model tasks' wall time added up: what they held a device for
    per_step: dict[str, float]  # step -> wall seconds of its finished invocations, added up
    invocations: dict[str, int]  # step -> invocations recorded (a retried or killed task counts each try)
    unfinished: dict[str, int]  # step -> invocations that never finished (killed, or still running)


def timing(rows: Sequence[StepSpan]) -> Timing:
    finished = [s for s in rows if s.finished_at is not None]
    model = [(s.started_at, s.finished_at) for s in finished if s.step in MODEL_STEPS]
    per_step: dict[str, float] = {}
    invocations: dict[str, int] = {}
    unfinished: dict[str, int] = {}
    for s in rows:
        invocations[s.step] = invocations.get(s.step, 0) + 1
        if s.finished_at is None:
            unfinished[s.step] = unfinished.get(s.step, 0) + 1
        else:
            per_step[s.step] = per_step.get(s.step, 0.0) + s.seconds
    return Timing(
        model_wall_seconds=union_seconds(model),
        device_seconds=sum((b - a).total_seconds() for a, b in model),
        per_step=per_step,
        invocations=invocations,
        unfinished=unfinished,
    )


def per_second(count: float, seconds: float | None) -> float | None:
    return round(count / seconds, 2) if seconds else None


def cost_per_1000(device_seconds: float, tickets: int, price_per_device_hour: float) -> float | None:
    """Price of the device time per 1,000 tickets; None without a price or tickets."""
    if not price_per_device_hour or not tickets:
        return None
    return round(price_per_device_hour * device_seconds / 3600 / tickets * 1000, 6)
