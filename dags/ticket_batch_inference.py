"""Nightly batch inference over the support-ticket backlog.

plan_run -> infer_shard (mapped, pool `gpu`) -> summarize_batch -> load_results -> has_retries -> retry_failed
    -> summarize_retries -> finish_run

summarize_batch / summarize_retries: the summaries through a provider's Batch API (INFERENCE_SUMMARY=batch_api;
skipped otherwise), deferrable: they wait in the triggerer, holding no worker slot.

Each night at 02:00 UTC the run for logical date D processes tickets created or updated in
[D 02:00, D+1 02:00) UTC. Every ticket ends succeeded, failed (typed) or skipped (with a reason);
finish_run fails the run when that accounting does not add up or too many tickets failed.

**Runbook** (README.md of the repository):

- *Triggering a run, and its params*: the trigger form's params (a window, named tickets, reprocess, limit,
  shards, a lower `max_batch_tokens` after an out-of-memory), and the REST API.
- *Backfills*: `airflow backfill create` for a range of nights.
- *Alerts*: who hears of a failed task or run, and how.
- *Watching a run*: the progress lines in `infer_shard`'s log (done/total, tickets/s, padding, failures, ETA),
  the **Run report** tab of each run, the run's note, `python -m inference status` and `report`.

Mapped `infer_shard` tasks are labelled `shard K · N tickets`.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import (
    AsyncCallback,
    CronDataIntervalTimetable,
    DeadlineAlert,
    DeadlineReference,
    TriggerRule,
    dag,
    task,
)

from inference_airflow import assets, routing
from inference_airflow import tasks as steps
from inference_airflow.alerts import TicketInferenceAlert, run_deadline_missed
from inference_airflow.batch_task import SummarizeBatchOperator
from inference_airflow.params import PARAMS

# The mapped shards' names in the UI (rendered from the shard descriptor plan_run returned).
SHARD_LABEL = (
    "shard {{ task.op_kwargs['shard']['shard'] }} · {{ '{:,}'.format(task.op_kwargs['shard']['tickets']) }} tickets"
)
SHARD_DOC = """Runs the model over one shard, chunk by chunk (INFERENCE_CHUNK_SIZE): reads and tokenizes the next chunk
while the model runs, writes each chunk's outputs to staging in one transaction (a killed task resumes where it
stopped). Its log has a line per committed chunk: tickets done/total, tickets/s and tokens/s, padding efficiency,
failures so far and the ETA. Pool `gpu`, queue `gpu`."""


@dag(
    dag_id="ticket_batch_inference",
    schedule=CronDataIntervalTimetable("0 2 * * *", timezone="UTC"),
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    max_active_runs=4,
    description="Nightly embeddings, categories and summaries of the support tickets (report: the run's Run report tab)",
    default_args={
        "owner": "ticket-inference",
        "retries": routing.TASK_RETRIES,
        "retry_delay": dt.timedelta(seconds=routing.RETRY_DELAY_SECONDS),
        "retry_exponential_backoff": 2.0,
        # Task level, after the last retry. A task killed so hard that its callback cannot run still
        # alerts: finish_run always runs and fails its reconciliation for the tickets left unfinished.
        "on_failure_callback": TicketInferenceAlert(),
    },
    tags=["inference", "tickets"],
    params=PARAMS,
    deadline=DeadlineAlert(
        reference=DeadlineReference.DAGRUN_QUEUED_AT,
        interval=dt.timedelta(minutes=routing.RUN_DEADLINE_MINUTES),
        callback=AsyncCallback(run_deadline_missed),
    )
    if routing.RUN_DEADLINE_MINUTES
    else None,
    doc_md=__doc__,
)
def ticket_batch_inference():
    @task
    def plan_run(**context) -> list[dict]:
        """Finds the window's tickets that need work (no result, new text or model), records one item per
        ticket and splits them into shards balanced by tokens. Returns shard descriptors (IDs and counts)."""
        return steps.plan_run(context)

    gpu = {"pool": routing.GPU_POOL, "queue": routing.GPU_QUEUE, "executor_config": routing.gpu_executor_config()}

    @task(**gpu, map_index_template=SHARD_LABEL, doc_md=SHARD_DOC)
    def infer_shard(shard: dict, **context) -> dict:
        return steps.infer_shard(shard, context)

    @task(trigger_rule=TriggerRule.ALL_DONE)  # load whatever shards staged, even if one shard failed
    def load_results(**context) -> dict:
        """Validates the staged outputs and upserts them into ticket_results by ticket ID (never an older
        version over a newer one); invalid outputs become typed failures."""
        return steps.load_results(context)

    @task.branch
    def has_retries(**context) -> list[str]:
        """retry_failed when some failures still wait for a retry, else straight to finish_run."""
        return steps.has_retries(context)

    @task(**gpu)
    def retry_failed(**context) -> dict:
        """Retries the run's retryable failures one ticket per forward pass in float32, with fresh text;
        a ticket still failing after INFERENCE_MAX_ATTEMPTS is dead-lettered."""
        return steps.retry_failed(context)

    # always reconcile, so a broken run fails loudly; a successful run updates the asset ticket_results
    @task(trigger_rule=TriggerRule.ALL_DONE, outlets=[assets.TICKET_RESULTS])
    def finish_run(**context) -> dict:
        """Reconciles (backlog = succeeded + failed + skipped, every success backed by a result), checks the
        failure rate, and returns the run's summary: counts, tokens/s and tickets/s while the model ran,
        device-seconds, cost per 1,000 tickets. The full report: the run's Run report tab."""
        return steps.finish_run(context)

    # Deferrable; skipped unless INFERENCE_SUMMARY=batch_api. After the shards whatever they staged, even if one failed.
    summarize = SummarizeBatchOperator(task_id="summarize_batch", trigger_rule=TriggerRule.ALL_DONE)
    summarize_retries = SummarizeBatchOperator(task_id="summarize_retries")

    shards = plan_run()
    loaded = load_results()
    shards >> infer_shard.expand(shard=shards) >> summarize >> loaded
    retry, finish = retry_failed(), finish_run()
    loaded >> has_retries() >> [retry, finish]
    retry >> summarize_retries >> finish


ticket_batch_inference()
