#!/usr/bin/env bash
# Builds (once) and prints the directory holding the CNCF distribution registry
# (`registry`) and `htpasswd`, a small bcrypt htpasswd writer for its basic auth (no
# apache2-utils needed), both from the Go module proxy at DISTRIBUTION_VERSION
# (versions.env), cached under ${XDG_CACHE_HOME:-~/.cache}/wheelhouse/testbin/<key>.
#
# Usage: tests/cluster/registry.sh            # build if needed, print the dir
#        WHEELHOUSE_REGISTRYBIN=/path ...     # use prebuilt binaries instead
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

log() { printf '[registry] %s\n' "$*" >&2; }
die() { printf '[registry] error: %s\n' "$*" >&2; exit 1; }

if [[ -n "${WHEELHOUSE_REGISTRYBIN:-}" ]]; then
  echo "$WHEELHOUSE_REGISTRYBIN"
  exit 0
fi
command -v go >/dev/null || die "Go is required to build the OCI registry (https://go.dev/dl); none found on PATH"

key="distribution-${DISTRIBUTION_VERSION}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/wheelhouse/testbin"
bin="$cache/$key"
complete() { [[ -x "$bin/registry" && -x "$bin/htpasswd" ]]; }
if complete; then
  echo "$bin"
  exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.registry.lock"
if ! flock -n 9; then
  log "another build holds $cache/.registry.lock; waiting for it"
  flock 9
fi
if complete; then
  echo "$bin"
  exit 0
fi

work=$(mktemp -d "$cache/registry-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
export GOCACHE="$work/go-build" GOMODCACHE="$work/go-mod"
export GOFLAGS="-mod=mod -buildvcs=false -modcacherw"
export CGO_ENABLED=0 GOTOOLCHAIN=local

start=$(date +%s)
module=github.com/distribution/distribution/v3
mod="$work/wrapper"
mkdir -p "$mod/htpasswd" "$work/out"
# htpasswd USER PASSWORD: one line of an htpasswd file, bcrypt as the registry requires.
cat >"$mod/htpasswd/main.go" <<'GO'
package main

import (
	"fmt"
	"os"

	"golang.org/x/crypto/bcrypt"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: htpasswd USER PASSWORD")
		os.Exit(2)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(os.Args[2]), bcrypt.DefaultCost)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%s:%s\n", os.Args[1], hash)
}
GO
cat >"$mod/go.mod" <<GOMOD
module wheelhouse.dev/testbin/registry

go $(go env GOVERSION | sed 's/^go//; s/^\([0-9]*\.[0-9]*\).*/\1/')

require $module $DISTRIBUTION_VERSION
GOMOD
(
  cd "$mod"
  log "fetching $module@$DISTRIBUTION_VERSION"
  go get "$module@$DISTRIBUTION_VERSION" golang.org/x/crypto >"$work/get.log" 2>&1 || { cat "$work/get.log" >&2; die "could not resolve $module@$DISTRIBUTION_VERSION"; }
  log "building the registry $DISTRIBUTION_VERSION (slow on a cold cache)"
  go build -trimpath -ldflags "-s -w" -o "$work/out/registry" "$module/cmd/registry"
  go build -trimpath -ldflags "-s -w" -o "$work/out/htpasswd" ./htpasswd
)
mkdir -p "$bin"
mv -f "$work/out/registry" "$work/out/htpasswd" "$bin/"
complete || die "build finished but binaries are missing from $bin"
log "built in $(($(date +%s) - start))s into $bin"
echo "$bin"
