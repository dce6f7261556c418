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
STAGING_VERSION="v0.${K8S_VERSION#1.}"
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/codeport/envtest"
DEST="${CACHE_ROOT}/${K8S_VERSION}-etcd${ETCD_VERSION}"

log() { echo "envtest: $*" >&2; }

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

mkdir -p "${DEST}"
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
export GOFLAGS="-mod=mod"
export CGO_ENABLED=0

if [[ "${build_apiserver}" == true ]]; then
  log "building kube-apiserver v${K8S_VERSION} from source (takes a few minutes, once)"
  mkdir -p "${work}/apiserver"
  cd "${work}/apiserver"
  go mod init codeport.local/envtest-apiserver >/dev/null 2>&1
  go mod edit -require="k8s.io/kubernetes@v${K8S_VERSION}"
  go mod download -json "k8s.io/kubernetes@v${K8S_VERSION}" >/dev/null
  k8s_dir="$(go list -m -f '{{.Dir}}' "k8s.io/kubernetes@v${K8S_VERSION}" 2>/dev/null || true)"
  if [[ -z "${k8s_dir}" ]]; then
    k8s_dir="$(go env GOMODCACHE)/k8s.io/kubernetes@v${K8S_VERSION}"
  fi
  # k8s.io/kubernetes points its staging modules at ./staging; pin each to the published version.
  while read -r mod; do
    go mod edit -replace="${mod}=${mod}@${STAGING_VERSION}"
  done < <(grep -E '^\s*k8s.io/[a-z0-9-]+ => ./staging' "${k8s_dir}/go.mod" | awk '{print $1}')
  printf 'package main\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver/app"\n\nfunc main() {}\n' > tools.go
  go mod tidy >/dev/null 2>&1 || true
  k8s_minor="${K8S_VERSION#*.}"
  k8s_minor="${k8s_minor%%.*}"
  version_pkg="k8s.io/component-base/version"
  go build -trimpath -ldflags="-s -w -X ${version_pkg}.gitVersion=v${K8S_VERSION} \
    -X ${version_pkg}.gitMajor=${K8S_VERSION%%.*} -X ${version_pkg}.gitMinor=${k8s_minor} \
    -X ${version_pkg}.gitTreeState=clean" \
    -o "${DEST}/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
  mv "${DEST}/kube-apiserver.tmp" "${DEST}/kube-apiserver"
fi

if [[ ! -x "${DEST}/etcd" ]]; then
  log "building etcd v${ETCD_VERSION} from source (once)"
  mkdir -p "${work}/etcd"
  cd "${work}/etcd"
  go mod init codeport.local/envtest-etcd >/dev/null 2>&1
  cat > main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  go get "go.etcd.io/etcd/server/v3@v${ETCD_VERSION}" >/dev/null 2>&1
  go mod tidy >/dev/null 2>&1
  go build -trimpath -ldflags="-s -w" -o "${DEST}/etcd.tmp" .
  mv "${DEST}/etcd.tmp" "${DEST}/etcd"
fi

echo "${DEST}"
