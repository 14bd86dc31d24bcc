"""`python -m inference bench` end to end at toy sizes on the real PostgreSQL and the real model: every part
runs and reports sane numbers (the numbers themselves belong in BENCHMARKS.md, never in tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_bench_runs_every_part_and_reports_consistent_numbers(pg_admin_url, tmp_path):
    out = tmp_path / "bench.json"
    args = ["--tickets", "120", "--one-by-one", "10", "--repeat", "1", "--budgets", "512,2048"]
    args += ["--db-rows", "300", "--e2e-tickets", "150", "--memory", "200", "--pg-url", pg_admin_url]
    proc = subprocess.run(
        [sys.executable, "-m", "inference", "bench", *args, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "INFERENCE_DEVICE": "cpu", "INFERENCE_FEWSHOT": "none"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    rows = {r["name"].split(" (")[0]: r for r in report["engine"]["rows"]}
    assert set(rows) >= {"one ticket per forward", "fixed batches of 32, arrival order", "ours"}
    assert any(name.startswith("sentence-transformers") for name in rows)
    assert report["engine"]["cosine_min_vs_sentence_transformers"] >= 0.9999
    for r in report["engine"]["rows"]:
        assert r["texts_per_s"] > 0 and 0 < r["padding_efficiency"] <= 1
    assert rows["one ticket per forward"]["padding_efficiency"] == 1.0
    assert [s["max_batch_tokens"] for s in report["budget_sweep"]] == [512, 2048]
    db = report["database"]
    assert db["rows"] == 300 and min(v for k, v in db.items() if k.endswith("rows_per_s")) > 0
    e2e = report["end_to_end"]
    assert e2e["engine_only"]["tickets"] == 150 and e2e["pipeline"]["backlog"] <= 150
    assert e2e["pipeline"]["succeeded"] == e2e["engine_only"]["texts"] > 0
    assert e2e["fraction"] > 0
    (memory,) = report["memory"]
    assert memory["tickets"] == 200 and memory["staged"] > 0 and memory["peak_rss_mib"] > 0
