#!/usr/bin/env bash
# Builds the PostgreSQL image the end-to-end cluster's CloudNativePG runs as its instance image,
# from Debian bookworm's packages, without a registry or a container daemon: mmdebstrap installs
# postgresql-15, barman-cli-cloud and python3-boto3 (Barman's cloud client, for backups to an
# S3-compatible store) into a minbase root filesystem, and hack/e2e/image lays it as the image's
# one layer. The image has PostgreSQL's binaries first on PATH, as CloudNativePG finds them, and
# user postgres (26:26), which CloudNativePG runs as; no entrypoint: CloudNativePG runs its own
# instance manager, which its init container copies in.
#
# The packages come from this machine's Debian mirror (/etc/apt/sources.list.d/debian.sources
# and /etc/apt/sources.list; another release's codename becomes bookworm), the only one that
# may be reachable. The tag is the installed PostgreSQL's version, 15.<minor>-bookworm, which
# CloudNativePG reads as major version 15.
#
# Cached: postgresql.tar in the images directory is built once (several minutes), checked (see
# check_image) and only then kept; a later run reads its tag back from it. Delete it to build
# the image again from the mirror's current packages.
#
#   hack/e2e/postgres-image.sh         build it if missing; print POSTGRES_IMAGE as an export
#   hack/e2e/postgres-image.sh check   check the built image again
#
# Needs root (mmdebstrap's root mode, chroot), mmdebstrap (hack/e2e/deps.sh) and jq
# (hack/deps.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DIR="${XDG_CACHE_HOME:-$HOME/.cache}/codeport/e2e/images"
ARCHIVE="${DIR}/postgresql.tar"
REPOSITORY="ghcr.io/codeport/postgresql"
SUITE=bookworm
MAJOR=15
PACKAGES=(postgresql-15 barman-cli-cloud python3-boto3)
BINDIR="/usr/lib/postgresql/${MAJOR}/bin"
# PostgreSQL's own directory, the only one with initdb, postgres and pg_ctl, first: Debian's
# /usr/bin has wrappers of psql, pg_dump and others, which pick a version by the clusters Debian
# registers and CloudNativePG does not. C.UTF-8 is built into libc6.
ENV=("PATH=${BINDIR}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" "LANG=C.UTF-8")
# What CloudNativePG 1.28 runs in the instance's container: the PostgreSQL programs of its
# instance manager (pkg/management/postgres) and the Barman cloud commands of its backups
# (github.com/cloudnative-pg/barman-cloud).
PG_COMMANDS=(initdb postgres pg_ctl pg_controldata pg_basebackup pg_rewind pg_isready pg_dump
  pg_restore psql)
BARMAN_COMMANDS=(barman-cloud-backup barman-cloud-backup-delete barman-cloud-backup-list
  barman-cloud-backup-show barman-cloud-check-wal-archive barman-cloud-restore
  barman-cloud-wal-archive barman-cloud-wal-restore)
# Paths dpkg leaves out, to keep the image small:
DPKG_FILTERS=(
  # documentation, manual pages and translations, which nothing in a container reads;
  'path-exclude=/usr/share/doc/*' 'path-include=/usr/share/doc/*/copyright'
  'path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/info/*'
  'path-exclude=/usr/share/lintian/*'
  'path-exclude=/usr/share/locale/*' 'path-include=/usr/share/locale/locale.alias'
  # the locales' sources: CloudNativePG's initdb runs with the C locale (its defaults
  # --lc-collate=C --lc-ctype=C), which needs none; the locales package's scripts read SUPPORTED;
  'path-exclude=/usr/share/i18n/*' 'path-include=/usr/share/i18n/SUPPORTED'
  # LLVM, which PostgreSQL loads only to compile queries just in time: without llvmjit.so it
  # runs them without, silently (jit_provider in PostgreSQL's documentation);
  "path-exclude=/usr/lib/postgresql/${MAJOR}/lib/llvmjit*"
  "path-exclude=/usr/lib/postgresql/${MAJOR}/lib/bitcode/*"
  'path-exclude=/usr/lib/*/libLLVM-*' 'path-exclude=/usr/lib/*/libz3.so*'
  # botocore's models of every AWS service: Barman calls S3 (and STS, for web identities) only.
  'path-exclude=/usr/lib/python3/dist-packages/botocore/data/*'
  'path-include=/usr/lib/python3/dist-packages/botocore/data/s3/*'
  'path-include=/usr/lib/python3/dist-packages/botocore/data/sts/*'
  'path-include=/usr/lib/python3/dist-packages/botocore/data/_retry.json'
  'path-include=/usr/lib/python3/dist-packages/botocore/data/endpoints.json'
  'path-include=/usr/lib/python3/dist-packages/botocore/data/partitions.json'
  'path-include=/usr/lib/python3/dist-packages/botocore/data/sdk-default-configuration.json'
)
log() { echo "e2e-postgres-image: $*" >&2; }
# shellcheck source=hack/e2e/debian-image.sh
source "$(dirname "$0")/debian-image.sh"


