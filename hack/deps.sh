#!/usr/bin/env bash
# Makes sure the system packages the tests need are installed: the PostgreSQL server binaries and
# psql, pg_dump and pg_restore, redis-server, Chromium (the API reference page is checked in a
# real headless browser), shellcheck (make test checks the shell scripts), python3 and Node.js
# (the webhook signature snippets of docs/guide.md are run), npm (Spectral and Redocly lint the
# OpenAPI documents; the API reference renderer is fetched from npm), and curl and jq (the
# README's tour is run). As root on a machine with apt-get, missing packages are installed; otherwise the script
# stops with one line naming what to install.
set -euo pipefail

missing=()
have_pg_server() {
  if command -v pg_config >/dev/null 2>&1 && [[ -x "$(pg_config --bindir 2>/dev/null)/initdb" ]]; then
    return 0
  fi
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null
}
have_pg_server || missing+=(postgresql postgresql-contrib)
# The backup drill runs pg_dump and pg_restore, which must be as new as the server: the server's
# package brings the client of its own version, in its bindir, where the drill looks first.
have_pg_dump() {
  compgen -G '/usr/lib/postgresql/*/bin/pg_restore' >/dev/null || command -v pg_restore >/dev/null 2>&1
}
{ command -v psql >/dev/null 2>&1 && have_pg_dump; } || missing+=(postgresql-client)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v shellcheck >/dev/null 2>&1 || missing+=(shellcheck)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v jq >/dev/null 2>&1 || missing+=(jq)
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
  echo "deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  exit 0
fi
echo "deps: missing system packages; install them first: apt-get install ${missing[*]}" >&2
exit 1
