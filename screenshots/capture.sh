#!/usr/bin/env bash
# Regenerates the README screenshots from the real application: starts the project's
# local control plane, creates a few HelmReleases in different states, runs wheelhouse
# in a detached tmux, drives it with keys and turns each screen into an SVG.
#
# Usage: screenshots/capture.sh        (needs tmux and python3; ~1 minute)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$root/screenshots"
state=$(mktemp -d /tmp/wheelhouse-screenshots.XXXXXX)
socket="wheelhouse-screenshots-$$"
log() { printf '[screenshots] %s\n' "$*" >&2; }

cleanup() {
  tmux -L "$socket" kill-server 2>/dev/null || true
  "$root/tests/cluster/down.sh" "$state/cluster" >/dev/null 2>&1 || true
  rm -rf "$state"
}
trap cleanup EXIT

log "building wheelhouse"
cargo build --quiet --manifest-path "$root/Cargo.toml"
wheelhouse="${CARGO_TARGET_DIR:-$root/target}/debug/wheelhouse"
testbin=$("$root/tests/cluster/testbin.sh")
# The render helper the dashboard's engine renders with (built once and cached).
helper=$("$root/src/helm/render/helper/build.sh")
"$root/tests/cluster/up.sh" "$state/cluster"
export KUBECONFIG="$state/cluster/kubeconfig"
kubectl="$testbin/kubectl"
"$wheelhouse" crd | "$kubectl" apply --server-side --field-manager wheelhouse -f - >/dev/null
"$kubectl" wait --for condition=Established crd/helmreleases.wheelhouse.dev --timeout 60s >/dev/null

chart="$root/tests/fixtures/charts/tui-app"
release() { # namespace name timeout values-flow-map
  cat <<YAML
---
apiVersion: wheelhouse.dev/v1alpha1
kind: HelmRelease
metadata: {name: $2, namespace: $1}
spec:
  chart: {path: $chart}
  timeout: $3
  values: $4
YAML
}
"$kubectl" create namespace shop >/dev/null
"$kubectl" create namespace data >/dev/null
{
  release shop frontend 5m '{replicas: 2, greeting: welcome}'
  release shop billing 5m '{greeting: invoices}'
  release shop api 10m '{replicas: 3, behavior: never-ready}'
  release shop worker 5m '{behavior: crash-loop}'
  release data queue 5m '{greeting: queue}'
  release data reports 5m '{behavior: image-pull-error}'
  release data ledger 5m '{externalConfig: ledger-settings}'
} | "$kubectl" apply -f - >/dev/null
# The other kinds: a helm CLI release and a Flux HelmRelease (Flux's real controllers).
"$root/tests/cluster/seed-other-kinds.sh" "$state/cluster" shop

shot() { # name cols rows background
  tmux -L "$socket" capture-pane -e -p -t shot > "$state/$1.ans"
  python3 "$out/ansi2svg.py" "$2" "$3" "$4" < "$state/$1.ans" > "$out/$1.svg"
  log "wrote screenshots/$1.svg"
}
keys() { tmux -L "$socket" send-keys -t shot "$@"; sleep 0.6; }
start() { # cols rows theme
  tmux -L "$socket" kill-server 2>/dev/null || true
  sleep 1 # let the old server go before a new one takes the socket
  tmux -L "$socket" -f /dev/null new-session -d -s shot -x "$1" -y "$2" \
    -e "WHEELHOUSE_HELM=$testbin/helm" -e "WHEELHOUSE_RENDER_HELPER=$helper/wheelhouse-render" \
    -e WHEELHOUSE_LOG=off -e TERM=xterm-256color \
    -e "KUBECONFIG=$KUBECONFIG" -e "XDG_CONFIG_HOME=$state/config" -- "$wheelhouse" -A --theme "$3"
}

start 120 30 dark
sleep 12 # installs run, the never-ready wait keeps going
"$kubectl" patch helmreleases.wheelhouse.dev -n shop billing --type merge -p '{"spec":{"suspend":true}}' >/dev/null
# A second revision of frontend, to roll back from (the pin-diff shot).
"$kubectl" patch helmreleases.wheelhouse.dev -n shop frontend --type merge \
  -p '{"spec":{"values":{"replicas":3,"greeting":"welcome back"}}}' >/dev/null
sleep 2
keys j j
shot table 120 30 '#1e1e1e'
keys / ; keys -l api ; keys Enter Enter
sleep 2
shot detail 120 30 '#1e1e1e'
keys m
shot manifest 120 30 '#1e1e1e'
keys Escape
keys / ; keys -l ledger ; keys Enter Enter
sleep 4
shot detail-config 120 30 '#1e1e1e'
keys Escape Escape
keys / ; keys -l search ; keys Enter Enter
sleep 3
shot detail-flux 120 30 '#1e1e1e'
keys Escape Escape
keys / ; keys -l legacy ; keys Enter Enter h
sleep 3 # the revisions load, then j picks the one before the newest
keys j
shot history-helm 120 30 '#1e1e1e'
keys Escape Escape
keys '?'
shot help 120 30 '#1e1e1e'
keys x / ; keys -l frontend ; keys Enter e
keys -l 'extra: [1' ; keys Enter C-s
shot editor-error 120 30 '#1e1e1e'
keys Escape
keys Enter h
sleep 3 # the revisions load; j picks revision 1, b shows what rolling back changes
keys j b
sleep 3
shot pin-diff 120 30 '#1e1e1e'
keys Escape Escape
# An incident freeze of one namespace from the command line (z fills in `freeze 2h `).
keys / ; keys -l data ; keys Enter
keys : ; keys -l 'freeze -n data 2h INC-4211 reports rollout pages on-call' ; keys Enter
sleep 1
keys y
sleep 3
shot freeze-banner 120 30 '#1e1e1e'
keys : ; keys -l 'thaw -n data' ; keys Enter
sleep 1
keys y
# A suspend nobody owns any more: billing's, dated three days back in its change log.
"$kubectl" patch helmreleases.wheelhouse.dev -n shop billing --subresource status --type merge -p \
  "{\"status\":{\"changes\":[{\"at\":\"$(date -u -d '3 days ago' +%Y-%m-%dT%H:%M:%S.000000Z)\",\"kind\":\"suspend\",\"message\":\"suspended: the engine starts nothing on it\",\"by\":\"kubectl-patch\"}]}}" >/dev/null
sleep 3
keys / ; keys -l is:forgotten ; keys Enter
sleep 1
shot forgotten 120 30 '#1e1e1e'
keys Escape

start 80 24 light
sleep 4
shot table-80x24-light 80 24 '#ffffff'
start 120 30 colorblind
sleep 4
shot table-colorblind 120 30 '#1e1e1e'
