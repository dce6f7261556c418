#!/usr/bin/env bash
# Builds the node and control-plane binaries of the end-to-end cluster (kubelet, kube-apiserver,
# kube-controller-manager, kube-scheduler, kube-proxy, kubectl) and CoreDNS from source through
# the Go module proxy, and prints the directory holding them. No release archive or registry is
# reachable from every machine this project targets; the module proxy is. etcd comes from
# hack/envtest.sh, which builds the same version.
#
# Cached in ${XDG_CACHE_HOME:-$HOME/.cache}/codeport/e2e/kube-<version>-coredns<version>, so a
# second run returns at once. One go build of all six shares the compile of k8s.io/kubernetes.
set -euo pipefail

K8S_VERSION="${E2E_K8S_VERSION:-1.36.3}"
COREDNS_VERSION="${E2E_COREDNS_VERSION:-1.14.7}"
DEST="${XDG_CACHE_HOME:-$HOME/.cache}/codeport/e2e/kube-${K8S_VERSION}-coredns${COREDNS_VERSION}"
COMMANDS=(kubelet kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubectl)

log() { echo "e2e-kube: $*" >&2; }
# shellcheck source=hack/kube-module.sh
source "$(dirname "$0")/../kube-module.sh"

complete=true
for c in "${COMMANDS[@]}" coredns; do
  [[ -x "${DEST}/${c}" ]] || complete=false
done
if [[ "${complete}" == true ]]; then
  echo "${DEST}"
  exit 0
fi

build_workspace "${DEST}"

missing_kube=false
for c in "${COMMANDS[@]}"; do
  [[ -x "${DEST}/${c}" ]] || missing_kube=true
done
if [[ "${missing_kube}" == true ]]; then
  log "building Kubernetes v${K8S_VERSION} from source (several minutes, once)"
  mkdir -p "${work}/kube"
  cd "${work}/kube"
  kube_module codeport.local/e2e-kube "${K8S_VERSION}"
  # kubectl's command lives in the k8s.io/kubectl staging module, the others under cmd/*/app.
  cat > tools.go <<'GO'
package main

import (
	_ "k8s.io/kubectl/pkg/cmd"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-proxy/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {}
GO
  go mod tidy >/dev/null 2>&1 || true
  pkgs=()
  for c in "${COMMANDS[@]}"; do
    pkgs+=("k8s.io/kubernetes/cmd/${c}")
  done
  mkdir -p "${work}/out"
  go build -trimpath -ldflags="$(kube_ldflags "${K8S_VERSION}")" -o "${work}/out/" "${pkgs[@]}"
  for c in "${COMMANDS[@]}"; do
    mv "${work}/out/${c}" "${DEST}/${c}"
  done
fi

if [[ ! -x "${DEST}/coredns" ]]; then
  log "building CoreDNS v${COREDNS_VERSION} from source (once)"
  mkdir -p "${work}/coredns"
  cd "${work}/coredns"
  printf 'package main\n\nimport _ "github.com/coredns/coredns/core/dnsserver"\n\nfunc main() {}\n' > tools.go
  module_build codeport.local/e2e-coredns "github.com/coredns/coredns@v${COREDNS_VERSION}" \
    github.com/coredns/coredns "${DEST}/coredns"
fi

echo "${DEST}"
