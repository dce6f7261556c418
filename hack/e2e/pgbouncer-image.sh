#!/usr/bin/env bash
# Builds the PgBouncer image the chart's CloudNativePG Pooler runs in the end-to-end cluster,
# from Debian's packages, as hack/e2e/postgres-image.sh builds PostgreSQL's: CloudNativePG 1.28
# writes pgbouncer.ini settings (auth_dbname) that PgBouncer learnt in 1.19, newer than
# bookworm's 1.18, so this one is trixie's. mmdebstrap installs pgbouncer into a minbase root
# filesystem; /usr/bin/pgbouncer, where the pooler's instance manager runs it, links to Debian's
# /usr/sbin/pgbouncer. CloudNativePG runs the container as 998:996 and brings its own instance
# manager: no entrypoint.
#
# Cached: pgbouncer.tar in the images directory is built once, pgbouncer run as 998 in it first;
# delete it to build it again. Prints PGBOUNCER_IMAGE as an export. Needs root, mmdebstrap
# (hack/e2e/deps.sh) and jq (hack/deps.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DIR="${XDG_CACHE_HOME:-$HOME/.cache}/codeport/e2e/images"
ARCHIVE="${DIR}/pgbouncer.tar"
REPOSITORY="ghcr.io/codeport/pgbouncer"
SUITE=trixie
# The pooler's user and group in CloudNativePG (pkg/specs/pgbouncer/deployments.go).
USER_ID=998
GROUP_ID=996
log() { echo "e2e-pgbouncer-image: $*" >&2; }
# shellcheck source=hack/e2e/debian-image.sh
source "$(dirname "$0")/debian-image.sh"


if [[ ! -f "${ARCHIVE}" ]]; then
  need_mmdebstrap
  mkdir -p "${DIR}"
  work="$(mktemp -d)"
  trap 'rm -rf "${work}"' EXIT
  mapfile -t sources < <(debian_sources "${SUITE}" "${work}/sources")
  # shellcheck disable=SC2016 # $1 is the hook's argument, expanded when mmdebstrap runs it
  printf '%s\n' '#!/bin/sh' 'set -e' \
    'ln -s ../sbin/pgbouncer "$1/usr/bin/pgbouncer"' \
    'rm -f "$1/etc/resolv.conf" "$1/etc/hostname"' \
    "chroot \"\$1\" setpriv --reuid ${USER_ID} --regid ${GROUP_ID} --clear-groups /usr/bin/pgbouncer --version >&2" \
    "chroot \"\$1\" dpkg-query -W -f '\${Version}' pgbouncer >\"${work}/version\"" \
    >"${work}/customize-hook"
  chmod +x "${work}/customize-hook"
  log "installing pgbouncer from Debian ${SUITE} (a few minutes, once)"
  mmdebstrap --variant=minbase --mode=root --format=tar --include=pgbouncer \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook="${work}/customize-hook" "${SUITE}" "${work}/rootfs.tar" "${sources[@]}" >&2
  # 1.24.1-1+deb13u2: PgBouncer 1.24.1.
  version="$(<"${work}/version")"
  tag="${REPOSITORY}:${version%%-*}-${SUITE}"
  log "building ${tag}"
  (cd "${ROOT}" && CGO_ENABLED=0 go build -o "${work}/image" ./hack/e2e/image)
  "${work}/image" -tag "${tag}" -rootfs "${work}/rootfs.tar" -user "${USER_ID}:${GROUP_ID}" \
    -o "${ARCHIVE}.tmp"
  mv "${ARCHIVE}.tmp" "${ARCHIVE}"
fi

printf 'export PGBOUNCER_IMAGE=%q\n' "$(tag_of "${ARCHIVE}")"
