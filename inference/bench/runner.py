"""`python -m inference bench`: every measurement of BENCHMARKS.md, part by part (`--part`), one command.

Needs the test extra (sentence-transformers) for the engine part and a PostgreSQL server for the database,
load, end-to-end, memory and overhead parts; each of those makes its own database and drops it. Parts that
measure memory or a pipeline step run each step in a fresh process (inference.bench.step_child).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import sys
import time

from inference.config import Settings
from inference.seed import generate
from inference.window import window_for_date

WINDOW = window_for_date(dt.date(2026, 11, 30))
MODEL_PARTS = {"engine", "budgets", "int8", "e2e"}


def texts_for(n: int) -> list[str]:
    """The synthetic tickets' model inputs in arrival order (the demo's long-tailed mix)."""
    out = [f"{s or ''}\n{b or ''}".strip() for _, s, b in generate(n, seed=7)]
    return [t for t in out if t]


def machine() -> dict:
    out = {
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }
    if "torch" in sys.modules:
        import torch

        out.update(torch=torch.__version__, torch_threads=torch.get_num_threads())
        out["cuda"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return out


def _log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(settings: Settings, args) -> dict:
    parts = list(args.part)
    report: dict = {
        "command": " ".join(sys.argv),
        "parts": parts,
        "settings": {"device": settings.device, "dtype": settings.dtype},
    }
    if MODEL_PARTS & set(parts):
        _model_parts(settings, args, parts, report)
    if "database" in parts:
        from inference.bench import db_bench
        from inference.bench.scratchdb import scratch_database
        from inference.store.db import make_engine
        from inference.store.schema import create_schema

        _log(f"database: {args.db_rows} result rows, every write path, inserts and updates")
        with scratch_database(args.pg_url, "inference_bench_db") as url:
            engine = make_engine(url)
            create_schema(engine)
            report["database"] = db_bench.write_rates(engine, args.db_rows, settings.chunk_size)
            engine.dispose()
    if "load" in parts:
        from inference.bench.load_bench import load_rates

        report["load"] = load_rates(args.pg_url, args.load_tickets, _log)
    if "memory" in parts:
        from inference.bench.memory_bench import memory

        env = {"INFERENCE_MAX_SEQ_LENGTH": str(args.memory_seq_length)}
        report["memory"] = memory(args.pg_url, args.memory, args.huge, args.huge_bytes, args.memory_engine, env, _log)
    if "overhead" in parts:
        from inference.bench.overhead_bench import overhead

        n = args.tickets if args.tickets and parts == ["overhead"] else 100_000
        _log(f"overhead: the whole run over {n} tickets, engine {args.engine}")
        report["overhead"] = overhead(
            args.pg_url,
            n,
            engine=args.engine,
            shards=args.shards,
            parallel=args.parallel,
            fail_every=args.fail_every,
            keep_seed=args.keep_seed,
            log=_log,
        )
    report["machine"] = machine()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=2)
    return report


def _model_parts(settings: Settings, args, parts: list[str], report: dict) -> None:
    from inference.bench import e2e_bench, engine_bench

    _log("loading the model")
    model = e2e_bench.load_model(settings)
    encoder = model.encoder
    texts = texts_for(args.tickets or 2000)
    encoder.encode(texts[:64])  # warm-up
    if "engine" in parts:
        _log(f"engine: {len(texts)} texts")
        tokenizer = engine_bench.hf_tokenizer(settings.model_dir)
        results = []
        if args.one_by_one:
            results.append(engine_bench.one_per_forward(tokenizer, encoder, texts[: args.one_by_one]))
        results.append(engine_bench.fixed_batches(tokenizer, encoder, texts))
        _log(f"engine: sentence-transformers at batch sizes {args.st_batch_sizes}")
        peers = engine_bench.sentence_transformers_sweep(
            settings.model_dir, texts, encoder, args.st_batch_sizes, repeat=args.repeat
        )
        results.extend(peers)
        mine = engine_bench.ours(encoder, texts, settings.chunk_size, repeat=args.repeat)
        results.append(mine)
        best = max(peers, key=lambda r: r.texts_per_s)
        report["engine"] = {
            "rows": [r.row() for r in results],
            "ours_over": {r.name: round(mine.texts_per_s / r.texts_per_s, 2) for r in results if r is not mine},
            "best_sentence_transformers": best.name,
            "ours_over_best_sentence_transformers": round(mine.texts_per_s / best.texts_per_s, 2),
            "padded_tokens_per_s": {r.name: round(r.padded_tokens / r.seconds, 1) for r in (best, mine)},
            "cosine_min_vs_sentence_transformers": round(engine_bench.cosine_min(mine.embeddings, best.embeddings), 6),
        }
        _log("engine: tokenizer against model")
        report["time_split"] = engine_bench.time_split(encoder, texts, settings.chunk_size)
    if "budgets" in parts and args.budgets:
        _log("token budget sweep")
        report["budget_sweep"] = engine_bench.budget_sweep(encoder, texts, args.budgets, settings.chunk_size)
    if "int8" in parts and args.int8_texts:
        _log(f"int8: {args.int8_texts} texts")
        report["int8"] = engine_bench.int8_comparison(settings, texts[: args.int8_texts], settings.chunk_size)
    if "e2e" in parts and args.e2e_tickets:
        from inference.bench.scratchdb import scratch_database

        _log(f"end to end: {args.e2e_tickets} tickets on PostgreSQL")
        with scratch_database(args.pg_url, "inference_bench_e2e") as url:
            report["end_to_end"] = e2e_bench.e2e(url, args.e2e_tickets, settings, model, WINDOW)


def render(report: dict) -> str:
    """The overhead part alone: its one JSON line. Otherwise a short table and one JSON line per part."""
    if report["parts"] == ["overhead"]:
        return json.dumps(report["overhead"])
    lines = []
    if "engine" in report:
        lines += ["| contender | texts | texts/s | tokens/s | padding efficiency |", "|---|---:|---:|---:|---:|"]
        for r in report["engine"]["rows"]:
            lines.append(
                f"| {r['name']} | {r['texts']} | {r['texts_per_s']} | {r['tokens_per_s']} | {r['padding_efficiency']} |"
            )
        lines.append("")
        lines.append("ours / peer: " + ", ".join(f"{k}: {v}x" for k, v in report["engine"]["ours_over"].items()))
        lines.append(f"min cosine vs sentence-transformers: {report['engine']['cosine_min_vs_sentence_transformers']}")
    for key in ("time_split", "budget_sweep", "int8", "database", "load", "end_to_end", "memory", "overhead"):
        if key in report:
            lines.append(f"{key}: {json.dumps(report[key])}")
    return "\n".join(lines)
