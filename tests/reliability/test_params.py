"""Hostile or careless run parameters: refused by the task's own check, by the DAG's params schema, and
end to end through dag.test() without processing a single ticket."""

from __future__ import annotations

import copy
import datetime as dt
from pathlib import Path

import pytest

from inference import options as options_module
from inference.options import FIELDS, InvalidOptions, RunOptions, parse_options
from inference.seed import seed_backlog
from tests.support.tables import written_anything
from tests.support.tickets import W2

DAG_FILE = Path(__file__).resolve().parents[2] / "dags" / "ticket_batch_inference.py"
LONG_SQL = "1; DROP TABLE tickets; --" + "x" * 5_000

# (field, value): refused by parse_options and by the DAG's JSON schema alike.
BAD_VALUES = [
    ("limit", "10"),
    ("limit", 0),
    ("limit", -5),
    ("limit", 10_000_001),
    ("limit", True),
    ("limit", [10]),
    ("shards", 0),
    ("shards", 1025),
    ("shards", "2"),
    ("max_batch_tokens", 255),
    ("max_batch_tokens", 10_000_001),
    ("reprocess", 1),
    ("reprocess", "true"),
    ("dry_run", 0),
    ("dry_run", "yes"),
    ("ticket_ids", ["1; DROP TABLE tickets"]),
    ("ticket_ids", ["42", "x' OR '1'='1"]),
    ("ticket_ids", ["1 OR 1=1"]),
    ("ticket_ids", ["1)UNION SELECT password FROM users"]),
    ("ticket_ids", ["admin--"]),
    ("ticket_ids", [LONG_SQL]),
    ("ticket_ids", "1,2,3"),
    ("ticket_ids", ["a" * 129]),
    ("ticket_ids", [""]),
    ("ticket_ids", [None]),
    ("ticket_ids", [True]),
    ("ticket_ids", [{"$ne": None}]),
    ("ticket_ids", ["7"] * 10_001),
    ("window_start", "2026-01-01' OR 1=1 --"),
    ("window_start", "2026-13-01"),
    ("window_start", "2026-02-30"),
    ("window_start", "01/02/2026"),
    ("window_start", "2026-01-01T00:00:00"),
    ("window_start", "20260101"),  # ISO 8601 compact: Python's date.fromisoformat would take it
    ("window_start", "2026-W01-1"),  # ISO week date: likewise
    ("window_start", 20260101),
    ("window_start", "9999-12-31"),  # its window would end past datetime.max: plan_run raised OverflowError
    ("window_start", "1969-12-31"),
    ("window_end", "2026-01-01; DROP TABLE tickets"),
    ("window_end", "3000-01-01"),
]
BAD_IDS = [f"{field}={str(value)[:24]}" for field, value in BAD_VALUES]

# Whole option sets the schema cannot judge field by field: only the task's check refuses them.
BAD_SETS = [
    ({"limt": 5}, "limt"),
    ({"'; DROP TABLE tickets; --": 1}, "DROP TABLE"),
    ({"window_start": "2026-03-01", "window_end": "2026-02-01"}, "window_end"),
    ({"window_end": "2026-03-01"}, "window_end"),
    ({"window_start": "2024-01-01", "window_end": "2026-01-01"}, "366 days"),
    ({"limit": 10.0}, "limit"),  # JSON Schema counts 10.0 as an integer; the task does not
]


@pytest.mark.parametrize(("field", "value"), BAD_VALUES, ids=BAD_IDS)
def test_parse_options_refuses_a_bad_value_and_names_the_field(field, value):
    extra = {"window_start": "2026-11-01"} if field == "window_end" else {}
    with pytest.raises(InvalidOptions) as raised:
        parse_options({**extra, field: value})
    message = str(raised.value)
    assert field in message
    assert len(message) < 300 and "x" * 100 not in message  # never echoes long input


@pytest.mark.parametrize(("values", "named"), BAD_SETS, ids=[str(v)[:30] for v, _ in BAD_SETS])
def test_parse_options_refuses_unknown_keys_and_inconsistent_sets(values, named):
    with pytest.raises(InvalidOptions, match=named.replace("(", r"\(")):
        parse_options(values)


def test_parse_options_accepts_the_good_values_it_is_tested_against():
    """The refusals above are not refusals of everything."""
    assert parse_options({}) == RunOptions()
    full = parse_options(
        {
            "window_start": "2026-11-01",
            "window_end": "2026-11-30",
            "ticket_ids": ["42", "ab-1.x:9_z", 7],
            "reprocess": True,
            "limit": 10,
            "shards": 1024,
            "max_batch_tokens": 256,
            "dry_run": False,
        }
    )
    assert full.window_start == dt.date(2026, 11, 1) and full.ticket_ids == ("42", "7", "ab-1.x:9_z")
    assert set(FIELDS) == set(full.as_dict())


@pytest.fixture(scope="module")
def dag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAG_FILE))
    assert not bag.import_errors
    return bag.get_dag("ticket_batch_inference")


