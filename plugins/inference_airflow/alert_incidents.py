"""One alert per incident: whether a task's failure is a consequence of an earlier failure of the same run
(which alerted), and which tasks were killed without recording a cause (named in finish_run's alert).

A task records the cause it failed for in an XCom (FAILURE_KEY) before the failure is reported; see
inference_airflow.alerts for the rules as the README states them."""

from __future__ import annotations

from typing import Any

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


def parse_key(key: str) -> tuple[str, int] | None:
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
        parsed = parse_key(key)
        if parsed is None or str(state) not in ("failed", "TaskInstanceState.FAILED"):
            continue
        out[parsed] = pull(ti, parsed, FAILURE_KEY)
    return out


def pull(ti, where: tuple[str, int], key: str):
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
            return f"same cause ({cause}) as {name_of(where)}, which failed first"
        if cause == "RunNotFound" and where[0] == "plan_run":
            return f"plan_run failed ({record.get('error_class')}) before recording the run"
    summary = payload.get("run_summary") or {}
    if cause == "RunFailed" and (summary.get("unfinished_shards") or summary.get("unloaded")):
        owners = _owners_of_unfinished(summary)
        if owners and all(failed.get(o) is not None for o in owners):
            return "every unfinished ticket belongs to " + ", ".join(name_of(o) for o in owners) + ", which alerted"
    return None


def _owners_of_unfinished(summary: dict) -> list[tuple[str, int]]:
    owners = [
        ("infer_shard", int(k)) if int(k) >= 0 else ("retry_failed", -1) for k in summary.get("unfinished_shards") or {}
    ]
    if summary.get("unloaded"):
        owners.append(("load_results", -1))
    return owners


def name_of(where: tuple[str, int]) -> str:
    return f"{where[0]}[{where[1]}]" if where[1] >= 0 else where[0]


def killed_tasks(context: dict[str, Any], payload: dict[str, Any]) -> list[str]:
    """Tasks that own unfinished tickets and failed without recording a cause (killed): named in the alert."""
    ti = context.get("ti") or context.get("task_instance")
    summary = payload.get("run_summary") or {}
    if ti is None or not hasattr(ti, "get_task_states"):
        return []
    failed = failed_tasks(ti, payload["run_id"])
    return [name_of(o) for o in _owners_of_unfinished(summary) if o in failed and failed[o] is None]
