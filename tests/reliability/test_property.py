"""Property: whatever sequence of runs, crashes and reruns, edits, backfills and model changes happens,
every completed run leaves ticket_results exactly right for the windows it has covered.

A "crash" is a real exception at a random point: on the Nth SQL statement of the pipeline's own engines
(a SQLAlchemy before_cursor_execute hook on every engine Runtime makes), or a broken device in the Nth
forward pass. After it, the window is rerun either the way Airflow retries a task (same run, the failed
step again, then the rest) or as a fresh run of the window.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, currently_in_test_context, event, example, given, settings
from hypothesis import strategies as st

import inference.pipeline.runtime as runtime_module
from inference.engine.encoder import Encoder
from inference.errors import DeviceBroken
from inference.options import RunOptions
from inference.pipeline import finish_run, has_retries, infer_shard, load_results, plan_run, retry_failed
from inference.store.db import make_engine, writing
from inference.store.schema import create_schema, inference_run_items, tickets
from inference.textprep import content_hash, model_input
from tests.support.tables import results
from tests.support.tickets import DAY1, DAY2, W1, W2, settings_for

WINDOWS = (W1, W2)
N_TICKETS = 12  # 1-6 in W1, 7-12 in W2
EMPTY_AT_START = {6: (None, None), 12: ("  ", "\t\n")}
BODIES = (
    "I was charged twice for the Pro plan this month.",
    "The mobile app crashes when I open settings.",
    "Where is my parcel? Tracking has not moved for a week.",
    "Please add an export to CSV for reports.",
    "I cannot log in, the reset email never arrives.",
    "Cancel my subscription at the end of the period.",
    "Refund 📦 لم يصل \u202eטלפון\u202c please",
)


class InjectedFault(Exception):
    """Stands for a dropped connection / killed process at one exact statement."""


class Fault:
    """At most one armed fault at a time; it fires once, on the Nth event of its kind. Events come from
    the pipeline's own threads too (infer_shard reads ahead and writes behind), hence the lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.kind: str | None = None
        self.n = 0
        self.seen = 0
        self.fired = False
        self.fired_total = 0

    def arm(self, kind: str, n: int) -> None:
        self.kind, self.n, self.seen, self.fired = kind, n, 0, False

    def disarm(self) -> None:
        self.kind = None

    def tick(self, kind: str) -> None:
        with self.lock:
            if self.kind != kind:
                return
            self.seen += 1
            if self.seen != self.n:
                return
            self.fired = True
            self.fired_total += 1
            self.kind = None
        if kind == "sql":
            raise InjectedFault(f"injected fault at SQL statement {self.n}")
        raise RuntimeError("CUDA error: an illegal memory access was encountered (injected)")


@pytest.fixture(scope="module")
def fault():
    """Wires the fault into every engine Runtime makes and into Encoder.forward, for this module only."""
    fault = Fault()
    real_make_engine, real_forward = runtime_module.make_engine, Encoder.forward

    def make_engine_with_faults(url, **kwargs):
        engine = real_make_engine(url, **kwargs)
        sa.event.listen(engine, "before_cursor_execute", lambda *_: fault.tick("sql"))
        return engine

    def forward(self, *args, **kwargs):
        fault.tick("device")
        return real_forward(self, *args, **kwargs)

    mp = pytest.MonkeyPatch()
    mp.setattr(runtime_module, "make_engine", make_engine_with_faults)
    mp.setattr(Encoder, "forward", forward)
    yield fault
    mp.undo()


