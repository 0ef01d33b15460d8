#!/usr/bin/env bash
# Builds the previous build of wheelhouse (its `wheelhouse` and its render helper, from
# the commit pinned below) for the upgrade test, and prints the directory holding both.
# Built once and cached under ~/.cache/wheelhouse/previous/<commit> like the control
# plane; about 8 minutes cold on 2 cores (Rust and Go dependencies), instant after.
#
# The pinned commit is the last build that passed CI before the upgrade test existed; move
# it forward when a build ships, so the test upgrades from what users run.
#
# Usage: tests/previous_build.sh
set -euo pipefail

commit=74a11cbe0599f1430eb523e0331b82d81ccfb8be

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log() { printf '[previous] %s\n' "$*" >&2; }

cache=${XDG_CACHE_HOME:-$HOME/.cache}/wheelhouse/previous/$commit
if [[ -x "$cache/bin/wheelhouse" && -x "$cache/bin/wheelhouse-render" ]]; then
  echo "$cache/bin"
  exit 0
fi

have() { git -C "$root" cat-file -e "$commit^{commit}" 2>/dev/null; }
if ! have && [[ "$(git -C "$root" rev-parse --is-shallow-repository 2>/dev/null)" == true ]] &&
  [[ -n "$(git -C "$root" remote)" ]]; then
  log "this clone is shallow; fetching its history for commit ${commit:0:12}"
  git -C "$root" fetch --quiet --unshallow >&2 || git -C "$root" fetch --quiet "$(git -C "$root" remote | head -n 1)" "$commit" >&2 || true
fi
if ! have; then
  log "error: commit $commit is not in this clone (a shallow clone without a remote to fetch it from?); clone the full history, or fetch it: git fetch --unshallow"
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/wheelhouse-previous.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "building wheelhouse at ${commit:0:12} (the previous build) in $work"
git -C "$root" archive --format=tar "$commit" | tar -x -C "$work"
# Its own target directory: the current build's stays as it is. Removed once the binary is
# copied out (about 3 GB).
(cd "$work" && cargo build --locked --bin wheelhouse --target-dir "$work/target" >&2)
# The render helper's script where that commit keeps it (src/render/helper/ before the
# crate's layers moved it under src/helm/): the path is the pinned tree's, not this one's.
helper_script=
for candidate in src/helm/render/helper/build.sh src/render/helper/build.sh; do
  if [[ -x "$work/$candidate" ]]; then
    helper_script="$work/$candidate"
    break
  fi
done
if [[ -z "$helper_script" ]]; then
  log "error: commit ${commit:0:12} has no render helper build script where one was expected"
  exit 1
fi
helper=$("$helper_script")
mkdir -p "$cache.tmp/bin"
cp "$work/target/debug/wheelhouse" "$helper/wheelhouse-render" "$cache.tmp/bin/"
rm -rf "$cache"
mv "$cache.tmp" "$cache"
log "previous build ready in $cache/bin"
echo "$cache/bin"