def test_the_dag_params_cover_every_run_option(dag):
    assert set(dag.params) == set(FIELDS)
    copy.deepcopy(dag.params).validate()  # the defaults themselves are valid


def test_the_form_keeps_a_number_as_typed(dag):
    """The trigger form clamps a number field into its schema's minimum/maximum without a word (limit 0 ran
    as 1); the params bound numbers with exclusive limits instead, so 0 is refused, naming the param."""
    from airflow.sdk.definitions.param import ParamValidationError

    schemas = {name: dag.params.get_param(name).schema for name in FIELDS}
    numbers = {name for name, schema in schemas.items() if "integer" in schema["type"]}
    assert numbers == {"limit", "shards", "max_batch_tokens"}
    assert [name for name in numbers if {"minimum", "maximum"} & set(schemas[name])] == []
    with pytest.raises(ParamValidationError, match="param limit"):
        copy.deepcopy(dag.params)["limit"] = 0


@pytest.mark.parametrize(("field", "value"), BAD_VALUES, ids=BAD_IDS)
def test_the_dag_params_schema_refuses_a_bad_value(dag, field, value):
    from airflow.sdk.definitions.param import ParamValidationError

    # The form / REST API check: Param.resolve through the DAG's ParamsDict.
    params = copy.deepcopy(dag.params)
    with pytest.raises(ParamValidationError):
        params[field] = value
    with pytest.raises(ParamValidationError):
        copy.deepcopy(dag.params).get_param(field).resolve(value)


@pytest.mark.parametrize(("field", "value"), BAD_VALUES, ids=BAD_IDS)
def test_the_scheduler_refuses_a_bad_value_in_a_trigger_conf(dag, field, value):
    """What create_dagrun runs on a triggered run's conf: the serialized DAG's params merged with it."""
    from airflow.exceptions import ParamValidationError
    from airflow.serialization.serialized_objects import DagSerialization

    scheduler_params = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag)).params
    extra = {"window_start": "2026-11-01"} if field == "window_end" else {}
    with pytest.raises(ParamValidationError, match=f"param {field}\\b"):
        scheduler_params.deep_merge({**extra, field: value}).validate()


# --- end to end: dag.test() with a bad conf processes nothing ----------------------------------------


@pytest.fixture
def dag_for_test(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(DAG_FILE)).get_dag("ticket_batch_inference")
    for task in dag.tasks:  # a failed task fails at once instead of waiting minutes for its retries
        task.retries = 0
    return dag


@pytest.fixture
def tickets_db(pg_engine, monkeypatch):
    seed_backlog(pg_engine, 12, [W2], seed=3)  # plenty a run would have processed
    url = pg_engine.url
    monkeypatch.setenv("AIRFLOW_CONN_TICKETS_DB", f"postgresql://{url.username}@{url.host}:{url.port}/{url.database}")
    monkeypatch.setenv("TICKETS_DB_URL", "postgresql+psycopg2://nobody@127.0.0.1:1/not-this-one")
    monkeypatch.setenv("INFERENCE_DEVICE", "cpu")
    return pg_engine


@pytest.fixture
def refusals(monkeypatch) -> list[InvalidOptions]:
    """Every InvalidOptions the task's check raises (a spy: the check itself runs unchanged)."""
    seen: list[InvalidOptions] = []
    real = options_module.parse_options

    def spy(values):
        try:
            return real(values)
        except InvalidOptions as exc:
            seen.append(exc)
            raise

    monkeypatch.setattr(options_module, "parse_options", spy)
    return seen


CONFS = {
    "wrong type": ({"limit": "10"}, "limit"),
    "sql-shaped": ({"ticket_ids": ["1; DROP TABLE tickets"]}, "ticket_ids"),
    "unknown key": ({"reprocess": True, "limt": 5}, "limt"),
    "end before start": ({"window_start": "2026-11-30", "window_end": "2026-11-01"}, "window_end"),
    "end alone": ({"window_end": "2026-11-01"}, "window_end"),  # per-param schemas cannot see this one
    "date out of range": ({"window_start": "9999-12-31"}, "window_start"),
}


@pytest.mark.parametrize(("conf", "field"), CONFS.values(), ids=CONFS.keys())
def test_a_dag_run_with_a_bad_conf_processes_nothing(dag_for_test, tickets_db, refusals, conf, field):
    from airflow.exceptions import ParamValidationError

    try:
        dag_run = dag_for_test.test(logical_date=W2.end, run_conf=conf)
    except ParamValidationError as exc:  # Airflow refused to create the run
        assert f"param {field}" in str(exc)
    else:  # the run started: the plan task's own check must have refused it
        states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
        assert states["plan_run"] == "failed" and dag_run.state == "failed"
        assert refusals and all(field in str(exc) for exc in refusals)
        assert "infer_shard" not in states or states["infer_shard"] != "success"

    assert written_anything(tickets_db) == dict.fromkeys(
        ("inference_runs", "inference_run_items", "inference_staging", "ticket_results", "ticket_failures"), 0
    )
