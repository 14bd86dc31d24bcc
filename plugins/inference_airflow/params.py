"""The trigger form: one Param per run option, validated by JSON schema in the UI and the REST API.

The task validates again (inference.options.parse_options), because `airflow dags trigger --conf` and
API clients can send values the form would have refused.
"""

from __future__ import annotations

from airflow.sdk import Param

TICKET_ID_PATTERN = "^[A-Za-z0-9_.:-]{1,128}$"
DATE_PATTERN = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"

PARAMS = {
    "window_start": Param(
        None,
        type=["null", "string"],
        format="date",
        pattern=DATE_PATTERN,
        title="First logical date (optional)",
        description="Reprocess the nightly windows from this date (YYYY-MM-DD): window [date 02:00, ...) UTC. "
        "Empty: the run's own window (the previous day).",
    ),
    "window_end": Param(
        None,
        type=["null", "string"],
        format="date",
        pattern=DATE_PATTERN,
        title="Last logical date (optional)",
        description="Last date of the range, inclusive (needs a first date). Empty: same as the first date.",
    ),
    "ticket_ids": Param(
        None,
        type=["null", "array"],
        items={"type": "string", "pattern": TICKET_ID_PATTERN},
        maxItems=10_000,
        title="Ticket IDs (optional)",
        description="Process exactly these tickets, whatever their dates, even if they have a current result.",
    ),
    "reprocess": Param(
        False,
        type="boolean",
        title="Reprocess",
        description="Recompute tickets that already have a result for the current text and model.",
    ),
    "limit": Param(
        None,
        type=["null", "integer"],
        minimum=1,
        maximum=10_000_000,
        title="Limit (optional)",
        description="Process at most this many tickets (the lowest ticket IDs first).",
    ),
    "max_batch_tokens": Param(
        None,
        type=["null", "integer"],
        minimum=256,
        maximum=10_000_000,
        title="Max batch tokens (optional)",
        description="Padded tokens per forward pass for this run; lower it if a GPU runs out of memory. "
        "Empty: the worker's INFERENCE_MAX_BATCH_TOKENS.",
    ),
    "shards": Param(
        None,
        type=["null", "integer"],
        minimum=1,
        maximum=1024,
        title="Shards (optional)",
        description="Number of parallel infer_shard tasks. Empty: from the estimated tokens.",
    ),
    "dry_run": Param(
        False,
        type="boolean",
        title="Dry run",
        description="Plan and report how many tickets would be processed; run no model, write no results.",
    ),
}
