"""`python -m inference bench` end to end at toy sizes on the real PostgreSQL and the real model: every part
runs and reports sane numbers (the numbers themselves belong in BENCHMARKS.md, never in tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow
ENV = {**os.environ, "INFERENCE_DEVICE": "cpu", "INFERENCE_FEWSHOT": "none"}


def bench(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "inference", "bench", *args],
        capture_output=True,
        text=True,
        timeout=900,
        env={**ENV, **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_bench_runs_every_part_and_reports_consistent_numbers(pg_admin_url, tmp_path):
    out = tmp_path / "bench.json"
    args = ["--tickets", "120", "--one-by-one", "10", "--repeat", "1", "--st-batch-sizes", "16,64"]
    args += ["--budgets", "512,2048", "--int8-texts", "40", "--db-rows", "300", "--load-tickets", "200"]
    args += ["--e2e-tickets", "150", "--memory", "200", "--huge", "2", "--huge-bytes", "100000"]
    bench(*args, "--pg-url", pg_admin_url, "--json", str(out))
    report = json.loads(out.read_text())
    rows = {r["name"].split(" (")[0]: r for r in report["engine"]["rows"]}
    assert set(rows) >= {"one ticket per forward", "fixed batches of 32, arrival order", "ours"}
    assert {"sentence-transformers encode(batch_size=16)", "sentence-transformers encode(batch_size=64)"} <= set(rows)
    assert report["engine"]["best_sentence_transformers"] in rows
    assert report["engine"]["cosine_min_vs_sentence_transformers"] >= 0.9999
    for r in report["engine"]["rows"]:
        assert r["texts_per_s"] > 0 and 0 < r["padding_efficiency"] <= 1
    assert rows["one ticket per forward"]["padding_efficiency"] == 1.0
    split = report["time_split"]
    assert split["tokenize_seconds"] > 0 and 0 < split["tokenizer_share"] < 1 and 0 < split["model_busy"] <= 1
    assert [s["max_batch_tokens"] for s in report["budget_sweep"]] == [512, 2048]
    assert report["int8"]["texts"] == 40 and report["int8"]["int8_texts_per_s"] > 0
    db = report["database"]
    for mode in ("insert", "update"):
        rates = [v for k, v in db[mode].items() if k.endswith("rows_per_s")]
        assert len(rates) == 4 and min(rates) > 0  # row by row, execute_values at two page sizes, ours
    for mode in ("new", "update"):
        load = report["load"]["load_results"][mode]
        assert load["written"] == load["rows"] > 150 and load["rows_per_s"] > 0 and load["peak_rss_mib"] > 0
        for way in ("in_shard", "in_shard_serial", "in_shard_process"):
            in_shard = report["load"][way][mode]
            assert in_shard["rows"] == load["rows"]  # loaded by infer_shard itself
            # the chunk transactions are part of the shard's time, so their rate is at least the whole shard's
            assert 0 < in_shard["commit_seconds"] <= in_shard["infer_seconds"]
            assert in_shard["commit_rows_per_s"] >= in_shard["shard_rows_per_s"] > 0
            assert in_shard["cpu_us_per_row"] > 0  # the shard process's own CPU time, reported by step_child
            if way == "in_shard_process":  # the writer process's own peak memory, apart from the shard process's
                assert in_shard["writer_peak_rss_mib"] > 0
            else:
                assert in_shard["writer_peak_rss_mib"] is None  # no child process
    e2e = report["end_to_end"]
    assert e2e["engine_only"]["tickets"] == 150 and e2e["pipeline"]["backlog"] <= 150
    assert e2e["pipeline"]["succeeded"] == e2e["engine_only"]["texts"] > 0
    assert e2e["fraction"] > 0
    (shard,) = report["memory"]["shards"]
    assert shard["tickets"] == 200 and shard["staged"] > 0
    assert set(shard["peak_rss_mib"]) == {"plan_run", "infer_shard", "load_results", "finish_run"}
    assert min(shard["peak_rss_mib"].values()) > 0
    (huge,) = report["memory"]["huge"]
    assert huge["tickets"] == 2 and huge["ticket_bytes"] == 100000 and huge["staged"] == 2


def test_bench_overhead_prints_one_json_line_with_throughput_and_memory_per_step(pg_admin_url):
    # the shards with their writer processes (the GPU check's `overhead-p2-writer-process`; --part load covers
    # the thread): the whole run, retry branch included, comes out complete
    args = ("--part", "overhead", "--tickets", "600", "--fail-every", "50", "--pg-url", pg_admin_url)
    proc = bench(*args, env={"INFERENCE_WRITER": "process"})
    (line,) = proc.stdout.strip().splitlines()
    report = json.loads(line)
    assert report["tickets"] == 600 and report["tickets_per_s"] > 0 and report["writer"] == "process"
    assert 0 < report["machine_cpu_seconds"] and report["cpu_us_per_ticket"] > 0  # Linux: /proc/stat
    assert report["run"]["status"] == "succeeded" and report["run"]["failed"] == 0
    assert report["run"]["succeeded"] + report["run"]["skipped"] == report["run"]["backlog"] == 600
    steps = report["steps"]
    assert {"plan_run", "infer_shard", "load_results", "has_retries", "retry_failed", "finish_run"} <= set(steps)
    assert steps["infer_shard"]["processes"] == 4
    assert all(s["peak_rss_mib"] > 0 and s["seconds"] > 0 for s in steps.values())
