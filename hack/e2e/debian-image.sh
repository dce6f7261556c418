# shellcheck shell=bash
# What the scripts of hack/e2e that build images from Debian's packages share; sourced, after
# they define log.

# tag_of ARCHIVE: the image reference a docker-archive tarball names.
tag_of() {
  tar -xOf "$1" manifest.json | jq -r '.[0].RepoTags[0]'
}

# need_mmdebstrap: stops unless mmdebstrap can build here (root mode needs root).
need_mmdebstrap() {
  [[ "$(id -u)" == 0 ]] || { log "building the image needs root (mmdebstrap's root mode)"; exit 1; }
  command -v mmdebstrap >/dev/null || { log "mmdebstrap not found (hack/e2e/deps.sh)"; exit 1; }
}

# debian_sources SUITE DIR: copies this machine's Debian sources (debian.sources, sources.list)
# into DIR with its release's codename replaced by SUITE, and prints their paths, one a line, for
# mmdebstrap: the machine's mirror is the only one that may be reachable.
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
