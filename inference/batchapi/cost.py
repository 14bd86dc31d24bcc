"""What a run's summaries cost at the provider's batch price, next to what the local GPU spent.

Tokens come from the provider (the batch's own usage, else the sum of the result lines' usage); the
price is configuration (INFERENCE_BATCH_PRICE_*_PER_MTOK, USD per million tokens). Retries are
included: the cost per 1,000 tickets is what the run paid divided by the tickets that got a reply.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import sqlalchemy as sa

from inference.batchapi.settings import BatchSettings
from inference.store import batches, runs


@dataclass(frozen=True)
class BatchCost:
    parts: int
    requests: int  # requests sent, retries included
    tickets_replied: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None  # None when no price is configured
    cost_per_1000_tickets_usd: float | None
    device_seconds: float  # the local model's time in the same run (GPU or CPU), for comparison

    def as_dict(self) -> dict:
        return asdict(self)


def price(settings: BatchSettings, input_tokens: int, output_tokens: int) -> float | None:
    if settings.price_input_per_mtok is None and settings.price_output_per_mtok is None:
        return None
    return (
        input_tokens * (settings.price_input_per_mtok or 0.0) + output_tokens * (settings.price_output_per_mtok or 0.0)
    ) / 1_000_000


def run_cost(conn: sa.Connection, run_id: str, settings: BatchSettings) -> BatchCost:
    totals = batches.run_totals(conn, run_id)
    cost = price(settings, totals["input_tokens"], totals["output_tokens"])
    replied = totals["tickets_replied"]
    return BatchCost(
        parts=totals["parts"],
        requests=totals["requests"],
        tickets_replied=replied,
        input_tokens=totals["input_tokens"],
        output_tokens=totals["output_tokens"],
        cost_usd=None if cost is None else round(cost, 6),
        cost_per_1000_tickets_usd=None if cost is None or not replied else round(cost / replied * 1000, 6),
        device_seconds=round(float(runs.get_run(conn, run_id).device_seconds or 0.0), 3),
    )
