"""Where model tasks run. Read when the DAG file is parsed: environment only (no database, no network).

INFERENCE_GPU_QUEUE: the Celery queue GPU workers listen on (LocalExecutor ignores queues).
INFERENCE_GPU_POOL: the Airflow pool whose slots equal the number of GPUs.
INFERENCE_TASK_RETRIES / INFERENCE_RETRY_DELAY_SECONDS: Airflow retries of each task (default 2, 60 s,
  doubling): a killed or evicted worker's task is retried in a fresh process.
INFERENCE_K8S_GPUS: KubernetesExecutor only: the model tasks get a pod override requesting this many
  `nvidia.com/gpu` (default 0: no override). Other executors ignore it.
INFERENCE_K8S_GPU_NODE_SELECTOR: optional `key=value[,key=value]` node selector for those pods.
INFERENCE_K8S_GPU_TOLERATION: taint key those pods tolerate (NoSchedule), default `nvidia.com/gpu` as GPU
  node pools usually carry; empty for none.
INFERENCE_RUN_DEADLINE_MINUTES: alert when a run is not finished this long after it was queued.
  Default 0 (off): Airflow 3.3's dag.test() / `airflow dags test` crash at the end of a successful run of
  a DAG that has a DeadlineAlert (DagRun.update_state looks the alert up by an ID it does not have), so
  deployments switch it on (docker-compose.yml: 360) and local test runs leave it off.
"""

from __future__ import annotations

import os

GPU_QUEUE = os.environ.get("INFERENCE_GPU_QUEUE") or "gpu"
GPU_POOL = os.environ.get("INFERENCE_GPU_POOL") or "gpu"


def _int_env(name: str, default: int, low: int, high: int) -> int:
    """An integer setting; a bad value fails the DAG import, naming the variable (never silently replaced)."""
    raw = (os.environ.get(name) or "").strip()
    try:
        value = int(raw) if raw else default
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise ValueError(f"{name}: expected an integer from {low} to {high}, got {raw!r}")
    return value


TASK_RETRIES = _int_env("INFERENCE_TASK_RETRIES", 2, 0, 20)
RETRY_DELAY_SECONDS = _int_env("INFERENCE_RETRY_DELAY_SECONDS", 60, 1, 24 * 3600)
RUN_DEADLINE_MINUTES = _int_env("INFERENCE_RUN_DEADLINE_MINUTES", 0, 0, 7 * 24 * 60)

K8S_GPUS = _int_env("INFERENCE_K8S_GPUS", 0, 0, 64)


def gpu_executor_config() -> dict:
    """executor_config of the model tasks: a KubernetesExecutor pod override asking for GPUs, or nothing.

    The override patches the worker pod's `base` container (the one that runs the task). The kubernetes
    client is imported only when GPUs are requested, so parsing stays cheap everywhere else.
    """
    if not K8S_GPUS:
        return {}
    try:
        from kubernetes.client import models as k8s
    except ImportError as exc:  # shown as the DAG's import error, naming the fix
        raise ImportError(
            "INFERENCE_K8S_GPUS is set but the kubernetes client is not installed: "
            "pip install apache-airflow-providers-cncf-kubernetes (or unset INFERENCE_K8S_GPUS)"
        ) from exc
    selector = {}
    for pair in filter(None, (p.strip() for p in (os.environ.get("INFERENCE_K8S_GPU_NODE_SELECTOR") or "").split(","))):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"INFERENCE_K8S_GPU_NODE_SELECTOR: expected key=value pairs, got {pair!r}")
        selector[key.strip()] = value.strip()
    taint = os.environ.get("INFERENCE_K8S_GPU_TOLERATION", "nvidia.com/gpu").strip()
    gpus = str(K8S_GPUS)
    pod = k8s.V1Pod(
        spec=k8s.V1PodSpec(
            containers=[
                k8s.V1Container(
                    name="base",
                    resources=k8s.V1ResourceRequirements(
                        requests={"nvidia.com/gpu": gpus}, limits={"nvidia.com/gpu": gpus}
                    ),
                )
            ],
            node_selector=selector or None,
            tolerations=[k8s.V1Toleration(key=taint, operator="Exists", effect="NoSchedule")] if taint else None,
        )
    )
    return {"pod_override": pod}
