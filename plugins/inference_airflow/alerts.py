"""Alerts through Airflow's notifiers: SMTP e-mail, Slack incoming webhook, and a JSON webhook (the HTTP
provider's HttpNotifier on an Airflow connection, so its URL and any token are a secret, not an environment
variable).

Which channels fire is read when an alert is sent (not when the DAG is parsed), from the INFERENCE_ALERT_*
variables declared in inference/settings_deploy.py (AlertSettings: channels, recipients, sender, connection ids).

**What an alert says.** What failed (the DAG, run, task and map index, the try, the error's class), for which
window, why (a fixed text per error class, never a driver's or a library's message), what to do (the error's
fixed remedy), the library's own message where it has one (fixed texts plus names and counts; database errors
arrive scrubbed of row contents), the run's counts when its accounting failed, and the log link. Never
ticket text.

**One alert per incident.** When a step fails, its task records the cause (error class, why, remedy) in an XCom
(`inference_failure`) before the failure is reported. A task's failure does not alert when an earlier task of the
same run (an upstream task, or a mapped sibling with a lower index) already failed for the same cause: every
step runs the same start checks, so a missing model, an outage of the database or an outdated schema alerts
once, from the first task it stopped. Nor does `finish_run` alert when every ticket it finds unfinished belongs
to a task that failed with a recorded cause (that task alerted). A task that left no record (killed: the OOM
killer, a lost node) gets no alert of its own, so `finish_run`'s alert names it and says what to do.
A suppressed alert is logged (WARNING) with the alert it defers to.

**A channel that cannot deliver** is logged at ERROR level with a fixed hint (e.g. an SMTP server without TLS),
does not stop the other channels, and is recorded (XCom `inference_alert`) so that `finish_run` reports every
failed delivery of the run in its summary and log.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from airflow.sdk import BaseNotifier

from inference_airflow.alert_channels import delivery_hint, notifiers_for, subject_of, where_of
from inference_airflow.alert_incidents import (  # noqa: F401 - DAG_ID, FAILURE_KEY: read from this module too
    ALERT_KEY,
    DAG_ID,
    FAILURE_KEY,
    deferred_to,
    killed_tasks,
    name_of,
    parse_key,
    pull,
)

log = logging.getLogger(__name__)

SUMMARY_FIELDS = (
    "backlog",
    "succeeded",
    "failed",
    "skipped",
    "window_start",
    "window_end",
    "model_version",
    "error",
    "unfinished_shards",
    "unloaded",
    "alert_delivery_failures",
)
KILLED_WHY = "the task ended without an error of its own (killed: out of memory, node loss or a timeout)"


# --- what an alert says ---------------------------------------------------------------------------------------


def _cause(exc: BaseException | None) -> BaseException | None:
    """The task's own error, not the no-retry wrapper (AirflowFailException raised from it)."""
    if exc is not None and type(exc).__name__ == "AirflowFailException" and exc.__cause__ is not None:
        return exc.__cause__
    return exc


def _window(context: dict[str, Any]) -> dict[str, str | None]:
    """The run's window: the params' window when they name one, else the run's data interval."""
    try:
        from inference_airflow import tasks

        own = tasks.window(context)
        try:
            win = tasks.options(context).window(own)
        except Exception:  # noqa: BLE001 - invalid params: the run's own window still tells which night
            win = own
        return {"window_start": win.start.isoformat(), "window_end": win.end.isoformat()}
    except Exception:  # noqa: BLE001 - an alert is never lost for want of a window
        return {"window_start": None, "window_end": None}


def alert_payload(context: dict[str, Any]) -> dict[str, Any]:
    from inference.errors import InferenceError, remedy_of, why_of

    ti = context.get("ti") or context.get("task_instance")
    dag_run = context.get("dag_run")
    exc = _cause(context.get("exception"))
    payload: dict[str, Any] = {
        "event": "task_failed" if ti is not None else "dag_run_alert",
        "dag_id": getattr(ti, "dag_id", None) or getattr(dag_run, "dag_id", None),
        "run_id": getattr(ti, "run_id", None) or getattr(dag_run, "run_id", None),
        "task_id": getattr(ti, "task_id", None),
        "map_index": getattr(ti, "map_index", None),
        "try_number": getattr(ti, "try_number", None),
        "logical_date": str(context.get("logical_date")) if context.get("logical_date") else None,
        **_window(context),
        "error_class": type(exc).__name__ if exc is not None else None,
        "why": why_of(exc),
        "remedy": remedy_of(exc),
        "log_url": getattr(ti, "log_url", None),
    }
    if isinstance(exc, InferenceError):  # our own messages: fixed texts plus names and counts
        payload["detail"] = str(exc)[:500]
    summary = getattr(exc, "summary", None)
    if isinstance(summary, dict):  # RunFailed: counts and IDs only, by construction
        payload["run_summary"] = {k: summary.get(k) for k in SUMMARY_FIELDS if k in summary}
    return payload


