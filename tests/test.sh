#!/usr/bin/env bash
# The whole test suite: lint, unit tests, snapshot tests and the end-to-end tests against
# a local control plane that this script starts (tests/cluster/up.sh) and stops.
#
# Usage: tests/test.sh [extra cargo test arguments]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
log() { printf '[test] %s\n' "$*" >&2; }

"$root/tests/cluster/prereqs.sh"

log "checking formatting"
cargo fmt --all -- --check

# The control plane first: its one-time Go build needs about 7 GB of scratch space, freed
# when it ends (tests/cluster/testbin.sh), so it never sits beside the Rust build.
bin=$("$root/tests/cluster/testbin.sh")
# The render helper the engines render with (src/helm/render/helper/build.sh: built once,
# cached like the control plane).
helper=$("$root/src/helm/render/helper/build.sh")
# The previous build of wheelhouse, which the upgrade test stops during a wait and this build
# resumes (tests/previous_build.sh: built once, cached; its scratch target is freed).
previous=$("$root/tests/previous_build.sh")

# A cold build of the suite writes about 3.7 GB under target/ (docs/development/prerequisites.md). Say so before
# cargo fails half-way with "No space left on device".
target=${CARGO_TARGET_DIR:-$root/target}
mkdir -p "$target"
free_mb=$(($(df -Pk "$target" | awk 'NR == 2 { print $4 }') / 1024))
if [[ ! -d "$target/debug/deps" ]] && ((free_mb < 7000)); then
  log "error: ${free_mb} MB free under $target; a cold build of the test suite needs about 7000 MB (6.2 GB measured)"
  exit 1
elif ((free_mb < 1024)); then
  log "warning: only ${free_mb} MB free under $target; the build may run out of disk"
fi

log "checking lints"
cargo clippy --all-targets --locked -- -D warnings

cluster=$(mktemp -d "${TMPDIR:-/tmp}/wheelhouse-test.XXXXXX")
trap '"$root/tests/cluster/down.sh" "$cluster"' EXIT
if ! "$root/tests/cluster/up.sh" "$cluster"; then
  log "error: the local control plane did not start, so the end-to-end tests cannot run (see the log above)"
  exit 1
fi

# A second, bare cluster for the releases deployed through `spec.kubeConfig`.
if ! "$root/tests/cluster/up.sh" --bare "$cluster/remote"; then
  log "error: the second (remote) control plane did not start (see the log above)"
  exit 1
fi

export WHEELHOUSE_TEST_KUBECONFIG="$cluster/kubeconfig"
export WHEELHOUSE_TEST_REMOTE_KUBECONFIG="$cluster/remote/kubeconfig"
export WHEELHOUSE_TESTBIN="$bin"
export WHEELHOUSE_RENDER_HELPER="$helper/wheelhouse-render"
export WHEELHOUSE_PREVIOUS_BUILD="$previous"
log "running cargo test against $WHEELHOUSE_TEST_KUBECONFIG"
# Benchmarks (benches/, harness = false) are not tests: they run with tests/bench.sh or
# cargo bench and print figures. clippy above still compiles them.
cargo test --lib --bins --tests --locked --no-fail-fast "$@"
