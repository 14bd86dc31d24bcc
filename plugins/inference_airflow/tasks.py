"""What each DAG task does, given its Airflow context. Returns only IDs and counts (XCom-safe).

Imports of the `inference` library happen inside the functions: the DAG file imports this module
at parse time, which must stay cheap.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

RETRY_TASK, FINISH_TASK = "retry_failed", "finish_run"


def _no_retry_for_permanent(fn):
    """Every step's error handling, in one place:

    - a database error is turned into the library's own (inference.store.db.database_error: DatabaseRefused,
      DatabaseFull, DatabaseUnavailable, DatabaseError), its text already scrubbed of row contents;
    - the cause (error class, fixed why and remedy) is recorded in the task's XCom `inference_failure` before
      the failure is reported, so that the alert callbacks of later tasks know what this one alerted for
      (alerts.py: one alert per incident);
    - a PermanentError (configuration, params, model, schema, a refused write, a run that failed its own
      checks) fails the task at once: AirflowFailException, with the error as its cause, so no retry is spent
      on it. Everything else is raised and Airflow retries it.
    """
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from airflow.sdk.exceptions import AirflowFailException

        from inference.errors import InferenceError, PermanentError
        from inference.store.db import database_error

        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if type(exc).__module__.startswith("airflow"):  # skip, fail, defer: Airflow's own signals
                raise
            ours = exc if isinstance(exc, InferenceError) else database_error(exc)
            cause = ours or exc
            _record_failure(args[-1] if args else kwargs.get("context"), cause)
            if isinstance(cause, PermanentError):
                raise AirflowFailException(f"{type(cause).__name__}: {cause}") from cause
            if cause is not exc:
                raise cause from exc
            raise

    return wrapper


def _record_failure(context: dict[str, Any] | None, cause: BaseException) -> None:
    from inference.errors import remedy_of, why_of
    from inference_airflow.alerts import FAILURE_KEY

    ti = (context or {}).get("ti")
    if ti is None:
        return
    try:
        ti.xcom_push(
            key=FAILURE_KEY,
            value={"error_class": type(cause).__name__, "why": why_of(cause), "remedy": remedy_of(cause)},
        )
    except Exception:  # noqa: BLE001 - the failure itself must still be reported
        pass


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
    return infer_shard(settings(), spec.run_id, spec.shard, load=True).as_dict()  # loaded as it commits


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
    """The run's reconciliation, plus what only Airflow knows: alerts of this run that could not be delivered
    (in the summary and the log), and the asset event of `ticket_results` (on success; downstream DAGs can be
    scheduled on it)."""
    from inference.errors import RunFailed
    from inference.pipeline import finish_run

    try:
        summary = finish_run(settings(), context["run_id"])
    except RunFailed as exc:
        _add_alert_delivery(context, exc.summary)
        raise
    _add_alert_delivery(context, summary)
    _asset_event(context, summary)
    return summary


def _add_alert_delivery(context: dict[str, Any], summary: dict) -> None:
    import logging

    from inference_airflow.alerts import delivery_failures

    try:
        failures = delivery_failures(context["ti"], context["run_id"])
    except Exception:  # noqa: BLE001 - the summary stays without it
        return
    if failures:
        summary["alert_delivery_failures"] = failures
        for failure in failures:
            logging.getLogger("inference").error(
                "alert of %s was NOT delivered through %s (%s): %s",
                failure["task"],
                failure["channel"],
                failure["error_class"],
                failure["hint"],
            )


def _asset_event(context: dict[str, Any], summary: dict) -> None:
    """Extra of the ticket_results asset event: IDs and counts only."""
    from inference_airflow.assets import TICKET_RESULTS

    events = context.get("outlet_events")
    if events is None or summary.get("status") != "succeeded":
        return
    keys = ("run_id", "window_start", "window_end", "model_version", "succeeded", "failed", "skipped")
    events[TICKET_RESULTS].extra = {k: summary.get(k) for k in keys}
