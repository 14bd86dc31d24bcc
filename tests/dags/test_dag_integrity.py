"""The DAG file: imports cleanly, stays cheap to parse, and wires what the design promises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DAG_FILE = ROOT / "dags" / "ticket_batch_inference.py"
HEAVY = [
    "torch",
    "transformers",
    "pandas",
    "sentence_transformers",
    "tokenizers",
    "inference.engine",
    "inference.store",
]

PARSE_PROBE = """
import json, sys, time
import sqlalchemy.engine
connects = []
orig = sqlalchemy.engine.Engine.connect
sqlalchemy.engine.Engine.connect = lambda self, *a, **k: connects.append(str(self.url)) or orig(self, *a, **k)
from airflow.dag_processing.dagbag import DagBag
started = time.perf_counter()
bag = DagBag(dag_folder=sys.argv[1])
print(json.dumps({
    "errors": {k: str(v)[-500:] for k, v in bag.import_errors.items()},
    "dags": sorted(bag.dag_ids),
    "heavy": sorted(m for m in %(heavy)r if m in sys.modules),
    "ticket_connects": [u for u in connects if "airflow" not in u.rsplit("/", 1)[-1]],
    "seconds": time.perf_counter() - started,
}))
"""


@pytest.fixture(scope="module")
def parsed(airflow_db):
    """Parse the DAG folder in a fresh interpreter, with a tickets DB URL that would fail if touched."""
    env = {**os.environ, "TICKETS_DB_URL": "postgresql+psycopg2://nobody@127.0.0.1:1/unreachable"}
    proc = subprocess.run(
        [sys.executable, "-c", PARSE_PROBE % {"heavy": HEAVY}, str(DAG_FILE)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_dag_imports_without_errors(parsed):
    assert parsed["errors"] == {}
    assert parsed["dags"] == ["ticket_batch_inference"]


def test_parsing_imports_no_heavy_module_and_opens_no_ticket_db_connection(parsed):
    assert parsed["heavy"] == []
    assert parsed["ticket_connects"] == []


@pytest.fixture(scope="module")
def dag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAG_FILE))
    return bag.get_dag("ticket_batch_inference")


def test_schedule_is_the_previous_day_at_0200_utc(dag):
    from airflow.sdk import CronDataIntervalTimetable

    assert isinstance(dag.timetable, CronDataIntervalTimetable)
    assert dag.timetable.expression == "0 2 * * *"
    assert str(dag.timetable.timezone) in ("UTC", "Timezone('UTC')")
    assert dag.catchup is False


def test_task_graph_and_routing(dag):
    from inference_airflow.alert_incidents import TASK_ORDER

    tasks = {t.task_id: t for t in dag.tasks}
    # The one-alert-per-incident rules order failures by TASK_ORDER: it must hold every task, upstream first.
    assert set(tasks) == set(TASK_ORDER) and len(TASK_ORDER) == len(set(TASK_ORDER)) == 8
    for task in dag.tasks:
        for child in task.downstream_task_ids:
            assert TASK_ORDER.index(task.task_id) < TASK_ORDER.index(child), (task.task_id, child)
    assert tasks["infer_shard"].pool == tasks["retry_failed"].pool == "gpu"
    assert tasks["infer_shard"].queue == tasks["retry_failed"].queue == "gpu"
    assert {t.queue for t in dag.tasks if t.task_id not in ("infer_shard", "retry_failed")} == {"default"}
    assert tasks["plan_run"].downstream_task_ids == {"infer_shard"}
    assert tasks["infer_shard"].downstream_task_ids == {"summarize_batch"}
    assert tasks["summarize_batch"].downstream_task_ids == {"load_results"}
    assert tasks["load_results"].downstream_task_ids == {"has_retries"}
    assert tasks["has_retries"].downstream_task_ids == {"retry_failed", "finish_run"}
    assert tasks["retry_failed"].downstream_task_ids == {"summarize_retries"}
    assert tasks["summarize_retries"].downstream_task_ids == {"finish_run"}
    assert tasks["load_results"].trigger_rule == tasks["summarize_batch"].trigger_rule == "all_done"
    assert tasks["summarize_retries"].trigger_rule == "all_success"  # skipped with retry_failed
    assert tasks["finish_run"].trigger_rule == "all_done"
    assert all(t.retries >= 1 for t in dag.tasks)
