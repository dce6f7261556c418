#!/usr/bin/env bash
# Builds the control-plane binaries envtest needs (kube-apiserver, etcd) from source through the
# Go module proxy and prints the directory holding them. Prebuilt envtest archives can't be
# downloaded in every environment this project targets; the module proxy always can be.
#
# The result is cached in ${XDG_CACHE_HOME:-$HOME/.cache}/codeport/envtest/<version>, so a second
# run returns at once. Usage: export KUBEBUILDER_ASSETS="$(hack/envtest.sh)"
set -euo pipefail

K8S_VERSION="${ENVTEST_K8S_VERSION:-1.36.3}"
ETCD_VERSION="${ENVTEST_ETCD_VERSION:-3.6.8}"
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/codeport/envtest"
DEST="${CACHE_ROOT}/${K8S_VERSION}-etcd${ETCD_VERSION}"

log() { echo "envtest: $*" >&2; }
# shellcheck source=hack/kube-module.sh
source "$(dirname "$0")/kube-module.sh"

# The chart's kubeVersion is checked against the version the API server reports, so the binary
# carries its release version (a plain go build reports v0.0.0-master). One built before that is
# built again, and replaced only once the new one is ready.
build_apiserver=false
if [[ ! -x "${DEST}/kube-apiserver" ]] ||
  [[ "$("${DEST}/kube-apiserver" --version 2>/dev/null)" != "Kubernetes v${K8S_VERSION}" ]]; then
  build_apiserver=true
fi

if [[ "${build_apiserver}" == false && -x "${DEST}/etcd" ]]; then
  echo "${DEST}"
  exit 0
fi

build_workspace "${DEST}"

if [[ "${build_apiserver}" == true ]]; then
  log "building kube-apiserver v${K8S_VERSION} from source (takes a few minutes, once)"
  mkdir -p "${work}/apiserver"
  cd "${work}/apiserver"
  kube_module codeport.local/envtest-apiserver "${K8S_VERSION}"
  printf 'package main\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver/app"\n\nfunc main() {}\n' > tools.go
  go mod tidy >/dev/null 2>&1 || true
  go build -trimpath -ldflags="$(kube_ldflags "${K8S_VERSION}")" \
    -o "${DEST}/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
  mv "${DEST}/kube-apiserver.tmp" "${DEST}/kube-apiserver"
fi

if [[ ! -x "${DEST}/etcd" ]]; then
  log "building etcd v${ETCD_VERSION} from source (once)"
  mkdir -p "${work}/etcd"
  cd "${work}/etcd"
  cat > main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  module_build codeport.local/envtest-etcd "go.etcd.io/etcd/server/v3@v${ETCD_VERSION}" . "${DEST}/etcd"
fi

echo "${DEST}"
