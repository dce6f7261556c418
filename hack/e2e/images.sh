#!/usr/bin/env bash
# Builds the end-to-end cluster's images without a registry or a container daemon
# (hack/e2e/image, go-containerregistry): pause and CoreDNS once, codeport and netcheck (the
# NetworkPolicy test's client and listener, hack/e2e/netcheck) on every run from the working
# tree, each a single layer on an empty base, as docker-archive tarballs that
# `ctr images import` loads. The codeport image carries what the Dockerfile's release image
# carries: the static binary built with the same flags, distroless static's nonroot base files,
# and the user, entrypoint and command read from the Dockerfile's final stage (hack/e2e/image's
# test checks the result against it). CloudNativePG's PostgreSQL image comes from
# hack/e2e/postgres-image.sh and its Pooler's from hack/e2e/pgbouncer-image.sh, built once from
# Debian's packages, and its operator and the object store of its backups from hack/e2e/cnpg.sh,
# built once per version from the Go module proxy.
#
# Usage: eval "$(hack/e2e/images.sh KUBE_DIR)", KUBE_DIR from hack/e2e/kube.sh (CoreDNS's binary).
# Prints hack/e2e/cnpg.sh's exports, then PAUSE_IMAGE, COREDNS_IMAGE, CODEPORT_IMAGE,
# NETCHECK_IMAGE, POSTGRES_IMAGE, PGBOUNCER_IMAGE and IMAGES_DIR (the tarballs), as exports.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
KUBE_DIR="$1"
DIR="${XDG_CACHE_HOME:-$HOME/.cache}/codeport/e2e/images"
PAUSE_IMAGE="registry.k8s.io/pause:codeport-e2e"
COREDNS_IMAGE="registry.k8s.io/coredns/coredns:codeport-e2e"
CODEPORT_IMAGE="${E2E_IMAGE:-ghcr.io/codeport/codeport:e2e}"
NETCHECK_IMAGE="codeport.local/e2e/netcheck:e2e"
log() { echo "e2e-images: $*" >&2; }

mkdir -p "${DIR}"
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
cd "${ROOT}"
export CGO_ENABLED=0
go build -o "${work}/image" ./hack/e2e/image

if [[ ! -f "${DIR}/pause.tar" ]]; then
  log "building ${PAUSE_IMAGE}"
  go build -trimpath -ldflags "-s -w" -o "${work}/pause" ./hack/e2e/pause
  "${work}/image" -tag "${PAUSE_IMAGE}" -file "${work}/pause=/pause" -entrypoint '["/pause"]' \
    -user 65535:65535 -o "${DIR}/pause.tar.tmp"
  mv "${DIR}/pause.tar.tmp" "${DIR}/pause.tar"
fi
if [[ ! -f "${DIR}/coredns.tar" ]]; then
  log "building ${COREDNS_IMAGE}"
  "${work}/image" -tag "${COREDNS_IMAGE}" -file "${KUBE_DIR}/coredns=/coredns" \
    -entrypoint '["/coredns"]' -o "${DIR}/coredns.tar.tmp"
  mv "${DIR}/coredns.tar.tmp" "${DIR}/coredns.tar"
fi
postgres="$("${ROOT}/hack/e2e/postgres-image.sh")"
eval "${postgres}"
pgbouncer="$("${ROOT}/hack/e2e/pgbouncer-image.sh")"
eval "${pgbouncer}"
# CloudNativePG's operator and the object store of its backups; their exports (CNPG_VERSION,
# CNPG_IMAGE, CNPG_MANIFEST, OBJECTSTORE_IMAGE) go out with this script's.
hack/e2e/cnpg.sh "${DIR}" "${work}/image"

log "building ${NETCHECK_IMAGE}"
go build -trimpath -ldflags "-s -w" -o "${work}/netcheck" ./hack/e2e/netcheck
"${work}/image" -tag "${NETCHECK_IMAGE}" -distroless -file "${work}/netcheck=/netcheck" \
  -entrypoint '["/netcheck"]' -user 65532:65532 -o "${DIR}/netcheck.tar.tmp"
mv "${DIR}/netcheck.tar.tmp" "${DIR}/netcheck.tar"

# As the Dockerfile's build stage builds it.
version="$(git describe --tags --always --dirty 2>/dev/null || echo dev)"
log "building ${CODEPORT_IMAGE} (${version})"
go build -trimpath -ldflags "-s -w -X main.version=${version}" -o "${work}/codeport" .
"${work}/image" -tag "${CODEPORT_IMAGE}" -dockerfile Dockerfile -binary "${work}/codeport" \
  -o "${DIR}/codeport.tar.tmp"
mv "${DIR}/codeport.tar.tmp" "${DIR}/codeport.tar"

printf 'export PAUSE_IMAGE=%q COREDNS_IMAGE=%q CODEPORT_IMAGE=%q NETCHECK_IMAGE=%q\n' \
  "${PAUSE_IMAGE}" "${COREDNS_IMAGE}" "${CODEPORT_IMAGE}" "${NETCHECK_IMAGE}"
printf 'export POSTGRES_IMAGE=%q PGBOUNCER_IMAGE=%q IMAGES_DIR=%q\n' "${POSTGRES_IMAGE}" "${PGBOUNCER_IMAGE}" \
  "${DIR}"
