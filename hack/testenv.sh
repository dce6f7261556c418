#!/usr/bin/env bash
# Finds or starts the PostgreSQL and Redis servers the tests use and prints shell exports:
#   eval "$(hack/testenv.sh)"
# Order of preference: TEST_DATABASE_URL / TEST_REDIS_URL when set; a server already listening on
# 127.0.0.1:5432 / 6379 that accepts us; else a throwaway server started from the installed
# binaries under ${XDG_CACHE_HOME:-$HOME/.cache}/codeport/testenv (reused by later runs).
# TESTENV_REUSE=0 skips the running servers and always starts the throwaway ones (hack/fresh
# checks that a fresh machine finds the binaries it starts them from).
# PostgreSQL refuses to run as root, so as root the throwaway server runs as user "postgres".
set -euo pipefail

STATE="${XDG_CACHE_HOME:-$HOME/.cache}/codeport/testenv"
PG_PORT="${CODEPORT_TEST_PG_PORT:-55432}"
REDIS_PORT="${CODEPORT_TEST_REDIS_PORT:-56379}"
log() { echo "testenv: $*" >&2; }

pg_ok() { psql "$1" -Atqc 'select 1' >/dev/null 2>&1; }

pg_bindir() {
  if command -v pg_config >/dev/null 2>&1 && [[ -x "$(pg_config --bindir)/initdb" ]]; then
    pg_config --bindir; return
  fi
  local d
  # An unmatched glob stays literal and fails the initdb check below.
  d="$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n1)"
  [[ -n "$d" && -x "$d/initdb" ]] && { echo "$d"; return; }
  return 1
}

start_postgres() {
  local bindir data run_as=()
  bindir="$(pg_bindir)" || { log "PostgreSQL server binaries not found (apt-get install postgresql)"; exit 1; }
  data="${STATE}/pg-data"
  mkdir -p "${STATE}"
  if [[ "$(id -u)" == 0 ]]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir "${STATE}" --shell /bin/sh postgres
    run_as=(runuser -u postgres --)
    # The data directory must be reachable by the unprivileged user.
    chmod 755 "${STATE}"
    local p="${STATE}"; while [[ "$p" != "/" ]]; do chmod o+x "$p" 2>/dev/null || true; p="$(dirname "$p")"; done
  fi
  if [[ ! -f "${data}/PG_VERSION" ]]; then
    mkdir -p "${data}"
    [[ ${#run_as[@]} -gt 0 ]] && chown postgres "${data}"
    "${run_as[@]}" "${bindir}/initdb" -D "${data}" -U postgres --auth=trust -E UTF8 --no-instructions >/dev/null
  fi
  if ! "${run_as[@]}" "${bindir}/pg_ctl" -D "${data}" status >/dev/null 2>&1; then
    log "starting PostgreSQL on 127.0.0.1:${PG_PORT}"
    "${run_as[@]}" "${bindir}/pg_ctl" -D "${data}" -l "${data}/server.log" -w -t 60 \
      -o "-h 127.0.0.1 -p ${PG_PORT} -k /tmp -c max_connections=300 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
      start >/dev/null
  fi
}

reuse="${TESTENV_REUSE:-1}"
if [[ -z "${TEST_DATABASE_URL:-}" && "${reuse}" != 0 ]]; then
  for candidate in \
    "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable" \
    "postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable" \
    "postgres://postgres@127.0.0.1:${PG_PORT}/postgres?sslmode=disable"; do
    if pg_ok "${candidate}"; then TEST_DATABASE_URL="${candidate}"; break; fi
  done
fi
if [[ -z "${TEST_DATABASE_URL:-}" ]]; then
  start_postgres
  TEST_DATABASE_URL="postgres://postgres@127.0.0.1:${PG_PORT}/postgres?sslmode=disable"
  pg_ok "${TEST_DATABASE_URL}" || { log "PostgreSQL did not come up; see ${STATE}/pg-data/server.log"; exit 1; }
fi

redis_ok() { redis-cli -u "$1" ping 2>/dev/null | grep -q PONG; }
if [[ -z "${TEST_REDIS_URL:-}" && "${reuse}" != 0 ]]; then
  command -v redis-cli >/dev/null 2>&1 || { log "redis-cli not found (apt-get install redis-server)"; exit 1; }
  for candidate in "redis://127.0.0.1:6379/0" "redis://127.0.0.1:${REDIS_PORT}/0"; do
    if redis_ok "${candidate}"; then TEST_REDIS_URL="${candidate}"; break; fi
  done
fi
if [[ -z "${TEST_REDIS_URL:-}" ]]; then
  command -v redis-server >/dev/null 2>&1 || { log "redis-server not found (apt-get install redis-server)"; exit 1; }
  mkdir -p "${STATE}/redis"
  log "starting Redis on 127.0.0.1:${REDIS_PORT}"
  redis-server --bind 127.0.0.1 --port "${REDIS_PORT}" --daemonize yes --save '' --appendonly no \
    --dir "${STATE}/redis" --logfile "${STATE}/redis/redis.log" --pidfile "${STATE}/redis/redis.pid" >/dev/null
  TEST_REDIS_URL="redis://127.0.0.1:${REDIS_PORT}/0"
  for _ in $(seq 1 50); do redis_ok "${TEST_REDIS_URL}" && break; sleep 0.1; done
  redis_ok "${TEST_REDIS_URL}" || { log "Redis did not come up; see ${STATE}/redis/redis.log"; exit 1; }
fi

printf 'export TEST_DATABASE_URL=%q\nexport TEST_REDIS_URL=%q\n' "${TEST_DATABASE_URL}" "${TEST_REDIS_URL}"
