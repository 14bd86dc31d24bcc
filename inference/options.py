"""Per-run options (CLI flags, DAG trigger params): declared once here, checked here whatever path they came by.

Each field is declared with `option(...)` (inference.settings_spec): the Airflow form's schema
(plugins/inference_airflow/params.py) and the CLI's `run` flags derive from the same declaration. The form
validates each param alone, and the REST API and `airflow dags trigger --conf` can send anything; this is
the check that runs inside the task, including the rules that tie options together.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from inference.errors import InvalidOptions
from inference.settings_spec import (
    DEFAULT_MAX_SEQ_LENGTH,
    MAX_BATCH_TOKENS,
    MAX_SHARDS,
    MAX_WINDOW_DAYS,
    option,
    options_of,
    short_repr,
)
from inference.window import Window, window_for_date


@dataclass(frozen=True)
class RunOptions:
    window_start: dt.date | None = option(
        "date",
        "First logical date (optional)",
        "Reprocess the nightly windows from this date (YYYY-MM-DD): window [date 02:00, ...) UTC. "
        "Empty: the run's own window (the previous day).",
    )
    window_end: dt.date | None = option(
        "date",
        "Last logical date (optional)",
        f"Last date of the range, inclusive (needs a first date; at most {MAX_WINDOW_DAYS} days after it). "
        "Empty: same as the first date.",
    )
    ticket_ids: tuple[str, ...] | None = option(
        "ids",
        "Ticket IDs (optional)",
        "Process exactly these tickets, whatever their dates, even if they have a current result.",
        flag="--ticket-id",
    )
    reprocess: bool = option(
        "bool",
        "Reprocess",
        "Recompute tickets that already have a result for the current text and model.",
        flag="--reprocess",
    )
    limit: int | None = option(
        "int",
        "Limit (optional)",
        "Process at most this many tickets (the lowest ticket IDs first).",
        low=1,
        high=10_000_000,
        flag="--limit",
    )
    shards: int | None = option(
        "int",
        "Shards (optional)",
        "Number of parallel infer_shard tasks. Empty: from the estimated tokens.",
        low=1,
        high=MAX_SHARDS,
        flag="--shards",
    )
    # The floor is the default INFERENCE_MAX_SEQ_LENGTH: the form cannot know a worker's own.
    max_batch_tokens: int | None = option(
        "int",
        "Max batch tokens (optional)",
        "Padded tokens per forward pass for this run; lower it if a GPU runs out of memory. "
        "Empty: the worker's INFERENCE_MAX_BATCH_TOKENS.",
        low=DEFAULT_MAX_SEQ_LENGTH,
        high=MAX_BATCH_TOKENS,
        flag="--max-batch-tokens",
    )
    dry_run: bool = option(
        "bool",
        "Dry run",
        "Plan and report how many tickets would be processed; run no model, write no results.",
        flag="--dry-run",
    )

    def window(self, default: Window) -> Window:
        if self.window_start is None:
            return default
        last = self.window_end or self.window_start
        return Window(window_for_date(self.window_start).start, window_for_date(last).end)

    def as_dict(self) -> dict:
        out = asdict(self)
        for key in ("window_start", "window_end"):
            out[key] = out[key].isoformat() if out[key] else None
        out["ticket_ids"] = list(self.ticket_ids) if self.ticket_ids is not None else None
        return out


OPTIONS = options_of(RunOptions)
FIELDS = tuple(OPTIONS)


def parse_options(values: Mapping[str, object]) -> RunOptions:
    unknown = sorted(set(values) - set(FIELDS))
    if unknown:
        names = ", ".join(short_repr(k) for k in unknown[:5])
        raise InvalidOptions(f"unknown run option(s): {names}; known: {', '.join(FIELDS)}")
    parsed = {name: spec.parse(values.get(name)) for name, spec in OPTIONS.items()}
    start, end = parsed["window_start"], parsed["window_end"]
    if end is not None and start is None:
        raise InvalidOptions("window_end needs window_start")
    if start is not None and end is not None and end < start:
        raise InvalidOptions(f"window_end {end} is before window_start {start}")
    if start is not None and (end or start) - start > dt.timedelta(days=MAX_WINDOW_DAYS):
        raise InvalidOptions(f"a window override may span at most {MAX_WINDOW_DAYS} days: use a backfill for more")
    return RunOptions(**parsed)


def options_from_record(record: Mapping[str, object] | None) -> RunOptions:
    """The options stored with a run (inference_runs.options) back as RunOptions."""
    return parse_options({k: v for k, v in (record or {}).items() if k in FIELDS})
