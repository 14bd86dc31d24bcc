"""Where plan_run's memory goes: Python's peak allocation (tracemalloc) during each planning call, for a copy of
a seeded template kept by `python -m inference bench --part overhead --tickets N --keep-seed`, and how many
source rows plan leaves to Python (no ASCII letter or digit in subject and body: their text comes to Python,
inference/store/source.py "Hashes in the database").

    python benchmarks/plan_memory.py --pg-url postgresql://postgres@127.0.0.1:5432/postgres --tickets 100000
"""

from __future__ import annotations

import argparse
import functools
import json
import tracemalloc

import sqlalchemy as sa

from inference.bench.overhead_bench import DATE, SEED_VERSION
from inference.bench.scratchdb import database_exists, scratch_database
from inference.config import settings_from_env
from inference.store import migrate, planning
from inference.store.db import make_engine
from inference.store.source import Source
from inference.window import window_for_date

CALLS = (
    "open_tables",
    "add_source_pages",
    "keep_newest",
    "counts",
    "write_items",
    "shard_sizes",
    "unsupported",
    "emptied",
)


def _watched(peaks: dict, name: str, fn):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        try:
            return fn(*args, **kwargs)
        finally:
            peaks[name] = round((tracemalloc.get_traced_memory()[1] - before) / 2**20, 2)

    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg-url", required=True, help="an admin URL of the server holding the kept template")
    parser.add_argument("--tickets", type=int, required=True)
    args = parser.parse_args()
    template = f"inference_bench_seed_{args.tickets}_v{SEED_VERSION}"
    if not database_exists(args.pg_url, template):
        raise SystemExit(
            f"no {template}: run `python -m inference bench --part overhead --tickets N --keep-seed` first"
        )
    from inference.pipeline import plan_run  # after the imports the step itself does not count

    peaks: dict[str, float] = {}
    for name in CALLS:
        setattr(planning, name, _watched(peaks, name, getattr(planning, name)))
    with scratch_database(args.pg_url, "inference_bench_planmem", template) as url:
        engine = make_engine(url)
        try:
            migrate.upgrade(engine)
            settings = settings_from_env(db_url=url)
            source = Source(engine, settings.source)
            to_python = sa.select(sa.func.count()).where(sa.not_(source._plain()))  # noqa: SLF001 - the same rule
            with engine.connect() as conn:
                rows_to_python = conn.scalar(to_python.select_from(source.table))
            tracemalloc.start()
            plan_run(settings, "plan-memory", window_for_date(DATE))
        finally:
            engine.dispose()
    print(
        json.dumps(
            {
                "tickets": args.tickets,
                "plans_in_db": source.plans_in_db,
                "rows_to_python": rows_to_python,
                "peak_mib_added_by_call": peaks,
            }
        )
    )


if __name__ == "__main__":
    main()
