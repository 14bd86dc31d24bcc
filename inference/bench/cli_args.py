"""The `python -m inference bench` options (kept here, light to import: the CLI parses them before any
benchmark module, and torch, is loaded)."""

from __future__ import annotations

import argparse

PARTS = ("engine", "budgets", "int8", "database", "load", "e2e", "memory", "overhead")
DEFAULT_PARTS = ("engine", "budgets", "int8", "database", "load", "e2e", "memory")  # `make bench`


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _parts(text: str) -> list[str]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown part(s) {', '.join(unknown)}; known: {', '.join(PARTS)}")
    return parts


def add_arguments(bench: argparse.ArgumentParser) -> None:
    a = bench.add_argument
    a(
        "--part",
        type=_parts,
        default=list(DEFAULT_PARTS),
        help=f"comma-separated parts to run: {', '.join(PARTS)} (default: all but overhead)",
    )
    a("--tickets", type=int, help="engine parts: texts compared (2000); overhead: tickets in the run (100000)")
    a("--repeat", type=int, default=3, help="runs of sentence-transformers and ours; the best counts (3)")
    a("--one-by-one", type=int, default=300, help="texts for the one-per-forward peer (300; 0 skips)")
    a(
        "--st-batch-sizes",
        type=_ints,
        default=[16, 32, 64, 128, 256],
        help="sentence-transformers batch sizes swept; its best is the peer (16,32,64,128,256)",
    )
    a("--budgets", type=_ints, default=[512, 1024, 2048, 4096, 8192], help="token budgets swept (budgets part)")
    a("--int8-texts", type=int, default=1000, help="texts for float32 against int8 (1000)")
    a("--db-rows", type=int, default=20000, help="result rows for the write paths (database part)")
    a("--load-tickets", type=int, default=50000, help="tickets staged then loaded by load_results (load part)")
    a("--e2e-tickets", type=int, default=20000, help="tickets for the end-to-end run with the model (e2e part)")
    a("--memory", type=_ints, default=[5000, 50000], help="shard sizes for per-step peak RSS (memory part)")
    a("--memory-seq-length", type=int, default=32, help="max tokens per ticket in the shard-size runs (32)")
    a(
        "--memory-engine",
        choices=("model", "standin", "instant"),
        default="model",
        help="what infer_shard runs in the memory part (model)",
    )
    a("--huge", type=_ints, default=[40, 200], help="counts of huge tickets, one shard each (memory part)")
    a("--huge-bytes", type=int, default=1_000_000, help="characters per huge ticket (1000000)")
    a(
        "--engine",
        choices=("instant", "standin", "model"),
        default="instant",
        help="overhead part: instant (valid outputs, no model, no head work), standin (stand-in encoder + real heads)",
    )
    a("--shards", type=int, default=4, help="overhead part: shards of the run (4)")
    a("--parallel", type=int, default=2, help="overhead part: infer_shard processes at once (2)")
    a("--fail-every", type=int, default=1000, help="overhead part: every Nth ticket fails once, so retry runs (1000)")
    a(
        "--keep-seed",
        action="store_true",
        help="overhead part: seed the tickets once into a template database kept on the server, copy it per run",
    )
    a(
        "--pg-url",
        default="postgresql+psycopg2://postgres@127.0.0.1:5432/postgres",
        help="admin URL of a PostgreSQL server: each part creates and drops its own database",
    )
    a("--json", help="also write the full report here")
