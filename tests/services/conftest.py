"""Fixtures of the service tests: a real distributed Airflow (tests/support/airflow_services.py) on a Redis
broker and PostgreSQL databases of the session's own, alert receivers (tests/support/alert_receivers.py),
and the scenarios (scenarios.py) whose runs are triggered together as soon as Airflow is up.

On two cores a DAG run takes ~40 s, most of it task processes starting up. Runs that a test only has to
wait for are triggered together right after Airflow comes up (for the selected tests only), so they run
side by side while earlier tests work; each test then waits for its own run and checks it. Tests that start
their own runs go first, so the runs overlap. Component and task logs are attached to the report of a
failing test.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest

from tests.services.scenarios import (
    ALERT_DAY,
    ALERT_TAMPERED,
    BACKFILL_DAYS,
    EARLY_SEEDS,
    REST_DAY,
    TEXT_CANARY,
    Scenario,
    prepare_alert_tickets,
)
from tests.support import PROVISIONED
from tests.support.airflow_services import (
    DAG_ID,
    NO_RETRY_PREFIX,
    AirflowService,
    running_airflow,
    seed_process,
    unique_run_id,
)
from tests.support.alert_receivers import Receivers
from tests.support.redis import RedisUnavailable, redis_url
from tests.support.tables import TicketsView


@pytest.fixture(scope="session")
def receivers():
    r = Receivers()
    r.start()
    yield r
    r.stop()


@pytest.fixture(scope="session")
def broker_url():
    """A Redis server of this session's own, on a free port (the machine's redis-server or the wheel's)."""
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(redis_url(PROVISIONED))
        except RedisUnavailable as exc:
            pytest.fail(str(exc), pytrace=False)
        yield url


def _seed_early(svc: AirflowService):
    """Seeds the prelaunched scenarios' tickets while Airflow migrates; returns the wait for them."""
    seeding = {name: seed_process(svc.tickets_url, svc.code, *args) for name, args in EARLY_SEEDS.items()}

    def finish() -> None:
        for name, proc in seeding.items():
            out, _ = proc.communicate(timeout=120)
            if proc.returncode != 0:
                raise AssertionError(f"seeding the {name} tickets failed:\n{out}")
        prepare_alert_tickets(svc.tickets_url)

    return finish


@pytest.fixture(scope="session")
def airflow(pg_admin_url, broker_url, receivers, tmp_path_factory):
    """The running Airflow: API logged in, DAG parsed and unpaused, tickets seeded. Torn down at the end."""
    home = tmp_path_factory.mktemp("airflow-home")
    with running_airflow(pg_admin_url, broker_url, home, extra_env=receivers.env(), setup=_seed_early) as svc:
        yield svc


def pytest_collection_modifyitems(session, config, items):
    """Tests that start their own runs (they seed in the test) go first, so that their runs queue up for the
    pool `gpu` alongside the prelaunched scenarios instead of after them; the others only wait and check."""
    here = Path(__file__).parent
    mine = [i for i in items if Path(str(i.path)).parent == here]
    if not mine:
        return
    first = [i for i in mine if "seed" in getattr(i, "fixturenames", ())]
    rest = [i for i in mine if i not in first]
    ordered = iter(first + rest)
    items[:] = [next(ordered) if Path(str(i.path)).parent == here else i for i in items]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    svc = item.funcargs.get("airflow") if hasattr(item, "funcargs") else None
    if rep.failed and isinstance(svc, AirflowService):
        rep.sections.append(("Airflow logs (tails)", svc.report()))


@pytest.fixture(autouse=True)
def _runs_of_this_test(request):
    svc = request.getfixturevalue("airflow") if "airflow" in request.fixturenames else None
    if svc is not None:
        svc.test_runs.clear()
    yield


@pytest.fixture
def seed(airflow):
    """`python -m inference --db URL seed --tickets N --days K --date D --start-id I`, as an operator would."""
    return airflow.seed


@pytest.fixture
def tickets_engine(airflow):
    engine = airflow.engine()
    yield engine
    engine.dispose()


