#!/usr/bin/env bash
# Runs govulncheck over the module against the database of hack/vulndb.sh and judges its findings
# with hack/vulncheck. A scan reads the whole call graph (most of a minute on two CPUs) and its
# result depends only on the sources (tests aside: govulncheck leaves _test.go files out unless
# told -test), go.mod/go.sum, the Go toolchain, govulncheck and the database: the JSON of a scan
# is kept under ${XDG_CACHE_HOME:-$HOME/.cache}/codeport/vulncheck, named by a digest of all of
# those, and an identical tree (or one whose tests alone changed) reuses it (the judgement runs
# every time). VULNCHECK_FRESH=1 ignores the cache.
# Needs GOVULNCHECK and INDEXDB (the Makefile installs both into ./bin); STDLIB is passed to
# hack/vulncheck's -stdlib.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${GOVULNCHECK:?GOVULNCHECK must name the govulncheck binary}"

db="$(hack/vulndb.sh)"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/codeport/vulncheck"

# The sources as they are in the working tree, tracked or not (but not ignored), tests aside.
key="$({
  go env GOVERSION
  "${GOVULNCHECK}" -version 2>&1 | sed -n 's/^Scanner: //p'
  echo "${db}"
  git ls-files -z --cached --others --exclude-standard -- '*.go' ':!:*_test.go' go.mod go.sum |
    sort -z | xargs -0 sha256sum
} | sha256sum | cut -c1-32)"
result="${CACHE}/${key}.json"

if [[ "${VULNCHECK_FRESH:-0}" == 1 || ! -s "${result}" ]]; then
  mkdir -p "${CACHE}"
  # Old results are of trees that are gone; keep a week's.
  find "${CACHE}" -name '*.json' -mtime +7 -delete 2>/dev/null || true
  tmp="$(mktemp "${CACHE}/.scan.XXXXXX")"
  trap 'rm -f "${tmp}"' EXIT
  "${GOVULNCHECK}" -db "file://${db}" -format json ./... >"${tmp}"
  mv "${tmp}" "${result}"
else
  echo "vulncheck: the scan of an identical tree, toolchain and database ($(basename "${db}")), kept in ${result}" >&2
fi
go run ./hack/vulncheck -stdlib "${STDLIB:-warn}" <"${result}"
