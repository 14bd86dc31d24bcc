#!/usr/bin/env bash
# A local Airflow for this repo: `airflow standalone` (scheduler, dag-processor, triggerer, API server and UI
# on :8080) with dags/ and plugins/, the pool `gpu`, the tickets DB connection, and a known login.
#
# It writes the environment it runs with to $AIRFLOW_HOME/env.sh: `source .data/airflow/env.sh` in another
# shell makes the README's `airflow ...` commands (backfill create, dags list, ...) talk to this Airflow.
# Ctrl-C or SIGTERM stops everything it started (standalone's components and their task processes).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
AIRFLOW=$ROOT/.venv/bin/airflow
export AIRFLOW_HOME="${AIRFLOW_LOCAL_HOME:-$ROOT/.data/airflow}"
mkdir -p "$AIRFLOW_HOME"
export AIRFLOW__CORE__DAGS_FOLDER="$ROOT/dags"
export AIRFLOW__CORE__PLUGINS_FOLDER="$ROOT/plugins"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="${AIRFLOW_USER:-admin}:admin"
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE="$AIRFLOW_HOME/passwords.json"
export AIRFLOW__API__PORT="${AIRFLOW_PORT:-8080}"
export AIRFLOW__API__BASE_URL="http://localhost:${AIRFLOW__API__PORT}"
export AIRFLOW__CORE__EXECUTION_API_SERVER_URL="http://localhost:${AIRFLOW__API__PORT}/execution/"
TICKETS_FILE="${TICKETS_LOCAL_FILE:-$ROOT/.data/tickets.db}"
# The tickets DB: TICKETS_DB_URL when set (e.g. PostgreSQL), else the demo's SQLite file.
export AIRFLOW_CONN_TICKETS_DB="${AIRFLOW_CONN_TICKETS_DB:-$("$ROOT/.venv/bin/python" -c '
import json, os, sys
url = os.environ.get("TICKETS_DB_URL") or "sqlite:///" + sys.argv[1]
print(json.dumps({"conn_type": "generic", "extra": {"sqlalchemy_url": url}}))' "$TICKETS_FILE")}"
export TOKENIZERS_PARALLELISM=false
export PATH="$ROOT/.venv/bin:$PATH"  # standalone starts its components as `airflow ...`

# What another shell needs to use this Airflow from the command line.
{
  echo "# source this file to run airflow CLI commands against \`make airflow\` (written by scripts/airflow-local.sh)"
  for name in AIRFLOW_HOME AIRFLOW__CORE__DAGS_FOLDER AIRFLOW__CORE__PLUGINS_FOLDER AIRFLOW__CORE__LOAD_EXAMPLES \
      AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE AIRFLOW__API__PORT \
      AIRFLOW__API__BASE_URL AIRFLOW__CORE__EXECUTION_API_SERVER_URL AIRFLOW_CONN_TICKETS_DB TOKENIZERS_PARALLELISM; do
    printf 'export %s=%q\n' "$name" "${!name}"
  done
  printf 'export PATH=%q:"$PATH"\n' "$ROOT/.venv/bin"
} > "$AIRFLOW_HOME/env.sh"
chmod 600 "$AIRFLOW_HOME/env.sh"  # it holds the tickets DB connection

if [ ! -f "$AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE" ]; then
  password=$("$ROOT/.venv/bin/python" -c 'import secrets; print(secrets.token_urlsafe(12))')
  printf '{"%s": "%s"}\n' "${AIRFLOW_USER:-admin}" "$password" > "$AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"
fi
"$AIRFLOW" db migrate > "$AIRFLOW_HOME/migrate.log" 2>&1 || { tail -20 "$AIRFLOW_HOME/migrate.log"; exit 1; }
"$AIRFLOW" pools set "${INFERENCE_GPU_POOL:-gpu}" "${GPU_POOL_SLOTS:-1}" "GPU slots for model tasks" > /dev/null
[ -f "$TICKETS_FILE" ] || [ -n "${TICKETS_DB_URL:-}" ] \
  || "$ROOT/.venv/bin/python" -m inference --db "sqlite:///$TICKETS_FILE" seed --tickets 2000 > /dev/null

echo "Airflow UI: http://localhost:${AIRFLOW__API__PORT}"
echo "login: $("$ROOT/.venv/bin/python" -c 'import json,sys; u,p=next(iter(json.load(open(sys.argv[1])).items())); print(f"{u} / {p}")' "$AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE")"
echo "CLI in another shell: source ${AIRFLOW_HOME}/env.sh   (then e.g. airflow dags list, airflow backfill create ...)"
echo "(DAG ticket_batch_inference; stop with Ctrl-C)"

# standalone in a session of its own: on Ctrl-C / SIGTERM the whole session is stopped (TERM, then KILL after a
# grace period), and any process still running with this AIRFLOW_HOME (task processes that made their own
# process groups) after it.
setsid "$AIRFLOW" standalone &
STANDALONE=$!

ours() {  # airflow processes whose environment has this AIRFLOW_HOME (not this script, not a user's shell)
  local env_file pid
  for env_file in /proc/[0-9]*/environ; do
    pid=${env_file#/proc/}; pid=${pid%/environ}
    [ "$pid" = "$$" ] && continue
    tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q airflow || continue
    if tr '\0' '\n' < "$env_file" 2>/dev/null | grep -qxF "AIRFLOW_HOME=$AIRFLOW_HOME"; then echo "$pid"; fi
  done
}

stop() {
  trap - INT TERM HUP EXIT
  echo "stopping Airflow (standalone and everything it started) ..."
  kill -TERM -- "-$STANDALONE" 2>/dev/null || true
  for _ in $(seq 1 30); do
    kill -0 -- "-$STANDALONE" 2>/dev/null || break
    sleep 1
  done
  kill -KILL -- "-$STANDALONE" 2>/dev/null || true
  local left
  left=$(ours)
  if [ -n "$left" ]; then
    kill -TERM $left 2>/dev/null || true
    sleep 3
    left=$(ours)
    [ -z "$left" ] || kill -KILL $left 2>/dev/null || true
  fi
  wait "$STANDALONE" 2>/dev/null || true
  echo "stopped"
  exit 0
}
trap stop INT TERM HUP EXIT
wait "$STANDALONE" || true
stop
