"""Statistics of a run's committed chunks for the report, with pandas on small frames: one row per chunk, its
batch sizes (one per forward pass) and histograms keyed by token length; never one row per ticket."""

from __future__ import annotations

from collections import Counter

import sqlalchemy as sa

from inference.store import schema as s


def chunk_frame(rows: list[sa.Row]):
    import pandas as pd

    columns = [c.name for c in s.inference_chunks.columns]
    frame = pd.DataFrame([tuple(r) for r in rows], columns=columns)
    if frame.empty:
        frame["seconds"] = pd.Series(dtype=float)
        return frame
    frame = frame.sort_values(["committed_at", "seq"]).reset_index(drop=True)
    # A chunk's wall time: since the previous commit of the same task invocation (the first: since it started).
    previous = frame.groupby(["step", "shard", "step_started_at"])["committed_at"].shift(1)
    previous = previous.fillna(frame["step_started_at"])
    frame["seconds"] = (frame["committed_at"] - previous).dt.total_seconds().clip(lower=0)
    return frame


def chunk_throughput(frame) -> dict:
    if frame.empty:
        return {"chunks": 0, "series": [], "tickets_per_second": {}}
    rate = (frame["tickets"] / frame["seconds"].where(frame["seconds"] > 0)).round(2)
    tokens = (frame["real_tokens"] / frame["seconds"].where(frame["seconds"] > 0)).round(1)
    series = [
        {
            "n": k + 1,
            "step": step,
            "shard": int(shard),
            "tickets": int(tickets),
            "seconds": round(float(seconds), 3),
            "model_seconds": round(float(model_s), 3),
            "tickets_per_second": None if r != r else float(r),  # NaN -> None
            "tokens_per_second": None if tk != tk else float(tk),
        }
        for k, (step, shard, tickets, seconds, model_s, r, tk) in enumerate(
            zip(
                frame["step"],
                frame["shard"],
                frame["tickets"],
                frame["seconds"],
                frame["model_seconds"],
                rate,
                tokens,
                strict=True,
            )
        )
    ]
    return {
        "chunks": len(frame),
        "series": series,
        "tickets_per_second": describe(rate.dropna()),
        "model_share_of_chunk_time": round(float(frame["model_seconds"].sum() / frame["seconds"].sum()), 4)
        if frame["seconds"].sum() > 0
        else None,
    }


def batch_sizes(frame, cap: int | None) -> dict:
    import pandas as pd

    sizes = pd.Series([n for batch in frame.get("batch_sizes", []) for n in batch], dtype="int64")
    if sizes.empty:
        return {"batches": 0}
    counts = sizes.value_counts().sort_index()
    return {
        "batches": int(sizes.size),
        "tickets": int(sizes.sum()),
        "mean": round(float(sizes.mean()), 2),
        **{k: v for k, v in describe(sizes).items() if k != "mean"},
        "cap": cap,
        "at_cap_share": round(float((sizes >= cap).mean()), 4) if cap else None,
        "histogram": buckets(counts),
    }


def token_lengths(frame) -> dict:
    import pandas as pd

    counts: Counter = Counter()
    for histogram in frame.get("token_lengths", []):
        counts.update({int(k): int(v) for k, v in histogram.items()})
    if not counts:
        return {"tickets": 0}
    series = pd.Series(counts).sort_index()
    total = int(series.sum())
    return {
        "tickets": total,
        "mean": round(float((series.index.to_numpy() * series.to_numpy()).sum() / total), 2),
        **{f"p{q}": weighted_quantile(series, q / 100) for q in (10, 50, 90, 99)},
        "max": int(series.index.max()),
        "histogram": buckets(series),
    }


def outputs(frame) -> dict:
    staged = int(frame["staged"].sum()) if not frame.empty else 0
    truncated = int(frame["truncated"].sum()) if not frame.empty else 0
    uncertain = int(frame["uncertain"].sum()) if not frame.empty else 0
    return {
        "staged": staged,
        "truncated": truncated,
        "truncated_share": round(truncated / staged, 4) if staged else None,
        "uncertain": uncertain,
        "uncertain_share": round(uncertain / staged, 4) if staged else None,
    }


def describe(values) -> dict:
    if len(values) == 0:
        return {}
    q = values.quantile([0.1, 0.5, 0.9])
    return {
        "mean": round(float(values.mean()), 2),
        "p10": round(float(q.loc[0.1]), 2),
        "p50": round(float(q.loc[0.5]), 2),
        "p90": round(float(q.loc[0.9]), 2),
        "min": round(float(values.min()), 2),
        "max": round(float(values.max()), 2),
    }


def weighted_quantile(counts, q: float) -> int:
    """The value at quantile q of a histogram (index: value, values: how many)."""
    cumulative = counts.cumsum()
    return int(counts.index[int((cumulative >= q * cumulative.iloc[-1]).to_numpy().argmax())])


def buckets(counts, buckets: int = 16) -> list[dict]:
    """A histogram (index: value, values: how many) regrouped into at most `buckets` equal-width ranges."""
    import math

    lo, hi = int(counts.index.min()), int(counts.index.max())
    width = max(1, math.ceil((hi - lo + 1) / buckets))
    out: list[dict] = []
    for start in range(lo, hi + 1, width):
        stop = start + width - 1
        n = int(counts[(counts.index >= start) & (counts.index <= stop)].sum())
        out.append({"from": start, "to": stop, "count": n})
    return out