# check_image ARCHIVE SCRATCH: runs the image's root filesystem, unpacked into SCRATCH (an empty
# directory), as CloudNativePG runs its container (read-only, user 26, its environment, empty
# directories at /controller, /run, /dev/shm and PGDATA's volume) and there checks that every
# command CloudNativePG runs is on PATH, that initdb with CloudNativePG's default options makes a
# cluster that starts, answers a query as PostgreSQL 15 (one that would be compiled just in
# time, LLVM being left out), takes a base backup and stops cleanly, and that Barman's cloud
# client loads boto3 and reaches for an S3 endpoint.
check_image() {
  local archive="$1" scratch="$2" manifest
  manifest="$(tar -xOf "${archive}" manifest.json)"
  mkdir "${scratch}/root"
  local layer
  while read -r layer; do
    tar -xOf "${archive}" "${layer}" | tar -xz --numeric-owner -C "${scratch}/root"
  done < <(jq -r '.[0].Layers[]' <<<"${manifest}")
  local env=()
  local config
  config="$(jq -r '.[0].Config' <<<"${manifest}")"
  mapfile -t env < <(tar -xOf "${archive}" "${config}" | jq -r '.config.Env[]')
  # As CloudNativePG's Pod sets them (pkg/specs/pods.go), and HOME as the runtime does.
  env+=(PGDATA=/var/lib/postgresql/data/pgdata PGHOST=/controller/run PGPORT=5432
    TMPDIR=/controller/tmp PSQL_HISTORY=/controller/tmp/.psql_history HOME=/var/lib/postgresql)
  # The volumes' mount points, which the runtime would create.
  mkdir -p "${scratch}/root/controller" "${scratch}/root/var/lib/postgresql/data"
  # shellcheck disable=SC2016 # expanded by the inner shell
  unshare --mount --pid --fork bash -euo pipefail -c '
    root="$1"; shift
    mount --make-rprivate /
    mount --bind "${root}" "${root}"
    mount -o remount,bind,ro "${root}"
    mount -t proc proc "${root}/proc"
    mount -t tmpfs -o mode=0755 tmpfs "${root}/dev"
    for d in null zero full random urandom; do
      touch "${root}/dev/${d}"
      mount --bind "/dev/${d}" "${root}/dev/${d}"
    done
    mkdir "${root}/dev/shm"
    mount -t tmpfs -o mode=1777 tmpfs "${root}/dev/shm"
    mount -t tmpfs -o mode=0755 tmpfs "${root}/run"
    mount -t tmpfs -o mode=0700,uid=26,gid=26 tmpfs "${root}/controller"
    mount -t tmpfs -o mode=0700,uid=26,gid=26 tmpfs "${root}/var/lib/postgresql/data"
    exec chroot "${root}" setpriv --reuid 26 --regid 26 --clear-groups env -i "$@"
  ' check "${scratch}/root" "${env[@]}" bash -euo pipefail -c "$(check_script)" >&2
  log "checked ${archive}"
}

# check_script: what check_image runs inside the image, as user 26.
check_script() {
  cat <<EOF
for c in ${PG_COMMANDS[*]}; do
  [[ "\$(command -v "\${c}")" == "${BINDIR}/\${c}" ]] ||
    { echo "\${c} is not ${BINDIR}/\${c}"; exit 1; }
done
for c in ${BARMAN_COMMANDS[*]}; do
  command -v "\${c}" >/dev/null || { echo "no \${c} on PATH"; exit 1; }
done
mkdir /controller/run /controller/tmp
umask 077
initdb --username postgres -D "\${PGDATA}" --encoding=UTF8 --lc-collate=C --lc-ctype=C >/dev/null
pg_ctl -D "\${PGDATA}" -w -l /controller/tmp/postgres.log \\
  -o "-c listen_addresses='' -c unix_socket_directories=/controller/run" start >/dev/null
got="\$(psql -U postgres -XAtq -v ON_ERROR_STOP=1 -c 'SET jit_above_cost = 0' \\
  -c "SELECT current_setting('server_version_num')::int / 10000, current_user, pg_jit_available(),
      (SELECT sum(g) FROM generate_series(1, 1000) g)")"
[[ "\${got}" == "${MAJOR}|postgres|f|500500" ]] || { echo "query: \${got}"; exit 1; }
pg_isready -q
pg_basebackup -U postgres -D /controller/tmp/base -X stream -c fast
[[ -f /controller/tmp/base/PG_VERSION ]] || { echo "pg_basebackup copied no cluster"; exit 1; }
pg_ctl -D "\${PGDATA}" -w -m fast stop >/dev/null
pg_controldata | grep -q '^Database cluster state: *shut down\$' ||
  { echo "pg_controldata: not shut down"; exit 1; }
echo "PostgreSQL \$(postgres --version | cut -d' ' -f3): initdb, start, query, base backup, stop"

barman-cloud-wal-archive --help >/dev/null
# No store listens there: the client must get as far as connecting to it.
out="\$(AWS_ACCESS_KEY_ID=check AWS_SECRET_ACCESS_KEY=check AWS_MAX_ATTEMPTS=1 \\
  barman-cloud-check-wal-archive --cloud-provider aws-s3 --endpoint-url http://127.0.0.1:9 \\
  s3://codeport-check/wal check 2>&1)" &&
  { echo "barman-cloud-check-wal-archive: no error"; exit 1; }
grep -q 'Could not connect to the endpoint URL' <<<"\${out}" || { echo "barman: \${out}"; exit 1; }
boto3="\$(python3 -c 'import boto3; print(boto3.__version__)')"
echo "\$(barman-cloud-backup --version 2>&1) with boto3 \${boto3}"
EOF
}