class Backlog:
    """One example's world: the database, the model version, and what the invariant may demand."""

    def __init__(self, engine: sa.Engine, model, fault: Fault, *, seed: bool = True, chunk_size: int = 3):
        self.engine, self.base_model, self.fault, self.chunk_size = engine, model, fault, chunk_size
        self.version = 1
        self.runs = 0
        self.clock = 0
        self.covered: set[int] = set()  # windows whose latest completed run saw the current text and model
        if seed:
            self.seed()

    def seed(self, only: tuple[int, ...] = tuple(range(1, N_TICKETS + 1))) -> None:
        rows = []
        for ticket_id in only:
            w = 0 if ticket_id <= 6 else 1
            at = WINDOWS[w].start + dt.timedelta(minutes=ticket_id)
            subject, body = EMPTY_AT_START.get(ticket_id, (f"Ticket {ticket_id}", BODIES[ticket_id % len(BODIES)]))
            rows.append(dict(ticket_id=ticket_id, subject=subject, body=body, created_at=at, updated_at=at))
        with writing(self.engine) as conn:
            conn.execute(sa.insert(tickets), rows)

    @property
    def settings(self):
        return settings_for(
            self.engine, model_version=f"prop@{self.version}", chunk_size=self.chunk_size, shard_tokens=1_000
        )

    @property
    def model(self):
        return dataclasses.replace(self.base_model, version=f"prop@{self.version}")

    def next_run_id(self) -> str:
        self.runs += 1
        return f"run-{self.runs}"

    # --- the pipeline, step by step, with Airflow's retry semantics ---------------------------------

    def drive(self, run_id: str, window, options: RunOptions | None = None, *, retry_task: bool, hook=None) -> dict:
        """plan -> infer_shard* -> load_results -> [retry_failed] -> finish_run. With retry_task, a step hit
        by the fault is run again (same run), as an Airflow task retry would; otherwise the fault escapes."""
        settings, model = self.settings, self.model

        def task(fn):
            try:
                return fn()
            except (InjectedFault, DeviceBroken):
                if not retry_task:
                    raise
                self.fault.disarm()
                return fn()

        shards = task(lambda: plan_run(settings, run_id, window, options))
        for shard in shards:
            task(lambda shard=shard: infer_shard(settings, run_id, shard.shard, predictor=model))
        if hook is not None:
            hook(run_id)
        task(lambda: load_results(settings, run_id))
        if task(lambda: has_retries(settings, run_id)):
            task(lambda: retry_failed(settings, run_id, predictor=model))
        summary = task(lambda: finish_run(settings, run_id))
        assert summary["status"] == "succeeded", summary
        assert summary["failed"] == 0, summary
        return summary

    def completed(self, windows) -> None:
        self.covered |= set(windows)
        self.check()

    # --- the steps --------------------------------------------------------------------------------------

    def run(self, w: int) -> None:
        self.drive(self.next_run_id(), WINDOWS[w], retry_task=False)
        self.completed([w])

    def crash_and_rerun(self, target: int | str, kind: str, n: int, retry_task: bool) -> None:
        """target: a window, or "both" for a backfill over the two."""
        window, options = (
            (WINDOWS[1], RunOptions(window_start=DAY1, window_end=DAY2))
            if target == "both"
            else (WINDOWS[target], None)
        )
        self.fault.arm(kind, n)
        try:
            self.drive(self.next_run_id(), window, options, retry_task=retry_task)
        except (InjectedFault, DeviceBroken):
            assert not retry_task
            self.fault.disarm()
            self.drive(self.next_run_id(), window, options, retry_task=False)  # a fresh run of the window
        finally:
            self.fault.disarm()
        if currently_in_test_context():
            event(f"{kind} fault {'fired' if self.fault.fired else 'did not fire'}")
        self.completed([0, 1] if target == "both" else [target])

    def edit(self, ticket_id: int, body_index: int) -> None:
        self._edit(ticket_id, BODIES[body_index])
        self.covered.discard(0 if ticket_id <= 6 else 1)

    def edit_during_run(self, w: int, pick: int, body_index: int) -> None:
        """A ticket of the run is edited after infer read it and before load writes it."""

        def hook(run_id):
            with self.engine.connect() as conn:
                staged = sorted(
                    conn.scalars(
                        sa.select(inference_run_items.c.ticket_id).where(
                            inference_run_items.c.run_id == run_id, inference_run_items.c.status == "staged"
                        )
                    ),
                    key=int,
                )
            if staged:
                self._edit(int(staged[pick % len(staged)]), f"{BODIES[body_index]} (edited mid-run)")

        self.drive(self.next_run_id(), WINDOWS[w], retry_task=False, hook=hook)
        self.completed([w])

    def backfill(self) -> None:
        options = RunOptions(window_start=DAY1, window_end=DAY2)
        self.drive(self.next_run_id(), WINDOWS[1], options, retry_task=False)
        self.completed([0, 1])

    def new_model(self) -> None:
        self.version += 1
        self.covered = set()

    def _edit(self, ticket_id: int, body: str) -> None:
        self.clock += 1
        w = 0 if ticket_id <= 6 else 1
        at = WINDOWS[w].start + dt.timedelta(hours=2, minutes=self.clock)  # later than any earlier version
        with writing(self.engine) as conn:
            conn.execute(sa.update(tickets).where(tickets.c.ticket_id == ticket_id).values(body=body, updated_at=at))

    # --- the invariant ---------------------------------------------------------------------------------

    def check(self) -> None:
        with self.engine.connect() as conn:
            current = {str(r.ticket_id): r for r in conn.execute(sa.select(tickets))}
        stored = results(self.engine)
        non_empty = {t for t, r in current.items() if model_input(r.subject, r.body, 10_000)[0] is not None}
        assert set(stored) <= non_empty, "a result for an empty or unknown ticket"
        for w in self.covered:
            for ticket_id in range(1 if w == 0 else 7, 7 if w == 0 else 13):
                key = str(ticket_id)
                if key not in non_empty:  # empty, or not part of this backlog
                    continue
                row = current[key]
                assert key in stored, f"ticket {key} of covered window {w} has no result"
                assert stored[key].content_hash == content_hash(row.subject, row.body), f"ticket {key}: stale text"
                assert stored[key].model_version == f"prop@{self.version}", f"ticket {key}: stale model"
                # Not necessarily equal: a touch that leaves the text as it was needs no new result.
                assert stored[key].source_updated_at <= row.updated_at


