"""Where model tasks run, and how often tasks retry. Read when the DAG file is parsed: environment only.

The variables (INFERENCE_GPU_QUEUE, INFERENCE_GPU_POOL, INFERENCE_TASK_RETRIES, INFERENCE_RETRY_DELAY_SECONDS,
INFERENCE_K8S_GPUS, INFERENCE_K8S_GPU_NODE_SELECTOR, INFERENCE_K8S_GPU_TOLERATION,
INFERENCE_RUN_DEADLINE_MINUTES) are declared, with defaults, bounds and doc lines, in
inference/settings_deploy.py; a bad value fails the DAG import with a message naming the variable.

The queue is the Celery queue GPU workers listen on (LocalExecutor ignores queues); the pool's slots equal
the number of GPUs. INFERENCE_K8S_GPUS applies to the KubernetesExecutor only. The Deadline Alert defaults
to off (0): Airflow 3.3's dag.test() / `airflow dags test` crash at the end of a successful run of a DAG
that has a DeadlineAlert (DagRun.update_state looks the alert up by an ID it does not have), so
deployments switch it on (docker-compose.yml: 360) and local test runs leave it off.
"""

from __future__ import annotations

from inference.settings_deploy import routing_from_env

_settings = routing_from_env()

GPU_QUEUE = _settings.gpu_queue
GPU_POOL = _settings.gpu_pool
TASK_RETRIES = _settings.task_retries
RETRY_DELAY_SECONDS = _settings.retry_delay_seconds
RUN_DEADLINE_MINUTES = _settings.run_deadline_minutes
K8S_GPUS = _settings.k8s_gpus
K8S_GPU_NODE_SELECTOR = _settings.k8s_gpu_node_selector
K8S_GPU_TOLERATION = _settings.k8s_gpu_toleration.strip()


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
    for pair in filter(None, (p.strip() for p in (K8S_GPU_NODE_SELECTOR or "").split(","))):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"INFERENCE_K8S_GPU_NODE_SELECTOR: expected key=value pairs, got {pair!r}")
        selector[key.strip()] = value.strip()
    taint = K8S_GPU_TOLERATION
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
