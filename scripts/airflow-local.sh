#!/usr/bin/env bash
# A local Airflow for this repo: `airflow standalone` (scheduler, dag-processor, triggerer, API server and UI
# on :8080) with dags/ and plugins/, the pool `gpu`, the tickets DB connection, and a known login.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
AIRFLOW=$ROOT/.venv/bin/airflow
mkdir -p "$ROOT/.data/airflow"
export AIRFLOW_HOME="$ROOT/.data/airflow"
export AIRFLOW__CORE__DAGS_FOLDER="$ROOT/dags"
export AIRFLOW__CORE__PLUGINS_FOLDER="$ROOT/plugins"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="${AIRFLOW_USER:-admin}:admin"
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE="$AIRFLOW_HOME/passwords.json"
export AIRFLOW__API__PORT="${AIRFLOW_PORT:-8080}"
# The tickets DB: TICKETS_DB_URL when set (e.g. PostgreSQL), else the demo's SQLite file.
export AIRFLOW_CONN_TICKETS_DB="${AIRFLOW_CONN_TICKETS_DB:-$("$ROOT/.venv/bin/python" -c '
import json, os, sys
url = os.environ.get("TICKETS_DB_URL") or "sqlite:///" + sys.argv[1]
print(json.dumps({"conn_type": "generic", "extra": {"sqlalchemy_url": url}}))' "$ROOT/.data/tickets.db")}"
export TOKENIZERS_PARALLELISM=false
export PATH="$ROOT/.venv/bin:$PATH"  # standalone starts its components as `airflow ...`

if [ ! -f "$AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE" ]; then
  password=$("$ROOT/.venv/bin/python" -c 'import secrets; print(secrets.token_urlsafe(12))')
  printf '{"%s": "%s"}\n' "${AIRFLOW_USER:-admin}" "$password" > "$AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"
fi
"$AIRFLOW" db migrate > "$AIRFLOW_HOME/migrate.log" 2>&1 || { tail -20 "$AIRFLOW_HOME/migrate.log"; exit 1; }
"$AIRFLOW" pools set "${INFERENCE_GPU_POOL:-gpu}" "${GPU_POOL_SLOTS:-1}" "GPU slots for model tasks" > /dev/null
[ -f "$ROOT/.data/tickets.db" ] || "$ROOT/.venv/bin/python" -m inference --db "sqlite:///$ROOT/.data/tickets.db" seed --tickets 2000 > /dev/null

echo "Airflow UI: http://localhost:${AIRFLOW__API__PORT}"
echo "login: $("$ROOT/.venv/bin/python" -c 'import json,sys; u,p=next(iter(json.load(open(sys.argv[1])).items())); print(f"{u} / {p}")' "$AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE")"
echo "(DAG ticket_batch_inference; stop with Ctrl-C)"
exec "$AIRFLOW" standalone
