"""Where tasks run is configuration: queue, pool and the KubernetesExecutor GPU pod override, read from the
environment when the DAG file is parsed and carried through DAG serialisation (what workers receive)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DAG_FILE = ROOT / "dags" / "ticket_batch_inference.py"
MODEL_TASKS = ("infer_shard", "retry_failed")

PROBE = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
from airflow.serialization.serialized_objects import DagSerialization
bag = DagBag(dag_folder=sys.argv[1])
if bag.import_errors:
    print(json.dumps({"errors": {k: str(v)[-800:] for k, v in bag.import_errors.items()}}))
    sys.exit(0)
dag = DagSerialization.from_dict(json.loads(json.dumps(DagSerialization.to_dict(bag.get_dag("ticket_batch_inference")))))
out = {}
for t in dag.tasks:
    pod = (t.executor_config or {}).get("pod_override")
    out[t.task_id] = {"queue": t.queue, "pool": t.pool, "pod": None if pod is None else pod.to_dict()}
print(json.dumps({"tasks": out}))
"""


def parse(home: Path, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("INFERENCE_")}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(DAG_FILE)],
        capture_output=True,
        text=True,
        env={**clean, "AIRFLOW_HOME": str(home), **env},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_queue_and_pool_names_come_from_the_environment(airflow_db):
    tasks = parse(airflow_db, INFERENCE_GPU_QUEUE="h200", INFERENCE_GPU_POOL="h200_slots")["tasks"]
    for name, t in tasks.items():
        if name in MODEL_TASKS:
            assert (t["queue"], t["pool"]) == ("h200", "h200_slots"), name
        else:
            assert (t["queue"], t["pool"]) == ("default", "default_pool"), name
        assert t["pod"] is None, name  # no Kubernetes override unless asked for


def test_kubernetes_gpu_pod_override_survives_serialisation(airflow_db):
    tasks = parse(
        airflow_db,
        INFERENCE_K8S_GPUS="2",
        INFERENCE_K8S_GPU_NODE_SELECTOR="accelerator=nvidia-h200, pool=gpu",
    )["tasks"]
    for name in MODEL_TASKS:
        spec = tasks[name]["pod"]["spec"]
        (container,) = spec["containers"]
        assert container["name"] == "base"  # the container KubernetesExecutor runs the task in
        assert container["resources"]["limits"] == {"nvidia.com/gpu": "2"}
        assert container["resources"]["requests"] == {"nvidia.com/gpu": "2"}
        assert spec["node_selector"] == {"accelerator": "nvidia-h200", "pool": "gpu"}
        assert [(t["key"], t["operator"], t["effect"]) for t in spec["tolerations"]] == [
            ("nvidia.com/gpu", "Exists", "NoSchedule")
        ]
    assert all(t["pod"] is None for name, t in tasks.items() if name not in MODEL_TASKS)


@pytest.mark.parametrize("selector", ["accelerator", "=h200"])
def test_a_malformed_node_selector_is_an_import_error_naming_the_setting(airflow_db, selector):
    result = parse(airflow_db, INFERENCE_K8S_GPUS="1", INFERENCE_K8S_GPU_NODE_SELECTOR=selector)
    assert "INFERENCE_K8S_GPU_NODE_SELECTOR" in json.dumps(result["errors"])


@pytest.mark.parametrize(
    ("name", "value"),
    [("INFERENCE_TASK_RETRIES", "two"), ("INFERENCE_RETRY_DELAY_SECONDS", "0"), ("INFERENCE_K8S_GPUS", "-1")],
)
def test_a_bad_routing_setting_is_an_import_error_naming_it(airflow_db, name, value):
    result = parse(airflow_db, **{name: value})
    assert name in json.dumps(result["errors"])