# --- sending -----------------------------------------------------------------------------------------------------


def send(payload: dict[str, Any], context: dict[str, Any]) -> tuple[list[str], list[dict]]:
    """Sends through every configured channel; returns (delivered channels, failed deliveries)."""
    sent, failed = [], []
    for channel, notifier in notifiers_for(payload):
        try:
            notifier.notify(_safe_context(context))
        except Exception as exc:  # noqa: BLE001 - one broken channel must not silence the others
            hint = delivery_hint(channel, exc)
            log.error(
                "ALERT NOT DELIVERED through %s (%s): %s. The undelivered alert: %s",
                channel,
                type(exc).__name__,
                hint,
                subject_of(payload),
            )
            failed.append({"channel": channel, "error_class": type(exc).__name__, "hint": hint})
        else:
            sent.append(channel)
    return sent, failed


def _record(context: dict[str, Any], value: dict) -> None:
    ti = context.get("ti") or context.get("task_instance")
    try:
        ti.xcom_push(key=ALERT_KEY, value=value)
    except Exception as exc:  # noqa: BLE001 - the alert itself was handled; only the run summary misses it
        log.warning("could not record the alert's delivery for the run summary (%s)", type(exc).__name__)


class TicketInferenceAlert(BaseNotifier):
    """The one callback the DAG registers; fans out to the configured channels at alert time."""

    def notify(self, context) -> None:
        payload = alert_payload(context)
        try:
            reason = deferred_to(context, payload)
        except Exception as exc:  # noqa: BLE001 - when in doubt, alert
            log.warning("could not look at the run's other tasks (%s): alerting", type(exc).__name__)
            reason = None
        if reason is not None:
            log.warning("ALERT DEFERRED for %s (%s): %s", where_of(payload), payload["error_class"], reason)
            _record(context, {"deferred": reason, "error_class": payload["error_class"]})
            return
        if payload.get("error_class") == "RunFailed":
            try:
                killed = killed_tasks(context, payload)
            except Exception:  # noqa: BLE001
                killed = []
            if killed:
                payload["killed_tasks"] = killed
                payload["why"] = f"{', '.join(killed)}: {KILLED_WHY}; its tickets have no final state"
        log.error("ALERT %s", json.dumps(payload, default=str))
        sent, failed = send(payload, context)
        _record(context, {"sent": sent, "failed": failed, "error_class": payload["error_class"]})


def delivery_failures(ti, run_id: str) -> list[dict]:
    """Failed alert deliveries of the run's tasks so far (for finish_run's summary)."""
    states = (ti.get_task_states(dag_id=getattr(ti, "dag_id", DAG_ID), run_ids=[run_id]) or {}).get(run_id, {})
    out = []
    for key in states:
        parsed = parse_key(key)
        if parsed is None:
            continue
        record = pull(ti, parsed, ALERT_KEY)
        for failure in (record or {}).get("failed") or []:
            out.append({"task": name_of(parsed), **failure})
    return out


async def run_deadline_missed(**kwargs) -> None:
    """Deadline Alert callback (runs in the triggerer): the run is still not finished.

    Importable by the triggerer from the plugins folder; sends through the same channels.
    """
    import asyncio

    context = kwargs.get("context") or {}
    dag_run = context.get("dag_run") or {}
    deadline = context.get("deadline") or {}
    get = dag_run.get if isinstance(dag_run, dict) else lambda k: getattr(dag_run, k, None)
    payload = {
        "event": "run_deadline_missed",
        "dag_id": get("dag_id"),
        "run_id": get("run_id") or get("dag_run_id"),
        "task_id": None,
        "map_index": None,
        "try_number": None,
        "logical_date": str(get("logical_date")) if get("logical_date") else None,
        "window_start": str(get("data_interval_start")) if get("data_interval_start") else None,
        "window_end": str(get("data_interval_end")) if get("data_interval_end") else None,
        "error_class": "DeadlineMissed",
        "why": "the run is still not finished at its deadline (INFERENCE_RUN_DEADLINE_MINUTES after it was queued)",
        "remedy": "see which task is running or queued (a full pool gpu, a stuck worker), and its log",
        "deadline": str(deadline.get("deadline_time")) if isinstance(deadline, dict) else None,
        "log_url": None,
    }
    log.error("ALERT %s", json.dumps(payload, default=str))
    for channel, notifier in notifiers_for(payload):
        try:
            await asyncio.to_thread(notifier.notify, {"dag_run": dag_run})
        except Exception as exc:  # noqa: BLE001 - one broken channel must not silence the others
            log.error(
                "ALERT NOT DELIVERED through %s (%s): %s", channel, type(exc).__name__, delivery_hint(channel, exc)
            )


def _safe_context(context) -> dict[str, Any]:
    """Provider notifiers render templates against the context: give them no exception text."""
    safe = dict(context)
    safe.pop("exception", None)
    return safe
