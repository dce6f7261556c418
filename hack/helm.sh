#!/usr/bin/env bash
# Builds helm from the Go module proxy (cached in ${XDG_CACHE_HOME:-$HOME/.cache}/codeport/tools)
# and prints the binary's path. Usage: HELM="$(hack/helm.sh)"
set -euo pipefail
VERSION="${HELM_VERSION:-v3.22.0}"
DEST="${XDG_CACHE_HOME:-$HOME/.cache}/codeport/tools/helm-${VERSION}"
if [[ ! -x "${DEST}/helm" ]]; then
  echo "helm: building ${VERSION} from source (once)" >&2
  mkdir -p "${DEST}"
  GOBIN="${DEST}" GOFLAGS=-mod=mod CGO_ENABLED=0 go install "helm.sh/helm/v3/cmd/helm@${VERSION}" >&2
fi
echo "${DEST}/helm"
