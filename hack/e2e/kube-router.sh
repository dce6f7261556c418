#!/usr/bin/env bash
# Builds the end-to-end node's NetworkPolicy engine, kube-router's network policy controller
# (github.com/cloudnativelabs/kube-router/v2, cmd/kube-router), from source through the Go module
# proxy, and prints the binary's path. The bridge CNI plugin enforces no NetworkPolicy; kube-router
# run with --run-firewall alone (no router, no service proxy) does, in iptables and ipsets, beside
# it. hack/e2e/cluster.sh runs it on the node as a host process.
#
# Built as its Makefile builds it (CGO_ENABLED=0, pkg/version.Version and BuildDate stamped; here
# the tag and the commit's day), once per version, in
# ${XDG_CACHE_HOME:-$HOME/.cache}/codeport/e2e/kube-router-<version>/kube-router.
set -euo pipefail

VERSION="${E2E_KUBE_ROUTER_VERSION:-2.1.0}"
DEST="${XDG_CACHE_HOME:-$HOME/.cache}/codeport/e2e/kube-router-${VERSION}"
BIN="${DEST}/kube-router"
MODULE="github.com/cloudnativelabs/kube-router/v2"
log() { echo "e2e-kube-router: $*" >&2; }
# shellcheck source=hack/kube-module.sh
source "$(dirname "$0")/../kube-module.sh"

if [[ -x "${BIN}" ]]; then
  echo "${BIN}"
  exit 0
fi

build_workspace "${DEST}"
log "building kube-router v${VERSION} from source (once)"
mkdir -p "${work}/origin" "${work}/kube-router"
date="$(cd "${work}/origin" && go mod download "${MODULE}@v${VERSION}" &&
  go list -m -f '{{.Time.Format "2006-01-02"}}' "${MODULE}@v${VERSION}")"
cd "${work}/kube-router"
# cmd/kube-router is a main package: the Go file imports the command's own package instead.
printf 'package main\n\nimport _ "%s/pkg/cmd"\n\nfunc main() {}\n' "${MODULE}" >tools.go
stamp="${MODULE}/pkg/version"
module_build codeport.local/e2e-kube-router "${MODULE}@v${VERSION}" "${MODULE}/cmd/kube-router" "${BIN}" \
  "-X ${stamp}.Version=v${VERSION} -X ${stamp}.BuildDate=${date}"
echo "${BIN}"
