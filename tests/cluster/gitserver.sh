#!/usr/bin/env bash
# Builds (once) and prints the directory holding `gitserver`, the Git server of the
# Git chart-source tests (tests/cluster/gitserver/main.go: smart HTTP by `git
# http-backend`, anonymous over HTTP and with basic or bearer auth over HTTPS, and
# `git upload-pack` over SSH). Its one dependency, golang.org/x/crypto, is pinned in
# tests/cluster/gitserver/go.mod and go.sum and comes from the Go module proxy. Cached
# under ${XDG_CACHE_HOME:-~/.cache}/wheelhouse/testbin/<key>, the key holding a hash of
# the sources, so a change to them builds anew.
#
# Usage: tests/cluster/gitserver.sh            # build if needed, print the dir
#        WHEELHOUSE_GITSERVERBIN=/path ...     # use a prebuilt gitserver instead
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src="$here/gitserver"

log() { printf '[gitserver] %s\n' "$*" >&2; }
die() { printf '[gitserver] error: %s\n' "$*" >&2; exit 1; }

if [[ -n "${WHEELHOUSE_GITSERVERBIN:-}" ]]; then
  echo "$WHEELHOUSE_GITSERVERBIN"
  exit 0
fi
command -v go >/dev/null || die "Go is required to build the Git server (https://go.dev/dl); none found on PATH"

hash=$(cd "$src" && cat main.go go.mod go.sum | sha256sum | cut -c1-12)
key="gitserver-$hash"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/wheelhouse/testbin"
bin="$cache/$key"
complete() { [[ -x "$bin/gitserver" ]]; }
if complete; then
  echo "$bin"
  exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.gitserver.lock"
if ! flock -n 9; then
  log "another build holds $cache/.gitserver.lock; waiting for it"
  flock 9
fi
if complete; then
  echo "$bin"
  exit 0
fi

work=$(mktemp -d "$cache/gitserver-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
export GOCACHE="$work/go-build" GOMODCACHE="$work/go-mod"
# -mod=readonly: go.mod and go.sum are the pins; the build never rewrites the sources.
export GOFLAGS="-mod=readonly -buildvcs=false -modcacherw"
export CGO_ENABLED=0 GOTOOLCHAIN=local

start=$(date +%s)
log "building gitserver ($key)"
mkdir -p "$work/out"
(cd "$src" && go build -trimpath -ldflags "-s -w" -o "$work/out/gitserver" .) >"$work/build.log" 2>&1 ||
  { cat "$work/build.log" >&2; die "could not build $src"; }
mkdir -p "$bin"
mv -f "$work/out/gitserver" "$bin/"
complete || die "build finished but gitserver is missing from $bin"
log "built in $(($(date +%s) - start))s into $bin"
echo "$bin"
