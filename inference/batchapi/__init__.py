"""Summaries through an OpenAI-compatible Batch API (or the same files on your own GPU box, offline).

The steps, each repeatable and safe to run twice:
    submit_run      plan parts under the provider's limits, upload, create batches (recorded first)
    (wait)          a deferrable Airflow task polls the batches (plugins/inference_airflow/batch_trigger.py)
    collect_run     download, match by custom_id, stage replies, record typed failures
    load_results    the pipeline's own step: validate, upsert with the usual guards
    submit_run      again, for the retry branch: failed requests go out in new, smaller batches
    run_cost        tokens and cost per 1,000 tickets for the run's summary
`advance` is one turn of that loop, run by both drivers: the deferrable DAG task (`summarize_batch`, waiting
in the triggerer between turns) and `run_batches` (one process: the CLI's `run` through `summarize_all`).
Offline: export_requests / import_results (`python -m inference batch-file export|import`).

Never imports Airflow; `openai` only when a client is made. Exports are lazy.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "BatchSettings": "inference.batchapi.settings",
    "BatchClient": "inference.batchapi.client",
    "BatchInfo": "inference.batchapi.client",
    "BatchApiRejected": "inference.batchapi.client",
    "BatchApiUnavailable": "inference.batchapi.client",
    "BatchContext": "inference.batchapi.submit",
    "PartRef": "inference.batchapi.submit",
    "submit_run": "inference.batchapi.submit",
    "open_parts": "inference.batchapi.submit",
    "wait_deadline": "inference.batchapi.submit",
    "CollectSummary": "inference.batchapi.collect",
    "collect_run": "inference.batchapi.collect",
    "refresh": "inference.batchapi.collect",
    "cancel_overdue": "inference.batchapi.collect",
    "abandon_parts": "inference.batchapi.collect",
    "BatchCost": "inference.batchapi.cost",
    "run_cost": "inference.batchapi.cost",
    "run_batches": "inference.batchapi.driver",
    "DriveSummary": "inference.batchapi.driver",
    "advance": "inference.batchapi.driver",
    "Step": "inference.batchapi.driver",
    "Wait": "inference.batchapi.driver",
    "summarize_batch": "inference.batchapi.step",
    "summarize_all": "inference.batchapi.step",
    "batch_context": "inference.batchapi.step",
    "cost_summary": "inference.batchapi.step",
    "export_requests": "inference.batchapi.offline",
    "import_results": "inference.batchapi.offline",
    "ImportSummary": "inference.batchapi.offline",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'inference.batchapi' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
