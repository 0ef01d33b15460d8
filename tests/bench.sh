#!/usr/bin/env bash
# Benchmarks that need the local control plane: starts one, runs the benchmark, stops it.
# Figures are printed; they are measured, not asserted (machines are shared and noisy).
#
# Usage: tests/bench.sh mttr        (WHEELHOUSE_BENCH_RUNS=N for more runs; default 5)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bench=${1:?usage: tests/bench.sh mttr}
"$root/tests/cluster/prereqs.sh"
bin=$("$root/tests/cluster/testbin.sh")
cluster=$(mktemp -d "${TMPDIR:-/tmp}/wheelhouse-bench.XXXXXX")
trap '"$root/tests/cluster/down.sh" "$cluster"' EXIT
"$root/tests/cluster/up.sh" "$cluster"
export WHEELHOUSE_TEST_KUBECONFIG="$cluster/kubeconfig" WHEELHOUSE_TESTBIN="$bin"
cargo bench --locked --bench "$bench"
