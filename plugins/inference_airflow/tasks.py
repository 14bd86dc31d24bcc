"""What each DAG task does, given its Airflow context. Returns only IDs and counts (XCom-safe).

Imports of the `inference` library happen inside the functions: the DAG file imports this module
at parse time, which must stay cheap.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

RETRY_TASK, FINISH_TASK = "retry_failed", "finish_run"


def _no_retry_for_permanent(fn):
    """A PermanentError (configuration, params, model, schema, a run that failed its own checks) fails
    the task at once: AirflowFailException, with the original error as its cause, so no retry is
    spent on it. Everything else is raised as is and Airflow retries it."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from airflow.sdk.exceptions import AirflowFailException

        from inference.errors import PermanentError

        try:
            return fn(*args, **kwargs)
        except PermanentError as exc:
            raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc

    return wrapper


def _skip_if_not_planned(fn):
    """A run that plan never recorded (plan failed, and alerted, before writing anything): the steps
    in between have nothing to do and skip. finish_run does not use this: it fails (final), so the DAG
    run ends failed (a skipped leaf would mark it a success) and on-call hears of it even when plan
    died too hard to run its own callback."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from airflow.sdk.exceptions import AirflowSkipException

        from inference.errors import RunNotFound

        try:
            return fn(*args, **kwargs)
        except RunNotFound as exc:
            raise AirflowSkipException(str(exc)) from exc

    return wrapper


def settings():
    from inference.config import settings_from_env
    from inference_airflow.connection import tickets_db_url

    return settings_from_env(db_url=tickets_db_url())


def window(context: dict[str, Any]):
    """The run's data interval; manual runs without one get the last complete nightly window."""
    from inference.window import last_complete_window, make_window

    start, end = context.get("data_interval_start"), context.get("data_interval_end")
    if start is not None and end is not None and end > start:
        return make_window(start, end)
    dag_run = context.get("dag_run")
    now = getattr(dag_run, "run_after", None) or dt.datetime.now(dt.UTC)
    return last_complete_window(now)


def options(context: dict[str, Any]):
    """The run's params, validated again here: the REST API and `--conf` can bypass the form."""
    from inference.options import parse_options

    conf = getattr(context.get("dag_run"), "conf", None) or {}
    params = dict(context.get("params") or {})
    params.update(conf)  # unknown conf keys must reach the check, not vanish
    return parse_options(params)


@_no_retry_for_permanent
def plan_run(context: dict[str, Any]) -> list[dict]:
    from inference.pipeline import plan_run

    shards = plan_run(settings(), context["run_id"], window(context), options(context))
    return [shard.as_dict() for shard in shards]


@_no_retry_for_permanent
@_skip_if_not_planned
def infer_shard(shard: dict, context: dict[str, Any]) -> dict:
    from inference.pipeline import infer_shard
    from inference.records import ShardSpec

    spec = ShardSpec.from_dict(shard, context["run_id"])
    return infer_shard(settings(), spec.run_id, spec.shard).as_dict()


@_no_retry_for_permanent
@_skip_if_not_planned
def load_results(context: dict[str, Any]) -> dict:
    from inference.pipeline import load_results

    return load_results(settings(), context["run_id"]).as_dict()


@_no_retry_for_permanent
@_skip_if_not_planned
def has_retries(context: dict[str, Any]) -> list[str]:
    from inference.pipeline import has_retries

    return [RETRY_TASK, FINISH_TASK] if has_retries(settings(), context["run_id"]) else [FINISH_TASK]


@_no_retry_for_permanent
@_skip_if_not_planned
def retry_failed(context: dict[str, Any]) -> dict:
    from inference.pipeline import retry_failed

    return retry_failed(settings(), context["run_id"]).as_dict()


@_no_retry_for_permanent
def finish_run(context: dict[str, Any]) -> dict:
    from inference.pipeline import finish_run

    return finish_run(settings(), context["run_id"])
