#!/usr/bin/env bash
# Runs a command as it would run on a fresh machine, as far as Debian's packages go: in a mount
# namespace of its own where /usr, /opt, /etc, /var and /run are overlays on a tmpfs, the named
# packages are purged (with dpkg, inside the overlays only), and apt-get and dpkg work for real,
# on the overlays. Nothing the command installs or removes outlives it, nor does any process it
# started (each is killed when it ends); the host's packages, files and processes are untouched.
#
#   hack/fresh/sandbox.sh [--purge PKG]... [--report DIR] -- COMMAND [ARG]...
#
# --report DIR: writes DIR/requested, the packages apt-get was asked to install, one a line, in
# the order asked; and DIR/purged, the packages that were installed and purged first.
# Downloaded packages are kept in ${XDG_CACHE_HOME:-$HOME/.cache}/codeport/fresh/archives, so
# only the first run fetches them. Maintainer scripts may start or stop no service
# (policy-rc.d). Needs root. Used by hack/fresh's test (docs/testing.md, "Fresh machines").
set -euo pipefail

purge=()
report=""
while [[ $# -gt 0 ]]; do
  case "$1" in
  --purge) purge+=("$2"); shift 2 ;;
  --report) report="$2"; shift 2 ;;
  --) shift; break ;;
  *) echo "usage: $0 [--purge PKG]... [--report DIR] -- COMMAND [ARG]..." >&2; exit 2 ;;
  esac
done
[[ $# -gt 0 ]] || { echo "sandbox: no command" >&2; exit 2; }
[[ "$(id -u)" == 0 ]] || { echo "sandbox: needs root (mount namespaces, dpkg)" >&2; exit 1; }

if [[ -z "${CODEPORT_FRESH_SANDBOX:-}" ]]; then
  # A private mount namespace: the overlays below are seen by this process tree only, and go
  # with it.
  args=()
  for p in "${purge[@]}"; do args+=(--purge "${p}"); done
  [[ -n "${report}" ]] && args+=(--report "${report}")
  CODEPORT_FRESH_SANDBOX=1 exec unshare --mount --propagation private -- "$0" "${args[@]}" -- "$@"
fi

archives="${XDG_CACHE_HOME:-$HOME/.cache}/codeport/fresh/archives"
mkdir -p "${archives}/partial"
scratch="$(mktemp -d /tmp/codeport-fresh.XXXXXX)"
# The tmpfs goes with the namespace; the directory under it is the host's.
trap 'umount -l "${scratch}" 2>/dev/null; rmdir "${scratch}" 2>/dev/null || true' EXIT
mount -t tmpfs tmpfs "${scratch}"
for d in usr opt etc var run; do
  mkdir -p "${scratch}/upper/${d}" "${scratch}/work/${d}"
  mount -t overlay overlay \
    -o "lowerdir=/${d},upperdir=${scratch}/upper/${d},workdir=${scratch}/work/${d}" "/${d}"
done
mount --bind "${archives}" /var/cache/apt/archives
printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
chmod +x /usr/sbin/policy-rc.d

export DEBIAN_FRONTEND=noninteractive
purged=()
for p in "${purge[@]}"; do
  if [[ "$(dpkg-query -W -f '${db:Status-Status}' "${p}" 2>/dev/null)" == installed ]]; then
    purged+=("${p}")
  fi
done
if [[ ${#purged[@]} -gt 0 ]]; then
  # --force-depends: only these go, whatever else depends on them (as on a machine that never
  # had them).
  dpkg --purge --force-depends "${purged[@]}" >"${scratch}/purge.log" 2>&1 ||
    { cat "${scratch}/purge.log" >&2; exit 1; }
fi

history=/var/log/apt/history.log
mkdir -p /var/log/apt
before="$(wc -l <"${history}" 2>/dev/null || echo 0)"
status=0
"$@" || status=$?

# Every process still in this mount namespace (a server the command started, a daemon a
# maintainer script started) goes with it.
sweep() {
  local ns sig d pid killed
  ns="$(readlink /proc/self/ns/mnt)"
  for sig in TERM KILL; do
    killed=false
    for d in /proc/[0-9]*; do
      pid="${d#/proc/}"
      [[ "${pid}" == "$$" || "${pid}" == "${BASHPID}" ]] && continue
      [[ "$(readlink "${d}/ns/mnt" 2>/dev/null)" == "${ns}" ]] || continue
      kill -s "${sig}" "${pid}" 2>/dev/null && killed=true
    done
    [[ "${killed}" == true ]] || return 0
    sleep 1
  done
}
sweep

if [[ -n "${report}" ]]; then
  mkdir -p "${report}"
  printf '%s\n' "${purged[@]}" | sed '/^$/d' >"${report}/purged"
  # apt's own record of every install it was asked for: the words of its command lines that are
  # neither the command nor an option.
  { tail -n +"$((before + 1))" "${history}" 2>/dev/null || true; } |
    sed -n 's/^Commandline: //p' |
    awk '{ seen = 0; for (i = 1; i <= NF; i++) { if ($i == "install") { seen = 1; continue }
           if (seen && $i !~ /^-/) print $i } }' >"${report}/requested"
fi
exit "${status}"
