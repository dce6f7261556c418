#!/usr/bin/env bash
# Builds the Go vulnerability database that govulncheck reads (its v1 layout) from the
# golang.org/x/vulndb module, and prints the database's directory:
#   govulncheck -db "file://$(hack/vulndb.sh)" ./...
# The machines and CI reach the Go module proxy but not the database's own site; the proxy
# serves golang.org/x/vulndb, whose data/osv holds every report as OSV JSON, and its cmd/indexdb
# writes those files out in the layout govulncheck reads. The newest version is built once and
# kept under ${XDG_CACHE_HOME:-$HOME/.cache}/codeport/vulndb/<version>; without the proxy, the
# newest database built before is used, and without one the script fails.
# Needs INDEXDB, the path of the indexdb binary (the Makefile installs it into ./bin).
set -euo pipefail

STATE="${XDG_CACHE_HOME:-$HOME/.cache}/codeport/vulndb"
MODULE=golang.org/x/vulndb
log() { echo "vulndb: $*" >&2; }

# The newest database built before, or nothing. Versions of the module sort by their dates.
newest_built() {
  local d newest=""
  for d in "${STATE}"/v*; do
    [[ -f "${d}/index/db.json" && "${d}" > "${newest}" ]] && newest="${d}"
  done
  echo "${newest}"
}

if ! version="$(go list -m -f '{{.Version}}' "${MODULE}@latest" 2>/dev/null)" || [[ -z "${version}" ]]; then
  built="$(newest_built)"
  if [[ -z "${built}" ]]; then
    log "cannot resolve ${MODULE}@latest through the module proxy, and no database was built before"
    exit 1
  fi
  log "cannot resolve ${MODULE}@latest through the module proxy; using the last database built, $(basename "${built}")"
  echo "${built}"
  exit 0
fi

DEST="${STATE}/${version}"
if [[ ! -f "${DEST}/index/db.json" ]]; then
  : "${INDEXDB:?INDEXDB must name the indexdb binary}"
  log "building the database of ${MODULE}@${version} (once)"
  src="$(go mod download -json "${MODULE}@${version}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  if [[ ! -d "${src}/data/osv" ]]; then
    log "${MODULE}@${version} has no data/osv"
    exit 1
  fi
  mkdir -p "${STATE}"
  tmp="$(mktemp -d "${STATE}/.build.XXXXXX")"
  trap 'rm -rf "${tmp}"' EXIT
  "${INDEXDB}" -vulns "${src}/data/osv" -out "${tmp}/db" >&2
  # Whole or not at all: a build cut short leaves nothing that looks like a database.
  rm -rf "${DEST}"
  mv "${tmp}/db" "${DEST}"
  # Older databases are of no further use.
  for old in "${STATE}"/v*; do
    [[ "${old}" == "${DEST}" ]] || rm -rf "${old}"
  done
fi
echo "${DEST}"
