"""A new output is one module: the toy head in tests/support/toy_head.py runs through the whole pipeline
(stand-in encoder, SQLite) in a fresh interpreter that loads it through INFERENCE_HEAD_MODULES."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import datetime as dt, json, sys
import sqlalchemy as sa
from inference.config import Settings
from inference.engine.standin import StandInEncoder
from inference.modelinfo import model_version
from inference.pipeline import run_window
from inference.predictor import build_predictor
from inference.store.db import make_engine, writing
from inference.store.schema import create_schema, ticket_results, tickets
from inference.textprep import max_chars_for, model_input
from inference.window import window_for_date

url, window = sys.argv[1], window_for_date(dt.date(2026, 11, 30))
engine = make_engine(url)
create_schema(engine, with_demo_source=True)
at = window.start + dt.timedelta(hours=1)
texts = {1: ("Refund", "Please refund me."), 2: ("Login", "I cannot log in to my account at all."), 3: (None, "Hi")}
with writing(engine) as conn:
    conn.execute(sa.insert(tickets), [
        dict(ticket_id=k, subject=s, body=b, created_at=at, updated_at=at) for k, (s, b) in texts.items()])
base = Settings(db_url=url, device="cpu", cache_dir="", heads=("embedding",))
toy = base.replace(heads=("embedding", "text_length"))
summary = run_window(toy, "toy-1", window, predictor=build_predictor(toy, StandInEncoder()))
with engine.connect() as conn:
    stored = {r.ticket_id: r.text_chars for r in conn.execute(sa.select(ticket_results))}
expected = {str(k): len(model_input(s, b, max_chars_for(256))[0]) for k, (s, b) in texts.items()}
print(json.dumps({"summary": summary, "stored": stored, "expected": expected,
                  "versions_differ": model_version(toy) != model_version(base)}))
"""


def test_a_head_module_outside_the_package_adds_its_output_end_to_end(tmp_path):
    env = {**os.environ, "INFERENCE_HEAD_MODULES": "tests.support.toy_head", "PYTHONPATH": str(ROOT)}
    url = f"sqlite:///{tmp_path / 'toy.db'}"
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, url], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["summary"]["succeeded"] == 3
    assert out["stored"] == out["expected"]
    assert out["versions_differ"], "the head's fingerprint is part of the model version"


def test_without_the_module_the_head_is_unknown(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "INFERENCE_HEAD_MODULES"}
    code = "from inference.config import Settings; Settings(heads=('embedding', 'text_length'))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert proc.returncode != 0 and "text_length" in proc.stderr
