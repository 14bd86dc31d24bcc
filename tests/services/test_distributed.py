"""The DAG on the CeleryExecutor with two workers, as in the reference deployment: the model tasks go to
the GPU queue and run on the GPU worker, everything else on the CPU worker; the results are complete and
unique. The metadata database records which worker ran each task instance."""

from __future__ import annotations

import datetime as dt
import re

from inference.window import window_for_date

MODEL_TASKS = {"infer_shard", "retry_failed"}
DIST_DAY, DIST_TICKETS, DIST_SHARDS = dt.date(2026, 6, 15), 48, 3


def task_hosts(airflow, run_id: str) -> list[tuple[str, int, str, str | None, str | None]]:
    import sqlalchemy as sa

    engine = sa.create_engine(airflow.meta_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT task_id, map_index, state, hostname, queue FROM task_instance "
                    "WHERE dag_id = :dag AND run_id = :run ORDER BY task_id, map_index"
                ),
                {"dag": "ticket_batch_inference", "run": run_id},
            )
            return [tuple(r) for r in rows]
    finally:
        engine.dispose()


def test_model_tasks_run_on_the_gpu_worker_and_the_rest_on_the_cpu_worker(airflow, seed, view, run_id_for):
    seed(DIST_TICKETS, 1, DIST_DAY, 5001)
    run_id = run_id_for("dist__")
    airflow.trigger(
        {"window_start": DIST_DAY.isoformat(), "window_end": DIST_DAY.isoformat(), "shards": DIST_SHARDS},
        run_id=run_id,
    )
    final = airflow.wait_run(run_id, timeout=600)
    assert final["state"] == "success", airflow.task_states(run_id)

    gpu_queue, _ = airflow.workers["gpu-worker"]
    ran = [row for row in task_hosts(airflow, run_id) if row[2] == "success"]
    shards = [r for r in ran if r[0] == "infer_shard"]
    assert len(shards) == DIST_SHARDS, ran
    for task_id, map_index, _, hostname, queue in ran:
        if task_id in MODEL_TASKS:
            assert (hostname, queue) == ("gpu-worker", gpu_queue), (task_id, map_index, hostname, queue)
        else:
            assert (hostname, queue) == ("cpu-worker", "default"), (task_id, map_index, hostname, queue)
    assert {r[0] for r in ran} >= {"plan_run", "infer_shard", "load_results", "has_retries", "finish_run"}
    # the GPU worker runs INFERENCE_WRITER=process (WORKER_ENV): each shard's chunks were committed by its own
    # writer process, whose log lines reach the task's log
    shard_log = airflow.task_logs(run_id, task_id="infer_shard")
    assert len(re.findall(r"chunks are committed by writer process \d+", shard_log)) == DIST_SHARDS, shard_log[-3000:]
    assert len(re.findall(r"writer process \d+ committed [1-9]\d* chunks\b", shard_log)) == DIST_SHARDS

    # Complete and unique: every non-empty ticket of the window has exactly one result, written by this run.
    window = window_for_date(DIST_DAY)
    tickets = view.window_tickets(window.start, window.end)
    expected = view.non_empty(tickets)
    assert len(tickets) == DIST_TICKETS and expected
    results = view.results(tickets)
    ids = [r.ticket_id for r in results]
    assert len(ids) == len(set(ids)), "one result per ticket"
    assert set(ids) == expected
    assert {r.run_id for r in results} == {run_id}
    counts = view.item_counts(run_id)
    assert counts.get("succeeded") == len(expected) and sum(counts.values()) == DIST_TICKETS, counts
