#!/usr/bin/env bash
# Benchmarks that need the local control plane: starts one, runs the benchmark, stops it.
# Figures are printed; they are measured, not asserted (machines are shared and noisy).
#
# Usage: tests/bench.sh mttr|mttr-busy|render|handover|scale|dashboard-live|fleet|inventory|drift|timeline|flux-compare
#   mttr    time to recovery, with where its time goes, and fail-fast
#           (WHEELHOUSE_BENCH_RUNS=N for more runs; default 5), then the table of fixes
#           by spec, valuesFrom, OCI chart version and Git commit for a waiting and a
#           failed release, idle, p50/p99 to the fix's object and to Ready, Flux beside it
#           for the spec and OCI rows (WHEELHOUSE_BENCH_TABLE_RUNS; default 10)
#           (WHEELHOUSE_BENCH_PARTS=steps,table,flux chooses the parts;
#           WHEELHOUSE_BENCH_FLUX_RUNS Flux's runs a row, default 3)
#   mttr-busy  the same table while 1,000 releases upgrade at once
#           (WHEELHOUSE_BENCH_RELEASES sets the count)
#   render  one render of the webapp chart: the render helper (discovery warm, as the
#           engine renders, discovery afresh) against the helm CLI (default 50 runs)
#   handover  takeover after SIGTERM and after kill -9 of the leading controller, and a
#           dead aggregated API healing to the held-up release Ready (default 3 runs)
#   scale   1,000 releases beside 2,000 Secrets and 2,000 ConfigMaps: time to Ready, peak
#           RSS, CPU and idle CPU of the real controller process and its renders
#           (WHEELHOUSE_BENCH_RENDERER=helm for the helm CLI; WHEELHOUSE_BENCH_RELEASES,
#           WHEELHOUSE_BENCH_NAMESPACES, WHEELHOUSE_BENCH_SECRETS, WHEELHOUSE_BENCH_CONFIGMAPS
#           set other counts), then a restart with every release in place
#   dashboard-live  the real dashboard in tmux at 1,000 and 5,000 releases, engine on and
#           --readonly: first rows, full list, change to screen, idle CPU, RSS
#           (WHEELHOUSE_BENCH_SIZES=1000,5000 chooses the sizes; WHEELHOUSE_BENCH_KINDS=all
#           makes them wheelhouse, Flux and helm CLI releases), and the Timeline's first screen
#   fleet   the dashboard over a fleet of real API servers it starts itself
#           (WHEELHOUSE_BENCH_CLUSTERS, default 10, x WHEELHOUSE_BENCH_RELEASES, default
#           2,000): first screen against the slowest cluster's list, change to screen with
#           every cluster answering and with one stopped (SIGSTOP), RSS, quit
#   inventory  2,000 helm CLI releases (4,000 storage records): the dashboard's inventory
#           listing and reading them against a whole-record LIST in the same run
#           (WHEELHOUSE_BENCH_RELEASES sets the count)
#   drift   kubectl scale -> Drifted and -> corrected, helm rollback by hand ->
#           ExternalRevision, among 300 releases (WHEELHOUSE_BENCH_RELEASES, _RUNS)
#   flux-compare [N]  the same N releases (default 1,000) under Flux's helm-controller +
#           source-controller and under wheelhouse, one after the other, at each
#           engine's defaults and at equal concurrency (WHEELHOUSE_BENCH_EQUAL, default
#           16): time to all Ready, CPU seconds and peak RSS of each side, with ratios
#   timeline  the dashboard's Timeline over 5,000 releases of 10 revisions: first screen,
#           memory it adds, a new revision to the top row, and `wheelhouse timeline`'s
#           read of the window (WHEELHOUSE_BENCH_RELEASES, WHEELHOUSE_BENCH_REVISIONS)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
usage="usage: tests/bench.sh mttr|mttr-busy|render|handover|scale|dashboard-live|fleet|inventory|drift|timeline|flux-compare"
bench=${1:?$usage}
case "$bench" in
  mttr | mttr-busy | render | handover | scale | dashboard-live | fleet | inventory | drift | timeline | flux-compare) ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
"$root/tests/cluster/prereqs.sh"
bin=$("$root/tests/cluster/testbin.sh")
cluster=$(mktemp -d "${TMPDIR:-/tmp}/wheelhouse-bench.XXXXXX")
trap '"$root/tests/cluster/down.sh" "$cluster"' EXIT
"$root/tests/cluster/up.sh" "$cluster"
helper=$("$root/src/helm/render/helper/build.sh")
export WHEELHOUSE_TEST_KUBECONFIG="$cluster/kubeconfig" WHEELHOUSE_TESTBIN="$bin"
export WHEELHOUSE_RENDER_HELPER="$helper/wheelhouse-render"
shift
cargo bench --locked --bench "${bench//-/_}" -- "$@"
