#!/usr/bin/env bash
# The README's run command: opens wheelhouse on your cluster, or, when no cluster is
# configured (no $KUBECONFIG and no ~/.kube/config), on the project's local control
# plane, which it starts (tests/cluster/up.sh) with the HelmRelease CRD and the sample
# releases in tests/fixtures/samples/ (one healthy, one stuck, one suspended), a release
# made by the helm CLI and a Flux HelmRelease (tests/cluster/seed-other-kinds.sh).
# The local cluster keeps running between runs; stop it with `tests/run.sh --down`.
#
# Usage: tests/run.sh [--local] [--down] [wheelhouse arguments...]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log() { printf '[run] %s\n' "$*" >&2; }
state="${XDG_STATE_HOME:-$HOME/.local/state}/wheelhouse/local-cluster"

local_cluster=false
case "${1:-}" in
  --down) exec "$root/tests/cluster/down.sh" "$state" ;;
  --local) local_cluster=true; shift ;;
esac
if [[ -z "${KUBECONFIG:-}" && ! -f "$HOME/.kube/config" ]]; then
  local_cluster=true
fi

"$root/tests/cluster/prereqs.sh"
log "building wheelhouse (release)"
cargo build --release --locked --quiet --manifest-path "$root/Cargo.toml"
wheelhouse="${CARGO_TARGET_DIR:-$root/target}/release/wheelhouse"

if $local_cluster; then
  log "no cluster configured: using the local control plane in $state"
  "$root/tests/cluster/up.sh" "$state"
  export KUBECONFIG="$state/kubeconfig"
  kubectl="$("$root/tests/cluster/testbin.sh")/kubectl"
  "$wheelhouse" crd | "$kubectl" apply --server-side --field-manager wheelhouse -f - >/dev/null
  "$kubectl" wait --for condition=Established crd/helmreleases.wheelhouse.dev --timeout 60s >/dev/null
  # Sample releases, created once; later runs leave your changes to them alone.
  for sample in "$root"/tests/fixtures/samples/*.yaml; do
    "$kubectl" create --save-config -f "$sample" >/dev/null 2>&1 || true
  done
  # The other kinds the dashboard lists: a helm CLI release and a Flux HelmRelease.
  "$root/tests/cluster/seed-other-kinds.sh" "$state" default
fi

# Chart paths in the samples are relative to the repository root: that is the chart root
# of this engine (relative paths never resolve against the working directory).
export WHEELHOUSE_CHART_ROOT="${WHEELHOUSE_CHART_ROOT:-$root}"
if [[ -z "${WHEELHOUSE_RENDER_HELPER:-}" ]]; then
  # The engine renders charts with its render helper (built once, cached).
  export WHEELHOUSE_RENDER_HELPER="$("$root/src/helm/render/helper/build.sh")/wheelhouse-render"
fi
if [[ -z "${WHEELHOUSE_HELM:-}" ]] && ! command -v helm >/dev/null; then
  # `--renderer helm` renders with the helm CLI: the pinned one the test binaries include.
  export WHEELHOUSE_HELM="$("$root/tests/cluster/testbin.sh")/helm"
fi
exec "$wheelhouse" "$@"
