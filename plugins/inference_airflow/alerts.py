"""Alerts through Airflow's notifiers: SMTP e-mail, Slack webhook, and a generic JSON webhook.

Which channels fire is read when an alert is sent (not when the DAG is parsed), from the INFERENCE_ALERT_*
variables declared in inference/settings_deploy.py (AlertSettings: channels, recipients, sender, connection
ids, webhook URL).

A payload names the DAG, run, task, map index, try number, the error's class and the log URL, plus the
run's counts when the run's own accounting failed. Never an exception message or anything from a
ticket: messages of database drivers can quote row values.
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
SUMMARY_FIELDS = ("backlog", "succeeded", "failed", "skipped", "window_start", "window_end", "model_version", "error")


def alert_payload(context: dict[str, Any]) -> dict[str, Any]:
    ti = context.get("ti") or context.get("task_instance")
    dag_run = context.get("dag_run")
    exc = context.get("exception")
    if exc is not None and type(exc).__name__ == "AirflowFailException" and exc.__cause__ is not None:
        exc = exc.__cause__  # the task's own error, not the no-retry wrapper
    payload: dict[str, Any] = {
        "event": "task_failed" if ti is not None else "dag_run_alert",
        "dag_id": getattr(ti, "dag_id", None) or getattr(dag_run, "dag_id", None),
        "run_id": getattr(ti, "run_id", None) or getattr(dag_run, "run_id", None),
        "task_id": getattr(ti, "task_id", None),
        "map_index": getattr(ti, "map_index", None),
        "try_number": getattr(ti, "try_number", None),
        "logical_date": str(context.get("logical_date")) if context.get("logical_date") else None,
        "error_class": type(exc).__name__ if exc is not None else None,
        "log_url": getattr(ti, "log_url", None),
    }
    summary = getattr(exc, "summary", None)
    if isinstance(summary, dict):  # RunFailed: counts and IDs only, by construction
        payload["run_summary"] = {k: summary.get(k) for k in SUMMARY_FIELDS if k in summary}
    return payload


def subject_of(payload: dict[str, Any]) -> str:
    where = payload["task_id"] or "run"
    if payload.get("map_index") not in (None, -1):
        where = f"{where}[{payload['map_index']}]"
    return f"[airflow] {payload['dag_id']} {where} failed ({payload['error_class'] or 'no exception'})"


def text_of(payload: dict[str, Any]) -> str:
    lines = [subject_of(payload)] + [f"{k}: {v}" for k, v in payload.items() if v not in (None, "")]
    return "\n".join(lines)


class JsonWebhookNotifier(BaseNotifier):
    """POSTs the alert payload as JSON. Uses the standard library only; 10 s timeout."""

    template_fields = ("url",)

    def __init__(self, url: str, payload: dict[str, Any] | None = None, timeout: float = 10.0, **kwargs):
        super().__init__(**kwargs)
        self.url = url
        self.payload = payload
        self.timeout = timeout

    def notify(self, context) -> None:
        import urllib.request

        body = json.dumps(self.payload or alert_payload(context), default=str).encode()
        request = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 - operator-set URL
            response.read()


def _channels(config: AlertSettings) -> list[str]:
    wanted = [c.lower() for c in config.channels]
    unknown = [c for c in wanted if c not in CHANNELS]
    if unknown:
        log.error("INFERENCE_ALERT_CHANNELS has unknown channel(s) %s; known: %s", unknown, ", ".join(CHANNELS))
    return [c for c in wanted if c in CHANNELS]


def notifiers_for(payload: dict[str, Any]) -> list[BaseNotifier]:
    """The configured channels' notifiers, each carrying the same safe payload."""
    out: list[BaseNotifier] = []
    config = alerts_from_env()
    for channel in _channels(config):
        if channel == "email":
            from airflow.providers.smtp.notifications.smtp import SmtpNotifier

            to = list(config.email_to)
            if not to:
                log.error("alert channel email needs INFERENCE_ALERT_EMAIL_TO")
                continue
            body = "<pre>" + html.escape(text_of(payload)) + "</pre>"
            out.append(
                SmtpNotifier(
                    to=to,
                    from_email=config.email_from,
                    subject=subject_of(payload),
                    html_content=body,
                    smtp_conn_id=config.smtp_conn_id,
                )
            )
        elif channel == "slack":
            from airflow.providers.slack.notifications.slack_webhook import SlackWebhookNotifier

            out.append(SlackWebhookNotifier(slack_webhook_conn_id=config.slack_conn_id, text=text_of(payload)))
        elif channel == "webhook":
            url = config.webhook_url
            if not url:
                log.error("alert channel webhook needs INFERENCE_ALERT_WEBHOOK_URL")
                continue
            out.append(JsonWebhookNotifier(url=url, payload=payload))
    return out


class TicketInferenceAlert(BaseNotifier):
    """The one callback the DAG registers; fans out to the configured channels at alert time.

    A channel that fails is logged (by error class) and does not stop the others.
    """

    def notify(self, context) -> None:
        payload = alert_payload(context)
        log.error("ALERT %s", json.dumps(payload, default=str))
        for notifier in notifiers_for(payload):
            try:
                notifier.notify(_safe_context(context))
            except Exception as exc:  # noqa: BLE001 - one broken channel must not silence the others
                log.error("alert channel %s failed: %s", type(notifier).__name__, type(exc).__name__)


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
        "error_class": "DeadlineMissed",
        "deadline": str(deadline.get("deadline_time")) if isinstance(deadline, dict) else None,
        "log_url": None,
    }
    log.error("ALERT %s", json.dumps(payload, default=str))
    for notifier in notifiers_for(payload):
        try:
            await asyncio.to_thread(notifier.notify, {"dag_run": dag_run})
        except Exception as exc:  # noqa: BLE001 - one broken channel must not silence the others
            log.error("alert channel %s failed: %s", type(notifier).__name__, type(exc).__name__)


def _safe_context(context) -> dict[str, Any]:
    """Provider notifiers render templates against the context: give them no exception text."""
    safe = dict(context)
    safe.pop("exception", None)
    return safe
