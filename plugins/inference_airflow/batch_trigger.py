"""Waiting for a run's provider batches in the triggerer, so no worker slot is held for hours.

Why not the OpenAI provider's own `OpenAIBatchTrigger`: it polls through the hook's synchronous
client inside `run()` (blocking the triggerer's event loop on every poll), watches one batch per
trigger, measures its timeout from when the trigger (re)started (a triggerer restart resets the
24-hour window), ends the wait on the first transient HTTP error, and treats `cancelling` as the end
although a cancelled batch still delivers its finished results. This one reuses what fits from the
provider, its `OpenAIHook` (the API key and base URL from the Airflow connection, as an `AsyncOpenAI`
client), and polls every batch of a run with the async SDK until all have ended; its deadline is an
absolute time derived from the provider's `expires_at`, so it survives restarts unchanged.

Events carry IDs, statuses and counts only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

log = logging.getLogger(__name__)

TERMINAL = frozenset({"completed", "expired", "cancelled", "failed"})
DEFAULT_CONN_ID = "openai_default"


class BatchesEndedTrigger(BaseTrigger):
    """Fires once every batch in `batch_ids` has a terminal status, or the deadline passed, or polling
    failed `max_errors` times in a row (transient errors are retried with backoff until then).

    Event: {"status": "ended" | "deadline" | "error", "run_id", "batches": {id: status}, "pending": [id],
    "reason": fixed text, "carry": the `carry` it was given}. `carry` is the waiting task's own state (IDs,
    times, counts), handed back with the event: `dag.test()` resumes a task with the event alone.
    """

    def __init__(
        self,
        run_id: str,
        batch_ids: list[str],
        deadline: float,
        conn_id: str = DEFAULT_CONN_ID,
        poll_seconds: float = 60.0,
        max_errors: int = 10,
        carry: dict[str, Any] | None = None,
    ):
        super().__init__()
        self.run_id = run_id
        self.batch_ids = list(batch_ids)
        self.deadline = float(deadline)  # unix time; the provider's latest expires_at plus a grace
        self.conn_id = conn_id
        self.poll_seconds = float(poll_seconds)
        self.max_errors = int(max_errors)
        self.carry = dict(carry or {})

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "inference_airflow.batch_trigger.BatchesEndedTrigger",
            {
                "run_id": self.run_id,
                "batch_ids": self.batch_ids,
                "deadline": self.deadline,
                "conn_id": self.conn_id,
                "poll_seconds": self.poll_seconds,
                "max_errors": self.max_errors,
                "carry": self.carry,
            },
        )

    async def _client(self):
        from airflow.providers.openai.hooks.openai import OpenAIHook

        return await OpenAIHook(conn_id=self.conn_id).aget_conn()

    async def run(self) -> AsyncIterator[TriggerEvent]:
        import openai

        statuses: dict[str, str] = {}
        pending = list(self.batch_ids)
        errors = 0
        client = await self._client()
        try:
            while pending:
                try:
                    for batch_id in list(pending):
                        batch = await client.batches.retrieve(batch_id)
                        statuses[batch_id] = batch.status
                        if batch.status in TERMINAL:
                            pending.remove(batch_id)
                    errors = 0
                except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError) as exc:
                    errors += 1
                    log.warning(
                        "run %s: polling batches failed (%s), %d in a row", self.run_id, type(exc).__name__, errors
                    )
                    if errors >= self.max_errors:
                        yield self._event("error", statuses, pending, f"{errors} polls in a row failed")
                        return
                except openai.APIStatusError as exc:  # 401, 403, 404: no retry can help
                    yield self._event("error", statuses, pending, f"the provider answered HTTP {exc.status_code}")
                    return
                if not pending:
                    break
                if time.time() >= self.deadline:
                    yield self._event("deadline", statuses, pending, "the batches did not end before the deadline")
                    return
                delay = self.poll_seconds * (2 ** min(errors, 5) if errors else 1)
                await asyncio.sleep(min(delay, max(0.0, self.deadline - time.time()) + 0.01))
            yield self._event("ended", statuses, [], "every batch ended")
        finally:
            await client.close()

    def _event(self, status: str, statuses: dict[str, str], pending: list[str], reason: str) -> TriggerEvent:
        log.info("run %s: %s (%d batches, %d still pending)", self.run_id, reason, len(self.batch_ids), len(pending))
        return TriggerEvent(
            {
                "status": status,
                "run_id": self.run_id,
                "batches": dict(statuses),
                "pending": sorted(pending),
                "reason": reason,
                "carry": self.carry,
            }
        )


def batch_client(conn_id: str = DEFAULT_CONN_ID):
    """The library's BatchClient over the connection's synchronous OpenAI client (for worker tasks)."""
    from airflow.providers.openai.hooks.openai import OpenAIHook

    from inference.batchapi.client import BatchClient

    return BatchClient(OpenAIHook(conn_id=conn_id).get_conn())
