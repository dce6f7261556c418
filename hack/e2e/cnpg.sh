#!/usr/bin/env bash
# Builds what the end-to-end cluster needs to run CloudNativePG and to back its databases up,
# from the Go module proxy, as images in IMAGES_DIR (which hack/e2e/cluster.sh imports):
#
# - The operator: github.com/cloudnative-pg/cloudnative-pg's cmd/manager, built as its
#   .goreleaser.yml builds it (CGO_ENABLED=0, -s -w, the version, commit and date stamped into
#   pkg/versions), in an image laid out as its Dockerfile lays it: the binary at
#   /operator/manager_<arch>, /manager a link to it, WORKDIR / (the operator globs
#   operator/manager_* from there for the instance manager it hashes and upgrades, and its
#   bootstrap command copies "manager"), the licenses, distroless static nonroot, USER
#   65532:65532, ENTRYPOINT ["/manager"]. It is tagged with the release manifest's reference,
#   which the Deployment runs and OPERATOR_IMAGE_NAME names for the init container that copies
#   the instance manager into PostgreSQL Pods, so releases/cnpg-<version>.yaml applies as
#   released but for one line: its imagePullPolicy Always would make the kubelet pull from
#   ghcr.io, which this cluster cannot reach, so the copy in the cache says Never (a missing
#   import then fails as such, instead of running the upstream image where ghcr.io answers).
#   Apply it with kubectl apply --server-side: its Pooler CRD is too large for the annotation a
#   client-side apply keeps.
# - The object store its backups and WAL archives go to: versitygw's S3 gateway (posix
#   backend), built without cgo (only its RDMA and GPU transports need it), in a distroless
#   static nonroot image; hack/e2e/testdata/objectstore.yaml runs it.
#
# Usage: eval "$(hack/e2e/cnpg.sh IMAGES_DIR [IMAGE_TOOL])", IMAGE_TOOL a built hack/e2e/image
# (built here when not given). Prints CNPG_VERSION, CNPG_IMAGE, CNPG_MANIFEST and
# OBJECTSTORE_IMAGE as exports. Each image is built once per version, written as a .tmp and
# renamed when complete.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
IMAGES_DIR="$1"
IMAGE_TOOL="${2:-}"
CNPG_VERSION="${E2E_CNPG_VERSION:-1.28.0}"
VERSITYGW_VERSION="${E2E_VERSITYGW_VERSION:-1.8.0}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/codeport/e2e"
CNPG_MANIFEST="${CACHE}/cnpg-${CNPG_VERSION}.yaml"
CNPG_TAR="${IMAGES_DIR}/cnpg-operator-${CNPG_VERSION}.tar"
OBJECTSTORE_IMAGE="docker.io/versity/versitygw:v${VERSITYGW_VERSION}-codeport-e2e"
OBJECTSTORE_TAR="${IMAGES_DIR}/versitygw-${VERSITYGW_VERSION}.tar"
log() { echo "e2e-cnpg: $*" >&2; }
# shellcheck source=hack/kube-module.sh
source "$(dirname "$0")/../kube-module.sh"

# The operator's reference: the one the release manifest's Deployment (its only one) runs.
manifest_image() { awk '/^kind: Deployment$/ {d = 1} d && $1 == "image:" && NF == 2 {print $2; exit}' "$1"; }

print_exports() {
  printf 'export CNPG_VERSION=%q CNPG_IMAGE=%q CNPG_MANIFEST=%q OBJECTSTORE_IMAGE=%q\n' \
    "${CNPG_VERSION}" "$(manifest_image "${CNPG_MANIFEST}")" "${CNPG_MANIFEST}" \
    "${OBJECTSTORE_IMAGE}"
}

if [[ -f "${CNPG_MANIFEST}" && -f "${CNPG_TAR}" && -f "${OBJECTSTORE_TAR}" ]]; then
  print_exports
  exit 0
fi

# build_workspace sets -mod=mod for the builds from the proxy; the tool builds as the repository
# does.
goflags="${GOFLAGS:-}"
build_workspace "${IMAGES_DIR}"
mkdir -p "${CACHE}" "${work}/out" "${work}/origin"
if [[ -z "${IMAGE_TOOL}" ]]; then
  IMAGE_TOOL="${work}/out/image"
  (cd "${ROOT}" && GOFLAGS="${goflags}" go build -o "${IMAGE_TOOL}" ./hack/e2e/image)
fi
arch="$(go env GOARCH)"

# module_origin MODULE@VERSION: downloads the module and prints its directory, the day of its
# commit and the commit's hash (empty when the proxy does not say), which release builds stamp
# from git.
module_origin() {
  (
    cd "${work}/origin"
    go mod download "$1"
    go list -m -f '{{.Dir}} {{.Time.Format "2006-01-02"}} {{with .Origin}}{{.Hash}}{{end}}' "$1"
  )
}

