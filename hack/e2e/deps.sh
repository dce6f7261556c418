#!/usr/bin/env bash
# Makes sure the system packages the end-to-end node needs are installed: containerd (the CRI
# runtime), runc, the standard CNI plugins (bridge, host-local, loopback, portmap), iptables and
# conntrack (kube-proxy), ipset (the NetworkPolicy engine, hack/e2e/kube-router.sh) and
# mmdebstrap (the PostgreSQL image's root filesystem, hack/e2e/postgres-image.sh). As root on a
# machine with apt-get, missing packages are installed; otherwise the script stops with one line
# naming what to install.
set -euo pipefail

missing=()
command -v containerd >/dev/null 2>&1 || missing+=(containerd)
command -v runc >/dev/null 2>&1 || missing+=(runc)
[[ -x /usr/lib/cni/bridge || -x /opt/cni/bin/bridge ]] || missing+=(containernetworking-plugins)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
command -v conntrack >/dev/null 2>&1 || missing+=(conntrack)
command -v ipset >/dev/null 2>&1 || missing+=(ipset)
command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
  echo "e2e-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  # The node's containerd is started by hack/e2e/up.sh with its own configuration, never as a
  # system service: policy-rc.d keeps the package from starting one while it is installed.
  policy=/usr/sbin/policy-rc.d
  created_policy=false
  if [[ ! -e "${policy}" ]]; then
    printf '#!/bin/sh\nexit 101\n' > "${policy}"
    chmod +x "${policy}"
    created_policy=true
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  [[ "${created_policy}" == true ]] && rm -f "${policy}"
  exit 0
fi
echo "e2e-deps: missing system packages; install them first: apt-get install ${missing[*]}" >&2
exit 1
