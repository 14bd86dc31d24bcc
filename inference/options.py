"""Per-run options (CLI flags, DAG trigger params): validated here, whatever path they came by.

The Airflow form validates params with JSON schema, but the REST API and `airflow dags trigger --conf`
can send anything; this is the check that runs inside the task.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from inference.errors import InvalidOptions
from inference.window import Window, as_utc, window_for_date

TICKET_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
MAX_TICKET_IDS = 10_000
LIMITS = {"limit": (1, 10_000_000), "shards": (1, 1024), "max_batch_tokens": (256, 10_000_000)}


@dataclass(frozen=True)
class RunOptions:
    window_start: dt.date | None = None  # first logical date (inclusive) instead of the run's window
    window_end: dt.date | None = None  # last logical date (inclusive); defaults to window_start
    ticket_ids: tuple[str, ...] | None = None  # exactly these tickets, whatever their dates
    reprocess: bool = False  # recompute even when a current result exists
    limit: int | None = None
    shards: int | None = None
    max_batch_tokens: int | None = None
    dry_run: bool = False  # plan and report; infer nothing, write no results

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


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _date(name: str, value: object) -> dt.date | None:
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return as_utc(value).date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            pass
    raise InvalidOptions(f"{name} must be a date as YYYY-MM-DD, got {_short(value)}")


def _int(name: str, value: object) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOptions(f"{name} must be an integer, got {_short(value)}")
    low, high = LIMITS[name]
    if not low <= value <= high:
        raise InvalidOptions(f"{name} must be between {low} and {high}, got {value}")
    return value


def _bool(name: str, value: object) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidOptions(f"{name} must be true or false, got {_short(value)}")
    return value


def _ticket_ids(value: object) -> tuple[str, ...] | None:
    if value is None or value == []:
        return None
    if not isinstance(value, (list, tuple)):
        raise InvalidOptions(f"ticket_ids must be a list of ticket IDs, got {_short(value)}")
    if len(value) > MAX_TICKET_IDS:
        raise InvalidOptions(f"ticket_ids holds {len(value)} IDs; at most {MAX_TICKET_IDS} per run")
    ids = []
    for item in value:
        item = str(item) if isinstance(item, int) and not isinstance(item, bool) else item
        if not isinstance(item, str) or not TICKET_ID.fullmatch(item):
            raise InvalidOptions(
                f"ticket_ids: {_short(item)} is not a ticket ID (1-128 letters, digits, '_', '.', ':' or '-')"
            )
        ids.append(item)
    return tuple(sorted(set(ids)))


FIELDS = ("window_start", "window_end", "ticket_ids", "reprocess", "limit", "shards", "max_batch_tokens", "dry_run")


def parse_options(values: Mapping[str, object]) -> RunOptions:
    unknown = sorted(set(values) - set(FIELDS))
    if unknown:
        names = ", ".join(_short(k) for k in unknown[:5])
        raise InvalidOptions(f"unknown run option(s): {names}; known: {', '.join(FIELDS)}")
    start, end = _date("window_start", values.get("window_start")), _date("window_end", values.get("window_end"))
    if end is not None and start is None:
        raise InvalidOptions("window_end needs window_start")
    if start is not None and end is not None and end < start:
        raise InvalidOptions(f"window_end {end} is before window_start {start}")
    if start is not None and (end or start) - start > dt.timedelta(days=366):
        raise InvalidOptions("a window override may span at most 366 days: use a backfill for more")
    return RunOptions(
        window_start=start,
        window_end=end,
        ticket_ids=_ticket_ids(values.get("ticket_ids")),
        reprocess=_bool("reprocess", values.get("reprocess")),
        limit=_int("limit", values.get("limit")),
        shards=_int("shards", values.get("shards")),
        max_batch_tokens=_int("max_batch_tokens", values.get("max_batch_tokens")),
        dry_run=_bool("dry_run", values.get("dry_run")),
    )


def options_from_record(record: Mapping[str, object] | None) -> RunOptions:
    """The options stored with a run (inference_runs.options) back as RunOptions."""
    return parse_options({k: v for k, v in (record or {}).items() if k in FIELDS})
