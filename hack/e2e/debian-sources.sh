# shellcheck shell=bash
# debian_sources SUITE DIR: copies this machine's Debian sources (debian.sources, sources.list)
# into DIR with its release's codename replaced by SUITE, and prints their paths, one a line, for
# mmdebstrap: the machine's mirror is the only one that may be reachable. Sourced by the image
# scripts of hack/e2e.
debian_sources() {
  local suite="$1" dir="$2" codename f
  codename="$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release 2>/dev/null || true)"
  mkdir -p "${dir}"
  for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
    grep -qsv '^[[:space:]]*\(#.*\)\?$' "${f}" || continue
    if [[ -n "${codename}" && "${codename}" != "${suite}" ]]; then
      sed "s/\b${codename}\b/${suite}/g" "${f}" >"${dir}/${f##*/}"
    else
      cp "${f}" "${dir}/${f##*/}"
    fi
    echo "${dir}/${f##*/}"
  done
}