if [[ "${1:-}" == check ]]; then
  [[ -f "${ARCHIVE}" ]] || { log "no ${ARCHIVE}: run $0 first"; exit 1; }
  work="$(mktemp -d)"
  trap 'rm -rf "${work}"' EXIT
  check_image "${ARCHIVE}" "${work}"
  exit 0
fi

if [[ ! -f "${ARCHIVE}" ]]; then
  need_mmdebstrap
  mkdir -p "${DIR}"
  work="$(mktemp -d)"
  trap 'rm -rf "${work}"' EXIT

  mapfile -t sources < <(debian_sources "${SUITE}" "${work}/sources")

  # postgresql-common's postinst creates the postgres user unless it exists: create it first,
  # with CloudNativePG's ids, before passwd's scripts write /etc/shadow from /etc/passwd.
  cat >"${work}/essential-hook" <<'EOF'
#!/bin/sh
set -e
echo 'postgres:*:26:26:PostgreSQL administrator:/var/lib/postgresql:/bin/bash' >>"$1/etc/passwd"
echo 'postgres:*:26:' >>"$1/etc/group"
EOF
  # postgresql-15's postinst creates a cluster, "main", which CloudNativePG never uses; ssl-cert's
  # makes a key pair of its own; mmdebstrap copies this machine's resolv.conf and hostname, which
  # the runtime replaces.
  cat >"${work}/customize-hook" <<EOF
#!/bin/sh
set -e
chroot "\$1" pg_dropcluster ${MAJOR} main
rm -f "\$1/etc/ssl/private/ssl-cert-snakeoil.key" "\$1/etc/ssl/certs/ssl-cert-snakeoil.pem"
find "\$1/etc/ssl/certs" -lname ssl-cert-snakeoil.pem -delete
rm -f "\$1/etc/resolv.conf" "\$1/etc/hostname"
chroot "\$1" dpkg-query -W -f '\${Version}' postgresql-${MAJOR} >"${work}/version"
EOF
  chmod +x "${work}/essential-hook" "${work}/customize-hook"

  log "installing ${PACKAGES[*]} from Debian ${SUITE} (several minutes, once)"
  include="$(IFS=,; echo "${PACKAGES[*]}")"
  mmdebstrap --variant=minbase --mode=root --format=tar --include="${include}" \
    "${DPKG_FILTERS[@]/#/--dpkgopt=}" \
    --essential-hook="${work}/essential-hook" --customize-hook="${work}/customize-hook" \
    "${SUITE}" "${work}/rootfs.tar" "${sources[@]}" >&2

  # 15.20-0+deb12u1: PostgreSQL 15.20, Debian's 0+deb12u1.
  version="$(<"${work}/version")"
  minor="${version#"${MAJOR}".}"
  minor="${minor%%[!0-9]*}"
  [[ -n "${minor}" ]] || { log "postgresql-${MAJOR} ${version}: no minor version"; exit 1; }
  tag="${REPOSITORY}:${MAJOR}.${minor}-${SUITE}"
  log "building ${tag}"
  (cd "${ROOT}" && CGO_ENABLED=0 go build -o "${work}/image" ./hack/e2e/image)
  "${work}/image" -tag "${tag}" -rootfs "${work}/rootfs.tar" -user 26:26 "${ENV[@]/#/-env=}" \
    -o "${ARCHIVE}.tmp"
  rm "${work}/rootfs.tar"
  mkdir "${work}/check"
  check_image "${ARCHIVE}.tmp" "${work}/check"
  mv "${ARCHIVE}.tmp" "${ARCHIVE}"
fi

printf 'export POSTGRES_IMAGE=%q\n' "$(tag_of "${ARCHIVE}")"
