"""What each DAG task does, given its Airflow context. Returns only IDs and counts (XCom-safe).

Imports of the `inference` library happen inside the functions: the DAG file imports this module
at parse time, which must stay cheap.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

RETRY_TASK, FINISH_TASK = "retry_failed", "finish_run"


def _final(fn=None, *, not_planned: str = "skip"):
    """Errors that a retry cannot fix (bad configuration or params, a run that failed its own checks)
    fail the task at once: AirflowFailException, with the original error as its cause.

    A run that plan never recorded (plan failed, and alerted, before writing anything): the steps in
    between have nothing to do and skip (`not_planned="skip"`); finish_run fails (`"fail"`), final, so
    the DAG run ends failed (a skipped leaf would mark it a success) and on-call hears of it even when
    plan died too hard to run its own callback."""
    import functools

    if fn is None:
        return functools.partial(_final, not_planned=not_planned)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

        from inference.config import ConfigError
        from inference.modelinfo import ModelUnavailable
        from inference.pipeline import ModelChanged, RunFailed
        from inference.store.runs import RunNotFound

        try:
            return fn(*args, **kwargs)
        except RunNotFound as exc:
            if not_planned == "fail":
                raise AirflowFailException(f"RunNotFound: {exc}; plan failed: see its log") from exc
            raise AirflowSkipException(str(exc)) from exc
        except (ConfigError, ModelUnavailable, ModelChanged, RunFailed) as exc:
            raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc

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


@_final
def plan(context: dict[str, Any]) -> list[dict]:
    from inference.pipeline import plan_run

    run_options = options(context)
    return plan_run(settings(), context["run_id"], window(context), run_options)


@_final
def infer(shard: dict, context: dict[str, Any]) -> dict:
    from inference.pipeline import infer_shard

    if shard.get("run_id") != context["run_id"] or not isinstance(shard.get("shard"), int):
        raise ValueError(f"shard descriptor does not belong to run {context['run_id']}: {shard!r}")
    return infer_shard(settings(), context["run_id"], shard["shard"])


@_final
def load(context: dict[str, Any]) -> dict:
    from inference.pipeline import load_results

    return load_results(settings(), context["run_id"])


@_final
def choose_branch(context: dict[str, Any]) -> list[str]:
    from inference.pipeline import pending_retries

    return [RETRY_TASK, FINISH_TASK] if pending_retries(settings(), context["run_id"]) else [FINISH_TASK]


@_final
def retry(context: dict[str, Any]) -> dict:
    from inference.pipeline import retry_failed

    return retry_failed(settings(), context["run_id"])


@_final(not_planned="fail")
def finish(context: dict[str, Any]) -> dict:
    from inference.pipeline import finish_run

    return finish_run(settings(), context["run_id"])
