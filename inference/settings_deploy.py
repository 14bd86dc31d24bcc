"""Settings of the Airflow adapters (plugins/inference_airflow): where model tasks run, retries, alerts.

Declared here, next to the library's own, so that one list holds every variable (.env.example and README
are checked against it). The adapters read them through `routing_from_env` (when the DAG file is parsed)
and `alerts_from_env` (when an alert is sent). Standard library only; nothing here imports Airflow.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from inference.settings_spec import check_fields, env, values_from_env

ALERT_CHANNELS = ("email", "slack", "webhook")


@dataclass(frozen=True)
class RoutingSettings:
    gpu_queue: str = env(
        "INFERENCE_GPU_QUEUE", "gpu", "Celery queue of the model tasks (read when the DAG is parsed)", group="routing"
    )
    gpu_pool: str = env(
        "INFERENCE_GPU_POOL", "gpu", "Airflow pool of the model tasks; one slot per GPU", group="routing"
    )
    task_retries: int = env(
        "INFERENCE_TASK_RETRIES", 2, "Airflow retries of every task", low=0, high=20, group="routing"
    )
    retry_delay_seconds: int = env(
        "INFERENCE_RETRY_DELAY_SECONDS",
        60,
        "seconds before the first retry, doubling on each further one",
        low=1,
        high=24 * 3600,
        group="routing",
    )
    k8s_gpus: int = env(
        "INFERENCE_K8S_GPUS",
        0,
        "KubernetesExecutor: `nvidia.com/gpu` requested by the model tasks' pod override (0: no override)",
        low=0,
        high=64,
        group="routing",
    )
    k8s_gpu_node_selector: str | None = env(
        "INFERENCE_K8S_GPU_NODE_SELECTOR",
        None,
        "node selector of those pods, `key=value[,key=value]`",
        kind=str,
        group="routing",
    )
    k8s_gpu_toleration: str = env(
        "INFERENCE_K8S_GPU_TOLERATION",
        "nvidia.com/gpu",
        "taint key those pods tolerate (NoSchedule); empty for none",
        blank_is_value=True,
        group="routing",
    )
    run_deadline_minutes: int = env(
        "INFERENCE_RUN_DEADLINE_MINUTES",
        0,
        "Deadline Alert: alert when a run is not finished this long after it was queued (0: off)",
        low=0,
        high=7 * 24 * 60,
        group="alerts",
    )

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class AlertSettings:
    channels: tuple[str, ...] = env(
        "INFERENCE_ALERT_CHANNELS",
        (),
        f"comma-separated from {', '.join(ALERT_CHANNELS)} (none: alerts are only logged)",
        kind=tuple,
        group="alerts",
    )
    email_to: tuple[str, ...] = env(
        "INFERENCE_ALERT_EMAIL_TO", (), "e-mail recipients, comma-separated", kind=tuple, group="alerts"
    )
    email_from: str | None = env(
        "INFERENCE_ALERT_EMAIL_FROM",
        None,
        "e-mail sender",
        kind=str,
        shown="the SMTP connection's",
        group="alerts",
    )
    smtp_conn_id: str = env("INFERENCE_ALERT_SMTP_CONN_ID", "smtp_default", "SMTP connection id", group="alerts")
    slack_conn_id: str = env(
        "INFERENCE_ALERT_SLACK_CONN_ID",
        "slack_webhook_default",
        "Slack incoming-webhook connection id",
        group="alerts",
    )
    webhook_conn_id: str = env(
        "INFERENCE_ALERT_WEBHOOK_CONN_ID",
        "inference_alert_webhook",
        "HTTP connection whose host is the URL the JSON payload is POSTed to (headers in its extra)",
        group="alerts",
    )

    def __post_init__(self) -> None:
        check_fields(self)


def routing_from_env(environ: Mapping[str, str] | None = None) -> RoutingSettings:
    """Raises ConfigError naming the variable: a bad value fails the DAG import, never silently replaced."""
    return RoutingSettings(**values_from_env(RoutingSettings, os.environ if environ is None else environ))


def alerts_from_env(environ: Mapping[str, str] | None = None) -> AlertSettings:
    """Never raises: every alert setting is text, so a broken setting cannot swallow the alert."""
    return AlertSettings(**values_from_env(AlertSettings, os.environ if environ is None else environ))