@pytest.fixture
def run_id_for():
    return unique_run_id


@pytest.fixture(scope="session")
def artifacts_dir(tmp_path_factory):
    """Screenshots (pytest keeps the last three sessions' temporary directories)."""
    return tmp_path_factory.mktemp("artifacts")


@pytest.fixture
def view(tickets_engine):
    return TicketsView(tickets_engine)


# --- scenarios started as soon as Airflow is up ---------------------------------------------------------


@pytest.fixture(scope="session")
def rest_scenario(airflow) -> Scenario:
    """30 tickets on 2026-06-10; a run triggered through the REST API for exactly that window."""
    day = REST_DAY
    run = airflow.trigger(
        {"window_start": day.isoformat(), "window_end": day.isoformat(), "reprocess": False},
        run_id=unique_run_id("rest__"),
    )
    return Scenario(day=day, run_id=run["dag_run_id"], extra={"created": run})


@pytest.fixture(scope="session")
def unknown_option_scenario(airflow) -> Scenario:
    """A run whose conf carries a key the params do not define: the REST API accepts it, plan must not.
    No retries for this run (NO_RETRY_PREFIX): see test_invalid_params for why that matters."""
    run = airflow.trigger({"surprise": 1}, run_id=unique_run_id(NO_RETRY_PREFIX + "unknown__"))
    return Scenario(run_id=run["dag_run_id"], extra={"created": run})


@pytest.fixture(scope="session")
def alert_scenario(airflow) -> Scenario:
    """40 tickets on 2026-06-20, all carrying TEXT_CANARY in their text. Five of them are rewritten in the
    source whenever the run takes them to the model or stages them (scenarios.prepare_alert_tickets), so the
    real check before writing (the text read again must be the text the model saw) rejects them on every
    attempt, they are dead-lettered, and finish_run fails the run for its failure rate (5/40 > 5%): the
    task-level alert fires on every channel."""
    day = ALERT_DAY
    run = airflow.trigger(
        {"window_start": day.isoformat(), "window_end": day.isoformat()}, run_id=unique_run_id("alert__")
    )
    return Scenario(day=day, run_id=run["dag_run_id"], ticket_ids=list(ALERT_TAMPERED), extra={"canary": TEXT_CANARY})


@pytest.fixture(scope="session")
def backfill_scenario(airflow) -> Scenario:
    """60 tickets over 2026-06-01..03; `airflow backfill create` for those three logical dates."""
    # Logical dates are the windows' starts, D 02:00: `--to-date 2026-06-03` (midnight) would stop at 06-02.
    dates = [
        "--from-date",
        BACKFILL_DAYS[0].isoformat(),
        "--to-date",
        f"{BACKFILL_DAYS[-1].isoformat()}T02:00:00+00:00",
    ]
    common = ["backfill", "create", "--dag-id", DAG_ID, *dates]
    # One run at a time: a ticket created before a cutoff and edited after it is in two windows; the later
    # run must see it done (concurrent runs would both compute it, see test_backfill).
    # In the background: the CLI takes a while on two busy cores, and nothing else has to wait for it.
    cli = airflow.cli_background(*common, "--reprocess-behavior", "none", "--max-active-runs", "1")
    return Scenario(days=BACKFILL_DAYS, extra={"dates": dates, "cli": cli})


PRELAUNCHED = ("alert_scenario", "rest_scenario", "unknown_option_scenario", "backfill_scenario")


@pytest.fixture(scope="session", autouse=True)
def _prelaunch(request):
    """Starts the scenarios the selected tests use, all at once, before the first test runs."""
    wanted = {name for item in request.session.items for name in getattr(item, "fixturenames", ())}
    took = []
    for name in PRELAUNCHED:
        if name in wanted:
            started = time.monotonic()
            request.getfixturevalue(name)
            took.append(f"{name} {time.monotonic() - started:.1f}s")
    print(f"\n[services] scenarios started: {', '.join(took)}")
