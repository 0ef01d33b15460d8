#!/usr/bin/env bash
# Builds (once) and prints the directory holding `wheelhouse-render`, the render helper
# (src/helm/render/helper: Helm's Go SDK rendering as `helm upgrade --install --dry-run=server`
# does, kept running and answering over stdin/stdout; see README.md there). Helm and its
# dependencies are pinned in go.mod and go.sum and come from the Go module proxy; the
# Helm version must be the HELM_VERSION of tests/cluster/versions.env, the helm CLI the
# helper is held to. Cached under ${XDG_CACHE_HOME:-~/.cache}/wheelhouse/render/<key>,
# the key holding a hash of the sources, so a change to them builds anew.
#
# Usage: src/helm/render/helper/build.sh              # build if needed, print the dir
#        WHEELHOUSE_RENDER_HELPER=/path/wheelhouse-render ...   # use a prebuilt helper
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src="$here"
name=wheelhouse-render

log() { printf '[render-helper] %s\n' "$*" >&2; }
die() { printf '[render-helper] error: %s\n' "$*" >&2; exit 1; }

if [[ -n "${WHEELHOUSE_RENDER_HELPER:-}" ]]; then
  [[ -f "$WHEELHOUSE_RENDER_HELPER" && -x "$WHEELHOUSE_RENDER_HELPER" ]] ||
    die "WHEELHOUSE_RENDER_HELPER=$WHEELHOUSE_RENDER_HELPER is not an executable file"
  [[ "$(basename "$WHEELHOUSE_RENDER_HELPER")" == "$name" ]] ||
    die "WHEELHOUSE_RENDER_HELPER must name a file called $name (its directory is what this prints): $WHEELHOUSE_RENDER_HELPER"
  dirname "$WHEELHOUSE_RENDER_HELPER"
  exit 0
fi

versions="$here/../../../../tests/cluster/versions.env"
[[ -f "$versions" ]] || die "cannot find $versions (HELM_VERSION, the helm the helper must match)"
# shellcheck source=../../../../tests/cluster/versions.env
source "$versions"
[[ -n "${HELM_VERSION:-}" ]] || die "$versions sets no HELM_VERSION"
helm_version=$(sed -n 's|^[[:space:]]*\(require[[:space:]]\{1,\}\)\{0,1\}helm\.sh/helm/v4[[:space:]]\{1,\}\(v[^[:space:]]*\).*|\2|p' "$src/go.mod" | head -n1)
[[ -n "$helm_version" ]] || die "$src/go.mod requires no helm.sh/helm/v4"
[[ "$helm_version" == "$HELM_VERSION" ]] ||
  die "$src/go.mod requires helm.sh/helm/v4 $helm_version but tests/cluster/versions.env pins HELM_VERSION=$HELM_VERSION; the helper must be built on the helm it is compared with (update one: cd $src && go get helm.sh/helm/v4@$HELM_VERSION && go mod tidy)"

command -v go >/dev/null || die "Go is required to build the render helper (https://go.dev/dl); none found on PATH"

hash=$(cd "$src" && cat $(LC_ALL=C ls -- *.go) go.mod go.sum | sha256sum | cut -c1-12)
key="render-helper-$hash"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/wheelhouse/render"
bin="$cache/$key"
complete() { [[ -x "$bin/$name" ]]; }
if complete; then
  echo "$bin"
  exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.render-helper.lock"
if ! flock -n 9; then
  log "another build holds $cache/.render-helper.lock; waiting for it"
  flock 9
fi
if complete; then
  echo "$bin"
  exit 0
fi

# The build's scratch space (Go's module and build caches) peaks near 1.7 GB, removed
# at the end; the binary that stays is about 63 MB.
free_mb=$(($(df -Pk "$cache" | awk 'NR == 2 { print $4 }') / 1024))
((free_mb >= 2500)) || die "${free_mb} MB free under $cache; building the render helper needs about 2500 MB for a while (1.7 GB measured)"

work=$(mktemp -d "$cache/render-helper-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
export GOCACHE="$work/go-build" GOMODCACHE="$work/go-mod"
# -mod=readonly: go.mod and go.sum are the pins; the build never rewrites the sources.
export GOFLAGS="-mod=readonly -buildvcs=false -modcacherw"
export CGO_ENABLED=0 GOTOOLCHAIN=local

# As a helm release build does: Helm's version variable set, so .Capabilities.HelmVersion
# (and the user agent) say what the helm CLI says. The helper refuses to run without it.
ldflags="-s -w -X helm.sh/helm/v4/internal/version.version=$helm_version"

start=$(date +%s)
log "building $name ($key, helm $helm_version)"
mkdir -p "$work/out"
(cd "$src" && go build -trimpath -ldflags "$ldflags" -o "$work/out/$name" .) >"$work/build.log" 2>&1 ||
  { cat "$work/build.log" >&2; die "could not build $src"; }
"$work/out/$name" version >/dev/null 2>"$work/check.log" ||
  { cat "$work/check.log" >&2; die "the built $name does not run"; }
# The helper's own tests (post-renderers, CEL), while the build cache is warm: a helper
# whose tests fail is never installed.
(cd "$src" && go test -trimpath -count=1 .) >"$work/test.log" 2>&1 ||
  { cat "$work/test.log" >&2; die "the tests of $src failed"; }
mkdir -p "$bin"
mv -f "$work/out/$name" "$bin/"
complete || die "build finished but $name is missing from $bin"
log "built in $(($(date +%s) - start))s into $bin"
echo "$bin"
