#!/usr/bin/env bash
# Adds the two other kinds of Helm release the dashboard lists to a local control plane:
# a release made by the helm CLI (`legacy`, two revisions) and a Flux HelmRelease
# (`search`) that Flux's real helm-controller installs from a Helm repository served on
# 127.0.0.1 (a python3 http.server over `helm package` + `helm repo index`, recorded in
# DIR/pids so down.sh stops it). Both use the tui-app test chart. Idempotent: what exists
# is left alone.
#
# Usage: tests/cluster/seed-other-kinds.sh DIR NAMESPACE   (DIR of tests/cluster/up.sh)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
log() { printf '[seed] %s\n' "$*" >&2; }
[[ $# -eq 2 ]] || { log "usage: $0 DIR NAMESPACE"; exit 2; }
dir=$(cd "$1" && pwd)
ns=$2
bin=$("$here/testbin.sh")
kubectl=("$bin/kubectl" --kubeconfig "$dir/kubeconfig")
helm=("$bin/helm" --kubeconfig "$dir/kubeconfig" --namespace "$ns")
chart="$root/tests/fixtures/charts/tui-app"
# helm keeps its repository and cache files out of the user's home.
export HELM_CONFIG_HOME="$dir/helm/config" HELM_CACHE_HOME="$dir/helm/cache" HELM_DATA_HOME="$dir/helm/data"

"${kubectl[@]}" get namespace "$ns" >/dev/null 2>&1 || "${kubectl[@]}" create namespace "$ns" >/dev/null

if ! "${helm[@]}" status legacy >/dev/null 2>&1; then
  log "helm install legacy (and one upgrade) in $ns"
  "${helm[@]}" install legacy "$chart" --set greeting=first >/dev/null
  "${helm[@]}" upgrade legacy "$chart" --set greeting=second,replicas=2 >/dev/null
fi

repo="$dir/chart-repo"
alive() { [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null; }
pid=$(awk '$1 == "python3" { print $2 }' "$dir/pids" 2>/dev/null | tail -n 1)
if ! alive "$pid"; then
  mkdir -p "$repo"
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$bin/helm" package "$chart" --destination "$repo" >/dev/null
  "$bin/helm" repo index "$repo" --url "http://127.0.0.1:$port" >/dev/null
  setsid "$(command -v python3)" -m http.server --bind 127.0.0.1 --directory "$repo" "$port" \
    </dev/null >>"$dir/logs/chart-repo.log" 2>&1 &
  echo "python3 $!" >>"$dir/pids"
  echo "$port" >"$repo/port"
fi
port=$(cat "$repo/port")

log "Flux HelmRepository and HelmRelease search in $ns"
"${kubectl[@]}" apply --server-side --field-manager seed -f - >/dev/null <<YAML
apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata: {name: local-charts, namespace: $ns}
spec: {url: "http://127.0.0.1:$port", interval: 1m}
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: search, namespace: $ns}
spec:
  interval: 10m
  chart:
    spec:
      chart: tui-app
      version: 0.1.0
      sourceRef: {kind: HelmRepository, name: local-charts}
  values: {greeting: search, replicas: 2}
YAML
