"""`python -m inference bench`: every measurement of BENCHMARKS.md in one process, one command.

Needs the test extra (sentence-transformers) for peer (c) and a PostgreSQL server for the database,
end-to-end and memory parts; each part makes its own database and drops it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import sys
import time

from inference.bench import db_bench, e2e_bench, engine_bench, memory_bench
from inference.bench.scratchdb import scratch_database
from inference.config import Settings
from inference.seed import generate
from inference.store.db import make_engine
from inference.store.schema import create_schema
from inference.window import window_for_date

WINDOW = window_for_date(dt.date(2026, 11, 30))


def texts_for(n: int) -> list[str]:
    """The synthetic tickets' model inputs in arrival order (the demo's long-tailed mix)."""
    out = [f"{s or ''}\n{b or ''}".strip() for _, s, b in generate(n, seed=7)]
    return [t for t in out if t]


def machine() -> dict:
    import torch

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu": platform.processor() or platform.machine(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }


def _log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(settings: Settings, args) -> dict:
    report: dict = {"command": " ".join(sys.argv), "settings": {"device": settings.device, "dtype": settings.dtype}}
    _log("loading the model")
    model = e2e_bench.load_model(settings)
    encoder = model.encoder
    report["machine"] = machine()
    texts = texts_for(args.tickets)
    tokenizer = engine_bench.hf_tokenizer(settings.model_dir)
    encoder.encode(texts[:64])  # warm-up

    _log(f"engine: {len(texts)} texts")
    results = []
    if args.one_by_one:
        results.append(engine_bench.one_per_forward(tokenizer, encoder, texts[: args.one_by_one]))
    results.append(engine_bench.fixed_batches(tokenizer, encoder, texts))
    results.append(engine_bench.sentence_transformers(settings.model_dir, texts, encoder, repeat=args.repeat))
    mine = engine_bench.ours(encoder, texts, settings.chunk_size, repeat=args.repeat)
    results.append(mine)
    reference = next(r for r in results if r.name.startswith("sentence-transformers"))
    report["engine"] = {
        "rows": [r.row() for r in results],
        "ours_over": {r.name: round(mine.texts_per_s / r.texts_per_s, 2) for r in results if r is not mine},
        "cosine_min_vs_sentence_transformers": round(engine_bench.cosine_min(mine.embeddings, reference.embeddings), 6),
    }
    if args.budgets:
        _log("token budget sweep")
        report["budget_sweep"] = engine_bench.budget_sweep(encoder, texts, args.budgets, settings.chunk_size)

    if args.db_rows:
        _log(f"database: {args.db_rows} result rows")
        with scratch_database(args.pg_url, "inference_bench_db") as url:
            engine = make_engine(url)
            create_schema(engine)
            report["database"] = db_bench.write_rates(engine, args.db_rows, settings.chunk_size)
            engine.dispose()

    if args.e2e_tickets:
        _log(f"end to end: {args.e2e_tickets} tickets on PostgreSQL")
        with scratch_database(args.pg_url, "inference_bench_e2e") as url:
            report["end_to_end"] = e2e_bench.e2e(url, args.e2e_tickets, settings, model, WINDOW)

    if args.memory:
        report["memory"] = []
        env = {
            **os.environ,
            "INFERENCE_DEVICE": settings.device,
            "INFERENCE_MAX_SEQ_LENGTH": str(args.memory_seq_length),
        }
        for n in args.memory:
            _log(f"memory: a {n}-ticket shard (max_seq_length {args.memory_seq_length})")
            with scratch_database(args.pg_url, "inference_bench_mem") as url:
                small = settings.replace(max_seq_length=args.memory_seq_length)
                report["memory"].append(memory_bench.peak_rss(url, n, WINDOW, small, env))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=2)
    return report


def render(report: dict) -> str:
    lines = ["| contender | texts | texts/s | tokens/s | padding efficiency |", "|---|---:|---:|---:|---:|"]
    for r in report["engine"]["rows"]:
        lines.append(
            f"| {r['name']} | {r['texts']} | {r['texts_per_s']} | {r['tokens_per_s']} | {r['padding_efficiency']} |"
        )
    lines.append("")
    lines.append("ours / peer: " + ", ".join(f"{k}: {v}x" for k, v in report["engine"]["ours_over"].items()))
    lines.append(f"min cosine vs sentence-transformers: {report['engine']['cosine_min_vs_sentence_transformers']}")
    for key in ("budget_sweep", "database", "end_to_end", "memory"):
        if key in report:
            lines.append(f"{key}: {json.dumps(report[key])}")
    return "\n".join(lines)
