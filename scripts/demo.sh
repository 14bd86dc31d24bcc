#!/usr/bin/env bash
# The demo: a synthetic backlog in the embedded SQLite default, one real DAG run with `airflow dags test`
# for the last complete nightly window, and the run's summary. Safe to run again (nothing is redone).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PY:-$ROOT/.venv/bin/python}
AIRFLOW=$(dirname "$PY")/airflow
TICKETS=${DEMO_TICKETS:-2000}

mkdir -p "$ROOT/.data"
export AIRFLOW_HOME="$ROOT/.data/airflow"
export AIRFLOW__CORE__DAGS_FOLDER="$ROOT/dags"
export AIRFLOW__CORE__PLUGINS_FOLDER="$ROOT/plugins"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export TICKETS_DB_URL="${TICKETS_DB_URL:-sqlite:///$ROOT/.data/tickets.db}"
export TOKENIZERS_PARALLELISM=false

# The last complete window [D 02:00, D+1 02:00) UTC; the DAG run at its end processes exactly it.
read -r DAY END < <("$PY" -c '
import datetime as dt
from inference.window import last_complete_window
w = last_complete_window(dt.datetime.now(dt.UTC))
print(w.start.date(), w.end.isoformat())')

echo "== Airflow metadata DB ($AIRFLOW_HOME) and pool gpu"
"$AIRFLOW" db migrate > "$ROOT/.data/airflow-migrate.log" 2>&1 || { tail -20 "$ROOT/.data/airflow-migrate.log"; exit 1; }
"$AIRFLOW" pools set gpu 1 "GPU slots for model tasks" > /dev/null

echo "== Seeding $TICKETS synthetic tickets into the window of $DAY"
"$PY" -m inference seed --tickets "$TICKETS" --date "$DAY"

echo "== airflow dags test ticket_batch_inference $END  (log: .data/demo-dag-test.log)"
started=$(date +%s.%N)
if ! "$AIRFLOW" dags test ticket_batch_inference "$END" > "$ROOT/.data/demo-dag-test.log" 2>&1; then
  grep -E "ERROR|Error|error:" "$ROOT/.data/demo-dag-test.log" | tail -20
  echo "the DAG run failed: see .data/demo-dag-test.log"; exit 1
fi
elapsed=$("$PY" -c "import time; print(round(time.time() - $started, 1))")

echo "== Summary"
"$PY" - "$elapsed" <<'PYEOF'
import json, subprocess, sys
report = json.loads(subprocess.run([sys.executable, "-m", "inference", "status", "--json", "--limit", "1"],
                                   check=True, capture_output=True, text=True).stdout)
run = report["runs"][0]
total = run["succeeded"] + run["failed"] + run["skipped"]
print(f"run {run['run_id']}: {run['status']}")
print(f"backlog {run['backlog']} = succeeded {run['succeeded']} + failed {run['failed']} + skipped {run['skipped']}"
      f" ({'adds up' if total == run['backlog'] else 'DOES NOT ADD UP'})")
print(f"results stored: {report['results']}; DAG run wall time {sys.argv[1]} s"
      f" ({run['backlog'] / float(sys.argv[1]):.1f} tickets/s including Airflow and model start-up)")
sys.exit(0 if run["status"] == "succeeded" and total == run["backlog"] else 1)
PYEOF

echo "== A few results (synthetic tickets; the task logs above carry IDs and counts only)"
"$PY" - <<'PYEOF'
import os, sqlalchemy as sa
from inference.store.db import make_engine
from inference.store.schema import ticket_results
engine = make_engine(os.environ["TICKETS_DB_URL"])
r = ticket_results.c
with engine.connect() as conn:
    rows = conn.execute(sa.select(r.ticket_id, r.category, r.category_confidence, r.category_uncertain, r.summary)
                        .order_by(r.ticket_id).limit(5)).all()
for row in rows:
    flag = " (uncertain)" if row.category_uncertain else ""
    summary = (row.summary or "")[:110] + ("..." if row.summary and len(row.summary) > 110 else "")
    print(f"ticket {row.ticket_id}: {row.category} {row.category_confidence:.2f}{flag} | {summary}")
engine.dispose()
PYEOF
