#!/usr/bin/env bash
# make test-e2e: brings up the single-node cluster (hack/e2e/cluster.sh), runs the end-to-end
# test against it (go test -tags e2e ./hack/e2e/) and tears the cluster down on exit, whether the
# test passed, failed or was interrupted. Needs root.
#
# The components' logs (and every Pod's, as the test read them) are kept in E2E_ARTIFACTS (a new
# directory under /tmp by default) when the run fails; E2E_KEEP=1 leaves the cluster running
# (hack/e2e/cluster.sh down stops it).
set -euo pipefail
cd "$(dirname "$0")/../.."

log() { echo "e2e: $*" >&2; }
artifacts="${E2E_ARTIFACTS:-$(mktemp -d /tmp/codeport-e2e.XXXXXX)}"
run_dir="${E2E_RUN_DIR:-/run/codeport-e2e}"
mkdir -p "${artifacts}/pods"
status=1

finish() {
  if [[ -d "${run_dir}/logs" ]]; then
    cp -r "${run_dir}/logs" "${artifacts}/components" 2>/dev/null || true
  fi
  if [[ "${E2E_KEEP:-}" == 1 ]]; then
    log "cluster left running (E2E_KEEP=1): export KUBECONFIG=${run_dir}/admin.kubeconfig"
  else
    hack/e2e/cluster.sh down
  fi
  if [[ "${status}" == 0 ]]; then
    rm -rf "${artifacts}"
  else
    log "failed; logs in ${artifacts}"
  fi
}
trap finish EXIT

start=${SECONDS}
helm="$(hack/helm.sh)"
exports="$(hack/e2e/cluster.sh up)"
eval "${exports}"
log "cluster up in $((SECONDS - start))s (binaries and images included)"

HELM="${helm}" E2E_LOG_DIR="${artifacts}/pods" \
  go test -tags e2e -count=1 -timeout 45m -v -run "${E2E_RUN:-.}" ./hack/e2e/
status=0
log "passed in $((SECONDS - start))s"
