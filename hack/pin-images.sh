#!/usr/bin/env bash
# Re-pins the Dockerfile's base images (and its syntax frontend) to the current digest of each
# tag's multi-platform index: hack/pin-images.sh [Dockerfile]   (make pin-images)
# Needs registry access and docker buildx. Refuses a tag whose index lacks one of PLATFORMS
# (default: the Makefile's), so a pin can never make the multi-platform build fail.
set -euo pipefail
cd "$(dirname "$0")/.."
dockerfile="${1:-Dockerfile}"
platforms="${PLATFORMS:-$(sed -n 's/^PLATFORMS ?= //p' Makefile)}"

command -v docker >/dev/null || { echo "pin-images: docker (with buildx) is required" >&2; exit 1; }

resolve() { # tag → digest of its index, checked to hold every platform
  local ref="$1" manifest media digest
  manifest="$(docker buildx imagetools inspect "$ref" --format '{{json .Manifest}}')"
  media="$(jq -r .mediaType <<<"$manifest")"
  digest="$(jq -r .digest <<<"$manifest")"
  case "$media" in
    application/vnd.oci.image.index.v1+json|application/vnd.docker.distribution.manifest.list.v2+json) ;;
    *) echo "pin-images: $ref is $media, not a multi-platform index" >&2; exit 1 ;;
  esac
  local p
  for p in ${platforms//,/ }; do
    jq -e --arg os "${p%%/*}" --arg arch "${p#*/}" \
      '[.manifests[].platform | select(.os == $os and .architecture == $arch)] | length > 0' \
      <<<"$manifest" >/dev/null || { echo "pin-images: $ref has no $p image" >&2; exit 1; }
  done
  echo "$digest"
}

# The syntax line and every FROM that names an image (not an earlier stage).
refs="$(sed -nE -e 's/^# syntax=([^ ]+).*/\1/p' -e 's/^FROM (--platform=[^ ]+ )?([^ ]+).*/\2/p' "$dockerfile" |
  grep -E '[:/]' || true)"
for ref in $refs; do
  tag="${ref%@*}"
  digest="$(resolve "$tag")"
  echo "pin-images: $tag@$digest"
  sed -i -E "s|${ref//./\\.}|${tag}@${digest}|" "$dockerfile"
done
