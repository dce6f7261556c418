# shellcheck shell=bash
# Sourced by hack/envtest.sh and hack/e2e/kube.sh, which build Kubernetes commands from
# k8s.io/kubernetes (and etcd, CoreDNS) through the Go module proxy.

# build_workspace DEST: makes DEST, and ${work}, a scratch directory removed when the script
# exits; builds from then on resolve modules through the proxy (no vendor directory, no go.sum
# to trust yet) and link statically, so the binaries run on any node.
build_workspace() {
  mkdir -p "$1"
  work="$(mktemp -d)"
  trap 'rm -rf "${work}"' EXIT
  export GOFLAGS="-mod=mod"
  export CGO_ENABLED=0
}

# kube_module NAME VERSION: makes the current directory a Go module NAME that requires
# k8s.io/kubernetes@vVERSION. k8s.io/kubernetes points its staging modules (k8s.io/api,
# k8s.io/client-go, ...) at ./staging, which a module download lacks: each is pinned to its
# published version, v0.<minor>.<patch>.
kube_module() {
  local name="$1" version="$2" k8s_dir mod
  go mod init "${name}" >/dev/null 2>&1
  go mod edit -require="k8s.io/kubernetes@v${version}"
  go mod download -json "k8s.io/kubernetes@v${version}" >/dev/null
  k8s_dir="$(go list -m -f '{{.Dir}}' "k8s.io/kubernetes@v${version}" 2>/dev/null || true)"
  if [[ -z "${k8s_dir}" ]]; then
    k8s_dir="$(go env GOMODCACHE)/k8s.io/kubernetes@v${version}"
  fi
  while read -r mod; do
    go mod edit -replace="${mod}=${mod}@v0.${version#1.}"
  done < <(grep -E '^\s*k8s.io/[a-z0-9-]+ => ./staging' "${k8s_dir}/go.mod" | awk '{print $1}')
}

# kube_ldflags VERSION: the -ldflags that stamp the release version into a build. A plain go
# build reports v0.0.0-master, which kubectl and Helm's kubeVersion check refuse.
kube_ldflags() {
  local version="$1" minor pkg flags="-s -w"
  minor="${version#*.}"
  minor="${minor%%.*}"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X ${pkg}.gitVersion=v${version} -X ${pkg}.gitMajor=${version%%.*}"
    flags+=" -X ${pkg}.gitMinor=${minor} -X ${pkg}.gitTreeState=clean"
  done
  echo "${flags}"
}

# module_build NAME MODULE@VERSION PACKAGE OUT [LDFLAGS]: makes the current directory, whose Go
# file imports what PACKAGE needs, the Go module NAME requiring MODULE@VERSION, and builds PACKAGE
# stripped (plus LDFLAGS, such as the -X flags a project stamps its version with) into OUT. OUT
# is replaced only by a finished build, so an interrupted one leaves no binary that the cache
# check would take for complete. A package that imports internal ones cannot be imported from
# the Go file: import one of the module's other packages, to keep the requirement, and the build
# (-mod=mod) records the checksums of the rest.
module_build() {
  local name="$1" requirement="$2" pkg="$3" out="$4" ldflags="-s -w ${5:-}"
  go mod init "${name}" >/dev/null 2>&1
  go get "${requirement}" >/dev/null 2>&1
  go mod tidy >/dev/null 2>&1 || true
  go build -trimpath -ldflags="${ldflags% }" -o "${out}.tmp" "${pkg}"
  mv "${out}.tmp" "${out}"
}
