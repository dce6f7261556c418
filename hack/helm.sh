#!/usr/bin/env bash
# Builds helm from the Go module proxy (cached in ${XDG_CACHE_HOME:-$HOME/.cache}/codeport/tools)
# and prints the binary's path. Usage: HELM="$(hack/helm.sh)"
#
# It is built as helm's own release build is (its Makefile's LDFLAGS): stamped with its version
# and with the Kubernetes version of its client-go, which `helm template` and `helm lint` assume
# without --kube-version. A plain `go install` leaves helm at its fallback, Kubernetes v1.20, and
# every chart whose kubeVersion asks for more then fails to render.
set -euo pipefail
VERSION="${HELM_VERSION:-v3.22.0}"
TOOLS="${XDG_CACHE_HOME:-$HOME/.cache}/codeport/tools"
MODULE="helm.sh/helm/v3"

gomod="$(GOFLAGS=-mod=mod go mod download -json "${MODULE}@${VERSION}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
client_go="$(sed -n 's/^[[:space:]]*k8s\.io\/client-go v\([0-9]*\)\.\([0-9]*\)\..*/\1 \2/p' "${gomod}")"
[[ -n "${client_go}" ]] || { echo "helm.sh: no k8s.io/client-go in ${gomod}" >&2; exit 1; }
read -r client_major client_minor <<<"${client_go}"
# client-go v0.N.x is Kubernetes v1.N.x.
k8s_major=$((client_major + 1))
k8s_minor="${client_minor}"

DEST="${TOOLS}/helm-${VERSION}-k8s-${k8s_major}.${k8s_minor}"
if [[ ! -x "${DEST}/helm" ]]; then
  echo "helm: building ${VERSION} from source (once)" >&2
  mkdir -p "${DEST}"
  ldflags="-w -s -X ${MODULE}/internal/version.version=${VERSION} -X ${MODULE}/internal/version.metadata="
  ldflags+=" -X ${MODULE}/internal/version.gitTreeState=clean"
  for pkg in pkg/lint/rules pkg/chartutil; do
    ldflags+=" -X ${MODULE}/${pkg}.k8sVersionMajor=${k8s_major} -X ${MODULE}/${pkg}.k8sVersionMinor=${k8s_minor}"
  done
  GOBIN="${DEST}" GOFLAGS=-mod=mod CGO_ENABLED=0 go install -ldflags "${ldflags}" "${MODULE}/cmd/helm@${VERSION}" >&2
fi
echo "${DEST}/helm"
