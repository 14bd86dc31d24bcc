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

import html
import json
import logging
from typing import Any

from airflow.sdk import BaseNotifier

from inference.settings_deploy import ALERT_CHANNELS as CHANNELS
from inference.settings_deploy import AlertSettings, alerts_from_env

log = logging.getLogger(__name__)

DAG_ID = "ticket_batch_inference"
FAILURE_KEY = "inference_failure"  # XCom: the cause a task failed for (written by tasks.py before it fails)
ALERT_KEY = "inference_alert"  # XCom: what this task's alert did (sent, deferred, failed channels)
# Earlier first: a failure is a consequence only of a failure earlier in this order (or a lower map index).
TASK_ORDER = (
    "plan_run",
    "infer_shard",
    "summarize_batch",
    "load_results",
    "has_retries",
    "retry_failed",
    "summarize_retries",
    "finish_run",
)
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


def where_of(payload: dict[str, Any]) -> str:
    where = payload.get("task_id") or "run"
    if payload.get("map_index") not in (None, -1):
        where = f"{where}[{payload['map_index']}]"
    return where


def subject_of(payload: dict[str, Any]) -> str:
    return f"[airflow] {payload['dag_id']} {where_of(payload)} failed ({payload['error_class'] or 'no exception'})"


def text_of(payload: dict[str, Any]) -> str:
    lines = [subject_of(payload)]
    for key, value in payload.items():
        if value in (None, ""):
            continue
        lines.append(f"{key}: {json.dumps(value, default=str) if isinstance(value, dict | list) else value}")
    return "\n".join(lines)


# --- one alert per incident -----------------------------------------------------------------------------------


def _parse_key(key: str) -> tuple[str, int] | None:
    """get_task_states keys: `task_id`, or `task_id_<map index>` for a mapped task instance."""
    if key in TASK_ORDER:
        return key, -1
    task_id, _, index = key.rpartition("_")
    if task_id in TASK_ORDER and index.isdigit():
        return task_id, int(index)
    return None


def _earlier(a: tuple[str, int], b: tuple[str, int]) -> bool:
    """Whether task instance `a` comes before `b` (upstream, or the same mapped task with a lower index)."""
    ra, rb = TASK_ORDER.index(a[0]), TASK_ORDER.index(b[0])
    return ra < rb or (ra == rb and a[1] < b[1])


def failed_tasks(ti, run_id: str) -> dict[tuple[str, int], dict | None]:
    """The run's failed task instances -> the cause each recorded (None: it recorded none, it was killed)."""
    states = (ti.get_task_states(dag_id=getattr(ti, "dag_id", DAG_ID), run_ids=[run_id]) or {}).get(run_id, {})
    out: dict[tuple[str, int], dict | None] = {}
    for key, state in states.items():
        parsed = _parse_key(key)
        if parsed is None or str(state) not in ("failed", "TaskInstanceState.FAILED"):
            continue
        out[parsed] = _pull(ti, parsed, FAILURE_KEY)
    return out


def _pull(ti, where: tuple[str, int], key: str):
    try:
        value = ti.xcom_pull(task_ids=where[0], key=key, map_indexes=where[1])
    except Exception:  # noqa: BLE001 - an unreadable record counts as none
        return None
    return value if isinstance(value, dict) else None


def deferred_to(context: dict[str, Any], payload: dict[str, Any]) -> str | None:
    """Why this failure does not alert (the alert it is part of), or None when it must alert."""
    ti = context.get("ti") or context.get("task_instance")
    me = (payload.get("task_id"), payload.get("map_index") if payload.get("map_index") is not None else -1)
    if ti is None or me[0] not in TASK_ORDER or not hasattr(ti, "get_task_states"):
        return None
    failed = failed_tasks(ti, payload["run_id"])
    failed.pop(me, None)
    cause = payload.get("error_class")
    earlier = {k: v for k, v in failed.items() if _earlier(k, me)}
    for where, record in sorted(earlier.items(), key=lambda kv: (TASK_ORDER.index(kv[0][0]), kv[0][1])):
        if record is None:
            continue
        if record.get("error_class") == cause:
            return f"same cause ({cause}) as {_name(where)}, which failed first"
        if cause == "RunNotFound" and where[0] == "plan_run":
            return f"plan_run failed ({record.get('error_class')}) before recording the run"
    summary = payload.get("run_summary") or {}
    if cause == "RunFailed" and (summary.get("unfinished_shards") or summary.get("unloaded")):
        owners = _owners_of_unfinished(summary)
        if owners and all(failed.get(o) is not None for o in owners):
            return "every unfinished ticket belongs to " + ", ".join(_name(o) for o in owners) + ", which alerted"
    return None


