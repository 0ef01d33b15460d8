#!/usr/bin/env bash
# Builds (once) and prints the directory holding the local control plane's binaries:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok and helm.
#
# Everything comes from the Go module proxy at the versions pinned in versions.env and
# is cached under ${XDG_CACHE_HOME:-~/.cache}/wheelhouse/testbin/<versions>, so only the
# first run on a machine pays for the build (tens of minutes on 2 cores; see docs/development/prerequisites.md).
#
# Usage: tests/cluster/testbin.sh            # build if needed, print the bin dir
#        WHEELHOUSE_TESTBIN=/path ...        # use prebuilt binaries instead
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

log() { printf '[testbin] %s\n' "$*" >&2; }
die() { printf '[testbin] error: %s\n' "$*" >&2; exit 1; }

if [[ -n "${WHEELHOUSE_TESTBIN:-}" ]]; then
  echo "$WHEELHOUSE_TESTBIN"
  exit 0
fi

command -v go >/dev/null || die "Go is required to build the local control plane (https://go.dev/dl); none found on PATH"

key="k8s-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_helm-${HELM_VERSION}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/wheelhouse/testbin"
bin="$cache/$key"
want=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok helm)

complete() {
  for b in "${want[@]}"; do [[ -x "$bin/$b" ]] || return 1; done
}
if complete; then
  echo "$bin"
  exit 0
fi

mkdir -p "$cache"
# One build at a time per cache: a second caller waits instead of racing the first.
exec 9>"$cache/.lock"
if ! flock -n 9; then
  log "another build holds $cache/.lock; waiting for it"
  flock 9
fi
if complete; then
  echo "$bin"
  exit 0
fi

# The build's scratch space (sources, Go's caches) peaks near 7 GB, removed at the end.
free_mb=$(($(df -Pk "$cache" | awk 'NR == 2 { print $4 }') / 1024))
((free_mb >= 7000)) || die "${free_mb} MB free under $cache; building the control plane needs about 7000 MB for a while (6.8 GB measured; 0.5 GB stays)"

mkdir -p "$bin"
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
# Go's build and module caches for these builds grow to several GB; keep them in the work
# directory, removed on exit, so they never sit beside the Rust build on a CI disk.
export GOCACHE="$work/go-build" GOMODCACHE="$work/go-mod"
export GOFLAGS="-mod=mod -buildvcs=false -modcacherw"
export CGO_ENABLED=0

k8s_minor=${KUBERNETES_VERSION#v1.}
k8s_minor=${k8s_minor%%.*}
staging_version="v0.${KUBERNETES_VERSION#v1.}"

build_kubernetes() {
  local mod="$work/kubernetes"
  mkdir -p "$mod"
  log "fetching k8s.io/kubernetes@$KUBERNETES_VERSION"
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')
  [[ -f "$gomod" ]] || die "could not download k8s.io/kubernetes@$KUBERNETES_VERSION"
  # Kubernetes' go.mod replaces every k8s.io/* staging module with a local path, which
  # only works inside its own tree. Pin each of them to the matching published v0.X.Y.
  local staging
  staging=$(sed -n 's|^\s*\(k8s.io/[^ ]*\) => ./staging/.*|\1|p' "$gomod")
  [[ -n "$staging" ]] || die "found no staging modules in $gomod"
  {
    echo "module wheelhouse.dev/testbin/kubernetes"
    echo
    echo "go $(sed -n 's/^go \(.*\)/\1/p' "$gomod")"
    echo
    echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
    echo
    echo "replace ("
    for m in $staging; do echo "	$m => $m $staging_version"; done
    echo ")"
  } >"$mod/go.mod"
  (
    cd "$mod"
    log "resolving Kubernetes dependencies"
    go get "k8s.io/kubernetes/cmd/kube-apiserver@$KUBERNETES_VERSION" \
      "k8s.io/kubernetes/cmd/kube-controller-manager@$KUBERNETES_VERSION" \
      "k8s.io/kubernetes/cmd/kube-scheduler@$KUBERNETES_VERSION" \
      "k8s.io/kubernetes/cmd/kubectl@$KUBERNETES_VERSION"
    # Without these the binaries report version v0.0.0 and clients refuse them.
    local pkg=k8s.io/component-base/version
    local ldflags="-s -w -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$k8s_minor"
    ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES_VERSION"
    log "building kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (slow on a cold cache)"
    go build -trimpath -ldflags "$ldflags" -o "$work/out/" \
      k8s.io/kubernetes/cmd/kube-apiserver \
      k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler \
      k8s.io/kubernetes/cmd/kubectl
  )
}

build_etcd() {
  # etcd's server module uses replace directives too; a two-line main calling etcdmain
  # sidesteps them.
  local mod="$work/etcd"
  mkdir -p "$mod"
  cat >"$mod/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  printf 'module wheelhouse.dev/testbin/etcd\n\ngo 1.24\n' >"$mod/go.mod"
  (
    cd "$mod"
    log "building etcd $ETCD_VERSION"
    go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
    go mod tidy
    go build -trimpath -ldflags "-s -w" -o "$work/out/etcd" .
  )
}

build_installable() {
  local name=$1 pkg=$2 version=$3 ldflags="-s -w ${4:-}"
  log "building $name $version"
  GOBIN="$work/out" go install -trimpath -ldflags "$ldflags" "$pkg@$version"
}

mkdir -p "$work/out"
start=$(date +%s)
[[ -x "$bin/etcd" ]] || build_etcd
[[ -x "$bin/kwok" ]] || build_installable kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION"
[[ -x "$bin/helm" ]] || build_installable helm helm.sh/helm/v4/cmd/helm "$HELM_VERSION" \
  "-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION"
[[ -x "$bin/kube-apiserver" && -x "$bin/kubectl" ]] || build_kubernetes
# Move finished binaries into place only after every build succeeded.
for b in "$work"/out/*; do mv -f "$b" "$bin/"; done
complete || die "build finished but binaries are missing from $bin"
log "built in $(($(date +%s) - start))s into $bin"
echo "$bin"
