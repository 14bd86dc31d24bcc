"""Big windows of big tickets (issue 12): plan, infer and load hold bounded memory whatever the window size and
the ticket size. Each step runs in a fresh interpreter (tests/support/memory_child.py) over a window of 1 MB
tickets, 8 and then 40 of them, on SQLite and on PostgreSQL; what the step adds to the process's resident
memory at its worst moment must not grow with the window (40 tickets are 40 MB of text)."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys

import pytest
import sqlalchemy as sa

from inference.store.db import writing
from inference.window import window_for_date
from tests.support import ROOT
from tests.support.sources import Shapes

AT = window_for_date(dt.date(2026, 11, 30)).start + dt.timedelta(hours=3)
MB = 1_000_000
STEPS = ("plan_run", "infer_shard", "load_results")
# What a step may add at its peak (its own setup, such as plan's model checks, a fetch of text, a chunk,
# buffers): less than the 40 MB of text of the big window, which a step holding the window would add on top.
MAX_GROWTH_MIB = 36
MAX_EXTRA_MIB = 8  # ... and how much more the window five times the size may cost (measured: about 2)


def big_body(k: int) -> str:
    words = " ".join(f"word{k}x{n}" for n in range(200))
    return (words + " ") * (MB // (len(words) + 1))


def measure(url: str, table: str, run_id: str) -> dict[str, dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = {}
    for step in STEPS:
        proc = subprocess.run(
            [sys.executable, "-m", "tests.support.memory_child", step, url, run_id, table],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        out[step] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def test_forty_one_megabyte_tickets_plan_infer_and_load_in_bounded_memory(db_engine, request):
    shapes = Shapes(db_engine)
    request.addfinalizer(shapes.close)
    url = db_engine.url.render_as_string(hide_password=False)
    measured = {}
    for n in (8, 40):
        table = f"big{n}"
        shapes.tickets_table(table)
        for k in range(n):  # one at a time: the test process does not hold the window either
            row = dict(ticket_id=k + 1, subject=f"Big ticket {k}", body=big_body(k), created_at=AT, updated_at=AT)
            shapes.insert(table, [row])
        measured[n] = measure(url, table, f"run-big-{n}")
        assert measured[n]["infer_shard"]["result"]["staged"] == n
        assert measured[n]["load_results"]["result"]["written"] == n
        with writing(db_engine) as conn:  # the next window's tickets are other tickets
            conn.execute(sa.text("DELETE FROM ticket_results"))
    report = {n: {step: m[step]["growth_mib"] for step in STEPS} for n, m in measured.items()}
    print(f"\n{db_engine.dialect.name}: MiB added at the peak of each step, by window size: {report}")
    for step in STEPS:
        small, big = measured[8][step]["growth_mib"], measured[40][step]["growth_mib"]
        assert big <= MAX_GROWTH_MIB, (step, report)
        assert big - small <= MAX_EXTRA_MIB, (step, report)


@pytest.mark.parametrize("n", [40])
def test_the_window_text_never_reaches_xcom_sized_values(n):
    """The shard descriptors plan returns are IDs and counts only (the same on every dialect)."""
    from inference.records import ShardSpec

    spec = ShardSpec("run", 0, n, 256 * n)
    assert len(json.dumps(spec.as_dict())) < 200