def _owners_of_unfinished(summary: dict) -> list[tuple[str, int]]:
    owners = [
        ("infer_shard", int(k)) if int(k) >= 0 else ("retry_failed", -1) for k in summary.get("unfinished_shards") or {}
    ]
    if summary.get("unloaded"):
        owners.append(("load_results", -1))
    return owners


def _name(where: tuple[str, int]) -> str:
    return f"{where[0]}[{where[1]}]" if where[1] >= 0 else where[0]


def killed_tasks(context: dict[str, Any], payload: dict[str, Any]) -> list[str]:
    """Tasks that own unfinished tickets and failed without recording a cause (killed): named in the alert."""
    ti = context.get("ti") or context.get("task_instance")
    summary = payload.get("run_summary") or {}
    if ti is None or not hasattr(ti, "get_task_states"):
        return []
    failed = failed_tasks(ti, payload["run_id"])
    return [_name(o) for o in _owners_of_unfinished(summary) if o in failed and failed[o] is None]


# --- sending -----------------------------------------------------------------------------------------------------


def _channels(config: AlertSettings) -> list[str]:
    wanted = [c.lower() for c in config.channels]
    unknown = [c for c in wanted if c not in CHANNELS]
    if unknown:
        log.error("INFERENCE_ALERT_CHANNELS has unknown channel(s) %s; known: %s", unknown, ", ".join(CHANNELS))
    return [c for c in wanted if c in CHANNELS]


def notifiers_for(payload: dict[str, Any]) -> list[tuple[str, BaseNotifier]]:
    """The configured channels' notifiers, each carrying the same safe payload."""
    out: list[tuple[str, BaseNotifier]] = []
    config = alerts_from_env()
    for channel in _channels(config):
        if channel == "email":
            from airflow.providers.smtp.notifications.smtp import SmtpNotifier

            to = list(config.email_to)
            if not to:
                log.error("alert channel email needs INFERENCE_ALERT_EMAIL_TO: no e-mail sent")
                continue
            body = "<pre>" + html.escape(text_of(payload)) + "</pre>"
            notifier = SmtpNotifier(
                to=to,
                from_email=config.email_from,
                subject=subject_of(payload),
                html_content=body,
                smtp_conn_id=config.smtp_conn_id,
            )
        elif channel == "slack":
            from airflow.providers.slack.notifications.slack_webhook import SlackWebhookNotifier

            notifier = SlackWebhookNotifier(slack_webhook_conn_id=config.slack_conn_id, text=text_of(payload))
        else:  # webhook
            from airflow.providers.http.notifications.http import HttpNotifier

            notifier = HttpNotifier(
                http_conn_id=config.webhook_conn_id,
                json=payload,
                headers={"Content-Type": "application/json"},
                extra_options={"timeout": 10},
            )
        out.append((channel, notifier))
    return out


def delivery_hint(channel: str, exc: BaseException) -> str:
    """A fixed hint per kind of delivery failure (never the exception's text: it can hold a URL's token)."""
    import ssl

    name = type(exc).__name__
    if isinstance(exc, ssl.SSLError):
        return (
            'TLS failed: a plain SMTP server needs "disable_tls": true and "disable_ssl": true in the SMTP '
            "connection's extra (a TLS server: its TLS port, or STARTTLS with disable_ssl)"
        )
    if name == "SMTPAuthenticationError":
        return "the SMTP server refused the login: check the SMTP connection's login and password"
    if name in ("AirflowNotFoundException", "ConnectionNotFound") or "NotFound" in name:
        return f"the {channel} channel's Airflow connection is not defined (see README, Alerts)"
    if isinstance(exc, ConnectionError | TimeoutError) or name in ("ConnectError", "ConnectTimeout", "Timeout"):
        return f"nothing answered at the {channel} connection's host and port"
    if name in ("HTTPError", "AirflowException", "SlackApiError"):
        return f"the {channel} receiver answered with an error status"
    return f"delivery failed ({name}): check the {channel} connection"


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
        parsed = _parse_key(key)
        if parsed is None:
            continue
        record = _pull(ti, parsed, ALERT_KEY)
        for failure in (record or {}).get("failed") or []:
            out.append({"task": _name(parsed), **failure})
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
