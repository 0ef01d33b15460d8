#!/usr/bin/env bash
# Stops exactly the processes tests/cluster/up.sh recorded in DIR/pids, newest first,
# then removes DIR (or keeps its data with --keep).
#
# Usage: tests/cluster/down.sh [--keep] DIR
set -euo pipefail

log() { printf '[down] %s\n' "$*" >&2; }

keep=false
if [[ "${1:-}" == "--keep" ]]; then
  keep=true
  shift
fi
[[ $# -eq 1 ]] || { log "usage: $0 [--keep] DIR"; exit 2; }
dir=$1
[[ -d "$dir" ]] || { log "nothing at $dir"; exit 0; }
dir=$(cd "$dir" && pwd)

# Only signal a PID that still runs what we started (PIDs get reused): the binary NAME
# (helm-controller-lockdown runs the binary `helm-controller`), or a command naming a file
# in DIR (registry-tls runs the binary `registry`).
ours() {
  [[ -r "/proc/$2/cmdline" ]] || return 1
  local cmdline
  cmdline=$(tr '\0' ' ' <"/proc/$2/cmdline")
  [[ "$cmdline" == *"/${1%-lockdown} "* || "$cmdline" == *" $dir/"* ]]
}

# Sends SIGTERM to every given "name pid" at once, waits up to 15s, then SIGKILLs.
stop() {
  local -a pids=()
  local name pid
  for entry in "$@"; do
    read -r name pid <<<"$entry"
    if ours "$name" "$pid"; then
      kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
    fi
  done
  for _ in $(seq 1 150); do
    local left=()
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && left+=("$pid"); done
    pids=("${left[@]}")
    ((${#pids[@]})) || return 0
    sleep 0.1
  done
  log "still running after SIGTERM: ${pids[*]}; killing"
  kill -KILL "${pids[@]}" 2>/dev/null || true
}

# The bare "remote" cluster test.sh starts inside DIR (tests/cluster/up.sh --bare).
if [[ -d "$dir/remote" ]]; then
  if $keep; then "$0" --keep "$dir/remote"; else "$0" "$dir/remote"; fi
fi

if [[ -f "$dir/pids" ]]; then
  # Everything that talks to etcd first, etcd last, so nothing logs a lost store.
  mapfile -t others < <(grep -v '^etcd ' "$dir/pids" || true)
  mapfile -t etcd < <(grep '^etcd ' "$dir/pids" || true)
  ((${#others[@]} == 0)) || stop "${others[@]}"
  ((${#etcd[@]} == 0)) || stop "${etcd[@]}"
  rm -f "$dir/pids"
fi

if $keep; then
  log "stopped; data kept in $dir"
else
  rm -rf "$dir"
  log "stopped and removed $dir"
fi
