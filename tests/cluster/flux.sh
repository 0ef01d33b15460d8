#!/usr/bin/env bash
# Builds (once) and prints the directory holding Flux's helm-controller and
# source-controller, with their CRDs in crds/.
#
# Both come from the Go module proxy at the versions pinned in versions.env and are
# cached under ${XDG_CACHE_HOME:-~/.cache}/wheelhouse/testbin/<versions>. Their go.mod
# replaces the api submodule with a local path, which `go install` refuses, so each is
# built from a small wrapper module that repeats their replace directives with the api
# pinned to the published version of the same tag.
#
# Usage: tests/cluster/flux.sh               # build if needed, print the dir
#        WHEELHOUSE_FLUXBIN=/path ...        # use prebuilt binaries instead
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

log() { printf '[flux] %s\n' "$*" >&2; }
die() { printf '[flux] error: %s\n' "$*" >&2; exit 1; }

if [[ -n "${WHEELHOUSE_FLUXBIN:-}" ]]; then
  echo "$WHEELHOUSE_FLUXBIN"
  exit 0
fi

command -v go >/dev/null || die "Go is required to build Flux's controllers (https://go.dev/dl); none found on PATH"

key="flux_helm-controller-${FLUX_HELM_CONTROLLER_VERSION}_source-controller-${FLUX_SOURCE_CONTROLLER_VERSION}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/wheelhouse/testbin"
bin="$cache/$key"

complete() {
  [[ -x "$bin/helm-controller" && -x "$bin/source-controller" ]] || return 1
  compgen -G "$bin/crds/helm.toolkit.fluxcd.io_*.yaml" >/dev/null || return 1
  compgen -G "$bin/crds/source.toolkit.fluxcd.io_*.yaml" >/dev/null
}
if complete; then
  echo "$bin"
  exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.flux.lock"
if ! flock -n 9; then
  log "another build holds $cache/.flux.lock; waiting for it"
  flock 9
fi
if complete; then
  echo "$bin"
  exit 0
fi

free_mb=$(($(df -Pk "$cache" | awk 'NR == 2 { print $4 }') / 1024))
((free_mb >= 5000)) || die "${free_mb} MB free under $cache; building Flux's controllers needs about 5000 MB for a while"

work=$(mktemp -d "$cache/flux-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
export GOCACHE="$work/go-build" GOMODCACHE="$work/go-mod"
export GOFLAGS="-mod=mod -buildvcs=false -modcacherw"
export CGO_ENABLED=0 GOTOOLCHAIN=local
mkdir -p "$work/out/crds"

# build NAME VERSION PINS: github.com/fluxcd/NAME at VERSION into $work/out/NAME, with
# PINS ("module=version ...") replacing dependency versions the proxy does not serve.
build() {
  local name=$1 version=$2 pins=$3 module="github.com/fluxcd/$1"
  local mod="$work/$name"
  mkdir -p "$mod"
  log "fetching $module@$version"
  local info gomod dir
  info=$(go mod download -json "$module@$version") || die "could not download $module@$version"
  gomod=$(sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p' <<<"$info")
  dir=$(sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p' <<<"$info")
  [[ -f "$gomod" && -d "$dir" ]] || die "no go.mod or sources for $module@$version"
  {
    echo "module wheelhouse.dev/testbin/$name"
    echo
    echo "go $(sed -n 's/^go \(.*\)/\1/p' "$gomod")"
    echo
    echo "require $module $version"
    echo
    # Their own replaces, with the local api submodule pinned to the same tag.
    awk -v api="$module/api" -v version="$version" '
      /^replace \($/ { block = 1; next }
      block && /^\)$/ { block = 0; next }
      block { line = $0; sub(/^[ \t]+/, "", line); print "replace " line; next }
      /^replace / { print }
    ' "$gomod" | sed "s|=> \./api\$|=> $module/api $version|"
    for pin in $pins; do echo "replace ${pin%%=*} => ${pin%%=*} ${pin#*=}"; done
  } >"$mod/go.mod"
  (
    cd "$mod"
    go mod download "$module/api@$version" >/dev/null
    # Go names every module it downloads; keep that in a log, shown when it fails.
    go get "$module@$version" >"$work/$name-get.log" 2>&1 || { cat "$work/$name-get.log" >&2; die "could not resolve $module@$version (a dependency version the proxy refuses needs a pin in versions.env)"; }
    log "building $name $version (slow on a cold cache)"
    go build -trimpath -ldflags "-s -w" -o "$work/out/$name" "$module"
  )
  cp "$dir"/config/crd/bases/*.yaml "$work/out/crds/"
}

start=$(date +%s)
build source-controller "$FLUX_SOURCE_CONTROLLER_VERSION" "$FLUX_SOURCE_CONTROLLER_PINS"
build helm-controller "$FLUX_HELM_CONTROLLER_VERSION" "$FLUX_HELM_CONTROLLER_PINS"
mkdir -p "$bin"
mv -f "$work/out/source-controller" "$work/out/helm-controller" "$bin/"
rm -rf "$bin/crds"
mv "$work/out/crds" "$bin/crds"
complete || die "build finished but binaries or CRDs are missing from $bin"
log "built in $(($(date +%s) - start))s into $bin"
echo "$bin"
