"""Summary shares of what runs (the pipeline's predictor) on unlabelled or synthetic sets (issue 14).

    .venv/bin/python -m inference --db sqlite:////tmp/demo.db seed --tickets 2000      # the demo data
    .venv/bin/python benchmarks/summary_shares.py --db /tmp/demo.db [--threads-jsonl /tmp/eval_thread.jsonl]

- `demo`: every non-empty ticket of the seeded demo table;
- `eval+thread`: every held-out eval ticket with a signature, a disclaimer and a quoted earlier message of
  another category appended in one of four mail-client formats (benchmarks/summary_quality.py `thread_set`);
  the quote's start is known, so `quoted_first` is exact. `--threads-jsonl` also writes that set with its
  labels, for `python -m inference eval --set /tmp/eval_thread.jsonl` (category accuracy on threads).

Settings come from the environment as for the pipeline (e.g. INFERENCE_GLOSS_UNREADABLE=false), on the CPU.
Labelled sets (eval, dev, bitext, BANKING77, the labelled demo) get the same shares from
`python -m inference eval --set ... --summaries` (inference.evaluate.summary_shares, the same function).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from summary_quality import thread_set  # noqa: E402
from ticket_sets import LABELS, load_sets  # noqa: E402

from inference.config import settings_from_env  # noqa: E402
from inference.predictor import load_predictor  # noqa: E402
from inference.summary_eval import summary_shares  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", default="/tmp/demo.db", help="the seeded demo SQLite file (default /tmp/demo.db)")
    parser.add_argument("--threads-jsonl", type=Path, help="also write eval+thread as labelled JSON Lines here")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args()

    predictor = load_predictor(settings_from_env(device="cpu", heads=("category", "summary")))
    report = {}
    if Path(args.db).is_file():
        with sqlite3.connect(args.db) as conn:
            rows = conn.execute("SELECT subject, body FROM tickets ORDER BY ticket_id").fetchall()
        report["demo"] = summary_shares(predictor, rows)
        print("demo", json.dumps(report["demo"]), flush=True)
    base = load_sets(["eval"])["eval"]
    threads = thread_set(base)
    report["eval+thread"] = summary_shares(
        predictor, list(zip(threads.subjects, threads.bodies, strict=True)), threads.tail_start
    )
    print("eval+thread", json.dumps(report["eval+thread"]), flush=True)
    if args.threads_jsonl:
        with args.threads_jsonl.open("w", encoding="utf-8") as w:
            for i, s, b, y, lang in zip(
                threads.ids, threads.subjects, threads.bodies, threads.labels, threads.langs, strict=True
            ):
                w.write(json.dumps({"id": i, "subject": s, "body": b, "label": LABELS[y], "lang": lang}) + "\n")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
