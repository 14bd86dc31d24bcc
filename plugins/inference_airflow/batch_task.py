"""The DAG's Batch API step (INFERENCE_SUMMARY=batch_api): a deferrable operator, used twice: `summarize_batch`
after the shards and `summarize_retries` after retry_failed.

Each turn runs on a worker for seconds: collect the batches that ended, load the complete rows, submit
what waits for a summary (new items, or failed requests again in new, smaller batches). Then the task
defers on BatchesEndedTrigger and holds no worker slot while the provider works (hours); the trigger's
event starts the next turn. A retried or restarted task starts with a turn too, which finds the recorded
batches and waits for them again: nothing is submitted twice. Skipped when the summaries are computed
locally. XCom carries IDs and counts only.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator

from inference_airflow import tasks as steps

_TALLY = ("rounds", "parts", "replies", "failed", "cancelled", "abandoned")


class SummarizeBatchOperator(BaseOperator):
    """Summaries of the run's items from the Batch API, in as many rounds as the failures need."""

    ui_color = "#e8f0fe"

    def execute(self, context: Any) -> dict:
        return _turn(self, None, None, {}, context)

    def resume(self, context: Any, event: dict[str, Any] | None = None) -> dict:
        """Woken by the trigger: its event hands back what the previous turn waited for (`carry`)."""
        from inference.batchapi.driver import Wait

        event = event or {}
        carry = event.get("carry") or {}
        waited = Wait.from_dict(carry["wait"]) if carry.get("wait") else None
        self.log.info("batches of run %s: %s (%s)", event.get("run_id"), event.get("status"), event.get("reason"))
        return _turn(self, waited, event.get("status") == "deadline", dict(carry.get("tally") or {}), context)


@steps._no_retry_for_permanent
@steps._skip_if_not_planned
def _turn(op: SummarizeBatchOperator, waited, overdue: bool | None, tally: dict, context: Any) -> dict:
    from airflow.sdk.exceptions import AirflowSkipException

    from inference.batchapi.step import summarize_batch
    from inference.heads.summary_batch import uses_batch_api
    from inference_airflow.batch_trigger import BatchesEndedTrigger, batch_client

    settings = steps.settings()
    if not uses_batch_api(settings):
        raise AirflowSkipException("summaries are computed by the local model (INFERENCE_SUMMARY is not batch_api)")
    run_id = context["run_id"]
    client = batch_client(settings.batch.conn_id)
    try:
        step = summarize_batch(settings, run_id, client, waited, overdue)
    finally:
        client.close()
    tally = _add(tally, step)
    if step.wait is None:
        op.log.info("run %s: every summary from the Batch API is settled: %s", run_id, tally)
        return {"run_id": run_id, **tally}
    wait = step.wait
    op.log.info(
        "run %s: waiting in the triggerer for %d batches, until %s at the latest",
        run_id,
        len(wait.batch_ids),
        wait.deadline.isoformat(),
    )
    op.defer(
        trigger=BatchesEndedTrigger(
            run_id,
            list(wait.batch_ids),
            wait.deadline.timestamp(),
            conn_id=settings.batch.conn_id,
            poll_seconds=settings.batch.poll_seconds,
            carry={"wait": wait.as_dict(), "tally": tally},
        ),
        method_name="resume",
    )


def _add(tally: dict, step) -> dict:
    out = {k: int(tally.get(k, 0)) for k in _TALLY}
    out["rounds"] += 1 if step.submitted else 0
    out["parts"] += len(step.collected.collected)
    out["replies"] += step.collected.replies
    out["failed"] += step.collected.failed
    out["cancelled"] += len(step.cancelled)
    out["abandoned"] += step.abandoned
    return out