# set_tar TAR PREFIX: installs TAR.tmp as TAR, removing the archives of other versions, which
# the cluster would import too.
set_tar() {
  local tar="$1" prefix="$2" old
  for old in "${IMAGES_DIR}/${prefix}"-*.tar; do
    [[ "${old}" == "${tar}" || ! -e "${old}" ]] || rm -f "${old}"
  done
  mv "${tar}.tmp" "${tar}"
}

if [[ ! -f "${CNPG_MANIFEST}" || ! -f "${CNPG_TAR}" ]]; then
  origin="$(module_origin "github.com/cloudnative-pg/cloudnative-pg@v${CNPG_VERSION}")"
  read -r dir date hash <<<"${origin}"
  release="${dir}/releases/cnpg-${CNPG_VERSION}.yaml"
  image="$(manifest_image "${release}")"
  # The init container of PostgreSQL Pods runs OPERATOR_IMAGE_NAME: the same image, or it would
  # need a second one.
  operator_image_name="$(awk '/^kind: Deployment$/ {d = 1}
    d && $NF == "OPERATOR_IMAGE_NAME" {getline; print $2; exit}' "${release}")"
  if [[ -z "${image}" || "${image}" != "${operator_image_name}" ]]; then
    log "${release}: the Deployment runs '${image}' but OPERATOR_IMAGE_NAME is '${operator_image_name}'"
    exit 1
  fi
  if [[ "$(grep -cE '^ +imagePullPolicy: Always$' "${release}")" != 1 ]]; then
    log "${release}: want exactly one 'imagePullPolicy: Always' (the operator's) to set to Never"
    exit 1
  fi
  sed -E 's/^( +imagePullPolicy:) Always$/\1 Never/' "${release}" >"${CNPG_MANIFEST}.tmp"
  mv "${CNPG_MANIFEST}.tmp" "${CNPG_MANIFEST}"

  if [[ ! -f "${CNPG_TAR}" ]]; then
    log "building CloudNativePG ${CNPG_VERSION}'s operator from source (about ten CPU-minutes, once)"
    mkdir -p "${work}/cnpg"
    cd "${work}/cnpg"
    printf 'package main\n\nimport _ "github.com/cloudnative-pg/cloudnative-pg/pkg/versions"\n\nfunc main() {}\n' >tools.go
    # As its Makefile feeds goreleaser: VERSION from the tag without its v, COMMIT the short hash,
    # DATE the commit's day.
    stamp="github.com/cloudnative-pg/cloudnative-pg/pkg/versions"
    ldflags="-X ${stamp}.buildVersion=${CNPG_VERSION} -X ${stamp}.buildDate=${date}"
    [[ -z "${hash}" ]] || ldflags+=" -X ${stamp}.buildCommit=${hash:0:7}"
    module_build codeport.local/e2e-cnpg "github.com/cloudnative-pg/cloudnative-pg@v${CNPG_VERSION}" \
      github.com/cloudnative-pg/cloudnative-pg/cmd/manager "${work}/out/manager" "${ldflags}"
    licenses=(-file "${dir}/LICENSE=/licenses/LICENSE")
    while read -r f; do
      licenses+=(-file "${dir}/${f}=/${f}")
    done < <(cd "${dir}" && find licenses -type f | sort)
    "${IMAGE_TOOL}" -tag "${image}" -distroless -workdir / \
      -file "${work}/out/manager=/operator/manager_${arch}" -symlink "/manager=operator/manager_${arch}" \
      "${licenses[@]}" -user 65532:65532 -entrypoint '["/manager"]' -o "${CNPG_TAR}.tmp"
    set_tar "${CNPG_TAR}" cnpg-operator
  fi
fi

if [[ ! -f "${OBJECTSTORE_TAR}" ]]; then
  log "building versitygw ${VERSITYGW_VERSION} from source (about four CPU-minutes, once)"
  origin="$(module_origin "github.com/versity/versitygw@v${VERSITYGW_VERSION}")"
  read -r _ date hash <<<"${origin}"
  mkdir -p "${work}/versitygw"
  cd "${work}/versitygw"
  printf 'package main\n\nimport _ "github.com/versity/versitygw/backend/posix"\n\nfunc main() {}\n' >tools.go
  # As its Makefile: Version the tag, Build the short hash, BuildTime when (here: the commit's day).
  ldflags="-X main.Version=v${VERSITYGW_VERSION} -X main.BuildTime=${date}"
  [[ -z "${hash}" ]] || ldflags+=" -X main.Build=${hash:0:7}"
  module_build codeport.local/e2e-versitygw "github.com/versity/versitygw@v${VERSITYGW_VERSION}" \
    github.com/versity/versitygw/cmd/versitygw "${work}/out/versitygw" "${ldflags}"
  "${IMAGE_TOOL}" -tag "${OBJECTSTORE_IMAGE}" -distroless \
    -file "${work}/out/versitygw=/usr/local/bin/versitygw" -user 65532:65532 \
    -entrypoint '["/usr/local/bin/versitygw"]' -o "${OBJECTSTORE_TAR}.tmp"
  set_tar "${OBJECTSTORE_TAR}" versitygw
fi

print_exports
