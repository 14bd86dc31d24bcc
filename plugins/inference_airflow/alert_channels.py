"""The alert's channels (SMTP e-mail, Slack incoming webhook, a JSON webhook through the HTTP provider's
notifier), the message each carries, and a fixed hint per kind of delivery failure."""

from __future__ import annotations

import html
import json
import logging
from typing import Any

from airflow.sdk import BaseNotifier

from inference.settings_deploy import ALERT_CHANNELS as CHANNELS
from inference.settings_deploy import AlertSettings, alerts_from_env

log = logging.getLogger("inference_airflow.alerts")


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
