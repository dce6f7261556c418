#!/usr/bin/env bash
# Keeps the API reference renderer that /docs serves: Scalar's standalone bundle of
# @scalar/api-reference, embedded gzip-compressed in the binary so that the page needs nothing
# but the server that served it.
#
#   scalar.sh verify            the embedded bundle is the one the lock file records (offline)
#   scalar.sh update [VERSION]  fetch VERSION (default: the locked one) from npm, check the
#                               registry's integrity, re-embed it and rewrite the lock file
set -euo pipefail

ui_dir="$(cd "$(dirname "$0")/../../apiserver/openapi/ui" && pwd)"
lock="$ui_dir/scalar.lock"
bundle="$ui_dir/scalar.js.gz"
package=@scalar/api-reference
file=dist/browser/standalone.js

field() { sed -n "s/^$1 //p" "$lock"; }

verify() {
  local want got
  want="$(field sha256)"
  [[ -n "$want" ]] || { echo "scalar: $lock records no sha256" >&2; exit 1; }
  got="$(gzip -dc "$bundle" | sha256sum | cut -d' ' -f1)"
  if [[ "$got" != "$want" ]]; then
    echo "scalar: $bundle is not $package $(field version) (sha256 $got, locked $want); run make docs-ui-update" >&2
    exit 1
  fi
  echo "scalar: $package $(field version) verified (sha256 $got)"
}

update() {
  local version="${1:-$(field version)}" integrity
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  # npm pack checks the tarball against the registry's integrity before it writes it.
  (cd "$tmp" && npm pack --json "$package@$version" >pack.json)
  integrity="$(node -p 'require(process.argv[1])[0].integrity' "$tmp/pack.json")"
  version="$(node -p 'require(process.argv[1])[0].version' "$tmp/pack.json")"
  [[ "$(npm view "$package@$version" dist.integrity)" == "$integrity" ]] || {
    echo "scalar: the tarball's integrity differs from the registry's" >&2; exit 1; }
  tar -xzf "$tmp"/*.tgz -C "$tmp" "package/$file" package/package.json
  [[ "$(node -p 'require(process.argv[1]).license' "$tmp/package/package.json")" == MIT ]] || {
    echo "scalar: $package $version is no longer MIT-licensed; review before embedding" >&2; exit 1; }
  gzip -9nc "$tmp/package/$file" >"$bundle"
  {
    echo "# Written by make docs-ui-update; make docs-ui-verify checks the embedded bundle against it."
    echo "package $package"
    echo "version $version"
    echo "license MIT"
    echo "integrity $integrity"
    echo "file $file"
    echo "sha256 $(sha256sum "$tmp/package/$file" | cut -d' ' -f1)"
  } >"$lock"
  verify
}

case "${1:-}" in
  verify) verify ;;
  update) update "${2:-}" ;;
  *) echo "usage: $0 verify | update [VERSION]" >&2; exit 2 ;;
esac