STEP = st.one_of(
    st.tuples(st.just("run"), st.integers(0, 1)),
    st.tuples(  # a run of these windows issues ~25 (nothing to do) to ~110 (backfill) SQL statements
        st.just("crash"), st.sampled_from([0, 1, "both"]), st.just("sql"), st.integers(1, 70), st.booleans()
    ),
    st.tuples(  # and makes one to a few forward passes
        st.just("crash"), st.sampled_from([0, 1, "both"]), st.just("device"), st.integers(1, 3), st.booleans()
    ),
    st.tuples(st.just("edit"), st.integers(1, N_TICKETS), st.integers(0, len(BODIES) - 1)),
    st.tuples(st.just("edit_during_run"), st.integers(0, 1), st.integers(0, 5), st.integers(0, len(BODIES) - 1)),
    st.tuples(st.just("backfill")),
    st.tuples(st.just("new_model")),
)


def play(backlog: Backlog, steps) -> None:
    for step in steps:
        kind, *args = step
        getattr(backlog, {"crash": "crash_and_rerun"}.get(kind, kind))(*args)
    backlog.backfill()  # and at the end, everything is covered at once
    assert backlog.covered == {0, 1}


EXPLICIT = [
    ("crash", 1, "sql", 37, True),  # the first run of W2 dies mid-way; the failed task is retried
    ("edit", 8, 2),
    ("crash", 1, "sql", 30, False),  # dies again; a fresh run of the window follows
    ("edit_during_run", 0, 1, 3),
    ("edit", 3, 4),
    ("crash", 0, "device", 1, True),  # the device breaks in the first forward pass
    ("edit", 12, 0),  # an empty ticket gets text
    ("new_model",),
    ("crash", "both", "sql", 60, False),  # a backfill of both windows under the new model dies late
]


@settings(
    max_examples=int(os.environ.get("RELIABILITY_EXAMPLES", "10")),  # more for a deeper local search
    deadline=None,
    database=None,  # no .hypothesis directory in the working tree
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(STEP, min_size=1, max_size=6))
@example(steps=EXPLICIT)
def test_any_sequence_of_runs_crashes_edits_and_backfills_converges_on_sqlite(model, fault, steps):
    with tempfile.TemporaryDirectory(prefix="reliability-prop-") as tmp:
        engine = make_engine(f"sqlite:///{Path(tmp) / 'tickets.db'}")
        try:
            create_schema(engine, with_demo_source=True)
            play(Backlog(engine, model, fault), steps)
        finally:
            engine.dispose()


def test_an_explicit_sequence_converges_on_postgresql(pg_engine, model, fault):
    before = fault.fired_total
    play(Backlog(pg_engine, model, fault), EXPLICIT)
    assert fault.fired_total - before == sum(1 for step in EXPLICIT if step[0] == "crash")  # every crash happened


def test_a_crash_at_every_statement_of_a_run_then_a_task_retry_converges(model, fault, tmp_path):
    """Not random: the first run of a window, killed at its 1st, 2nd, ... Nth SQL statement (every
    transaction boundary included), each time followed by Airflow's retry of the failed task.
    A small backlog (two tickets in chunks of one, and an empty one) keeps every boundary and the cost low."""
    template = tmp_path / "template.db"
    engine = make_engine(f"sqlite:///{template}")
    create_schema(engine, with_demo_source=True)
    Backlog(engine, model, fault, seed=False).seed(only=(7, 8, 12))  # each N below starts from a copy
    engine.dispose()
    assert not Path(f"{template}-wal").exists() or Path(f"{template}-wal").stat().st_size == 0
    fired = 0
    for n in range(1, 200):
        db = tmp_path / f"n{n}.db"
        shutil.copyfile(template, db)
        engine = make_engine(f"sqlite:///{db}")
        try:
            backlog = Backlog(engine, model, fault, seed=False, chunk_size=1)
            backlog.crash_and_rerun(1, "sql", n, retry_task=True)  # checks the invariant when done
        finally:
            engine.dispose()
            db.unlink()
        if not fault.fired:
            break  # the run has fewer than n statements: every point was covered
        fired += 1
    assert fired >= 25, f"only {fired} statements: the sweep did not cover a whole run"
