#!/usr/bin/env bash
# Compares the render helper (wheelhouse-render) with the helm CLI it stands in for:
# for every chart directory given (default: tests/fixtures/charts/*), renders a first
# install (seed `[]`) and an upgrade over a seeded revision 1 (deployed) with both, the
# helm CLI run exactly as src/helm/render/helm.rs runs it, and compares manifest, hooks and
# version byte for byte (hooks through `jq -S`). Then it compares the error text of a set
# of failing renders (template failure, missing dependency, library chart, missing chart,
# bad release name, pending previous revision): the helper's `error` must be what helm
# prints after "Error: ".
#
# Usage: src/helm/render/helper/compare.sh [options] [CHART_DIR...]
#   --helm PATH        the helm CLI (default: $WHEELHOUSE_HELM, else helm on PATH)
#   --helper PATH      wheelhouse-render (default: the one build.sh builds)
#   --kubeconfig PATH  the cluster (default: helm's default, $KUBECONFIG or ~/.kube/config)
#   --context NAME     kubeconfig context
#   --namespace NS     namespace rendered into (default: wheelhouse-render-compare)
#   --kubectl PATH     kubectl, to create the namespace and the objects the parity
#                      chart looks up (default: next to helm, else on PATH; skipped if none)
#   --partial          also compare with a dead aggregated APIService present: creates
#                      v1.broken.wheelhouse.dev (no backend) for a few seconds, cluster-wide,
#                      then deletes it. (Its group is stale in aggregated discovery, which
#                      helm's discovery walk, and so the helper's `partial`, does not see;
#                      .Capabilities must still agree.)
#   --bench N          then time N sequential renders of the first chart: helper with a
#                      warm discovery (one token), helper with a fresh token each time, and
#                      the helm CLI; prints medians and the helper's RSS
# Exits 1 if anything differs.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../../.." && pwd)

log() { printf '[compare] %s\n' "$*" >&2; }
die() { printf '[compare] error: %s\n' "$*" >&2; exit 2; }

helm=${WHEELHOUSE_HELM:-helm}
helper=""
kubeconfig=""
context=""
namespace=wheelhouse-render-compare
kubectl=""
partial=false
bench=0
charts=()
while (($#)); do
  case $1 in
    --helm) helm=$2; shift 2 ;;
    --helper) helper=$2; shift 2 ;;
    --kubeconfig) kubeconfig=$2; shift 2 ;;
    --context) context=$2; shift 2 ;;
    --namespace) namespace=$2; shift 2 ;;
    --kubectl) kubectl=$2; shift 2 ;;
    --partial) partial=true; shift ;;
    --bench) bench=$2; shift 2 ;;
    --) shift; charts+=("$@"); break ;;
    -*) die "unknown option $1" ;;
    *) charts+=("$1"); shift ;;
  esac
done
((${#charts[@]})) || charts=("$root"/tests/fixtures/charts/*/)
command -v jq >/dev/null || die "jq is required"
helm=$(command -v "$helm") || die "no helm CLI (--helm or WHEELHOUSE_HELM)"
if [[ -z "$helper" ]]; then
  helper="$("$here/build.sh")/wheelhouse-render"
fi
[[ -x "$helper" ]] || die "$helper is not executable"
if [[ -z "$kubectl" ]]; then
  if [[ -x "$(dirname "$helm")/kubectl" ]]; then
    kubectl="$(dirname "$helm")/kubectl"
  else
    kubectl=$(command -v kubectl || true)
  fi
fi

work=$(mktemp -d)
broken_created=false
cleanup() {
  if $broken_created; then kube delete apiservice v1.broken.wheelhouse.dev >/dev/null 2>&1 || true; fi
  if [[ -n "${HELPER_PID:-}" ]]; then
    exec {HELPER[1]}>&- 2>/dev/null || true
    wait "$HELPER_PID" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# The helm CLI runs as helm.rs runs it: HELM_KUBE* and HELM_NAMESPACE removed.
clean_env=(env)
while IFS= read -r name; do
  if [[ $name == HELM_KUBE* || $name == HELM_NAMESPACE ]]; then clean_env+=(-u "$name"); fi
done < <(compgen -e)
cluster_flags=()
[[ -z "$kubeconfig" ]] || cluster_flags+=(--kubeconfig "$kubeconfig")
[[ -z "$context" ]] || cluster_flags+=(--kube-context "$context")
kube() {
  local args=()
  [[ -z "$kubeconfig" ]] || args+=(--kubeconfig "$kubeconfig")
  [[ -z "$context" ]] || args+=(--context "$context")
  "$kubectl" "${args[@]}" "$@"
}
cluster_json=$(jq -nc --arg k "$kubeconfig" --arg c "$context" '{kubeconfig: $k, context: $c, asUser: "", asGroups: []}')

# helm CLI render: helm_render RELEASE CHART SEED_FILE VALUES_FILE OUT ERR
helm_render() {
  "${clean_env[@]}" HELM_DRIVER=memory HELM_MEMORY_DRIVER_DATA="$3" \
    "$helm" upgrade --install --namespace "$namespace" --values - --reset-values \
    --dry-run=server --skip-crds --disable-openapi-validation --output json \
    "${cluster_flags[@]}" -- "$1" "$2" <"$4" >"$5" 2>"$6"
}

# The helper, one request at a time.
coproc HELPER { exec "$helper"; }
read -r ready <&"${HELPER[0]}" || die "the helper did not start"
[[ $(jq -r .ready <<<"$ready") == true ]] || die "the helper said $ready"
log "helper $(jq -r .helm <<<"$ready"), $("$helm" version --short)"
next_id=0
# helper_render RELEASE CHART PREVIOUS_JSON VALUES_FILE TOKEN OUT
helper_render() {
  next_id=$((next_id + 1))
  jq -nc --argjson id "$next_id" --arg release "$1" --arg ns "$namespace" --arg chart "$2" \
    --argjson previous "$3" --slurpfile values "$4" --argjson cluster "$cluster_json" --arg token "$5" \
    '{id: $id, release: $release, namespace: $ns, chart: $chart, values: $values[0],
      previous: $previous, cluster: $cluster, discovery: $token}' >&"${HELPER[1]}"
  local resp
  read -r resp <&"${HELPER[0]}" || die "the helper exited"
  printf '%s\n' "$resp" >"$6"
  [[ $(jq -r .id "$6") == "$next_id" ]] || die "the helper answered another request: $(head -c 200 "$6")"
}

seed() { # seed RELEASE CHART_NAME CHART_VERSION VERSION STATUS -> the CLI's seed file content
  jq -nc --arg r "$1" --arg ns "$namespace" --arg n "$2" --arg v "$3" --argjson ver "$4" --arg s "$5" \
    '[{name: $r, namespace: $ns, version: $ver, info: {status: $s}, chart: {metadata: {name: $n, version: $v}}}]'
}
previous() { # previous CHART_NAME CHART_VERSION VERSION STATUS -> the request's `previous`
  jq -nc --arg n "$1" --arg v "$2" --argjson ver "$3" --arg s "$4" \
    '{version: $ver, status: $s, chart: $n, chartVersion: $v}'
}

failures=0
report() { # report OK|DIFF WHAT DETAIL
  if [[ $1 == ok ]]; then
    printf 'ok    %s\n' "$2"
  else
    failures=$((failures + 1))
    printf 'DIFF  %s\n%s\n' "$2" "$3" | sed '2,$s/^/      /'
  fi
}

# compare WHAT RELEASE CHART SEED PREVIOUS VALUES_FILE TOKEN
compare() {
  local what=$1 d="$work/case" rc=0
  rm -rf "$d" && mkdir -p "$d"
  printf '%s' "$4" >"$d/seed.json"
  helm_render "$2" "$3" "$d/seed.json" "$6" "$d/cli.json" "$d/cli.err" || rc=$?
  helper_render "$2" "$3" "$5" "$6" "$7" "$d/helper.json"
  if ((rc != 0)); then
    # What helm prints after "Error: " (to the end of stderr).
    sed -n '/^Error: /,$p' "$d/cli.err" | sed '1s/^Error: //' >"$d/cli.error"
    printf '%s' "$(cat "$d/cli.error")" >"$d/cli.error.trim"
    if ! jq -e 'has("error")' "$d/helper.json" >/dev/null; then
      report diff "$what" "helm failed ($(head -c 300 "$d/cli.error.trim")) but the helper rendered"
      return
    fi
    jq -j .error "$d/helper.json" >"$d/helper.error"
    if cmp -s "$d/cli.error.trim" "$d/helper.error"; then
      report ok "$what (error: $(head -c 100 "$d/helper.error" | tr '\n' ' '))"
    else
      report diff "$what" "helm: $(cat "$d/cli.error.trim")
helper: $(cat "$d/helper.error")"
    fi
    return
  fi
  if jq -e 'has("error")' "$d/helper.json" >/dev/null; then
    report diff "$what" "helm rendered but the helper failed: $(jq -r .error "$d/helper.json")"
    return
  fi
  local problems=""
  # helm's JSON leaves out an empty manifest.
  jq -j '.manifest // ""' "$d/cli.json" >"$d/cli.manifest"
  jq -j '.manifest // ""' "$d/helper.json" >"$d/helper.manifest"
  cmp -s "$d/cli.manifest" "$d/helper.manifest" ||
    problems+="manifest differs:"$'\n'"$(diff -u "$d/cli.manifest" "$d/helper.manifest" | head -n 30 || true)"$'\n'
  jq -S '.hooks // []' "$d/cli.json" >"$d/cli.hooks"
  jq -S '.hooks // []' "$d/helper.json" >"$d/helper.hooks"
  cmp -s "$d/cli.hooks" "$d/helper.hooks" ||
    problems+="hooks differ:"$'\n'"$(diff -u "$d/cli.hooks" "$d/helper.hooks" | head -n 30 || true)"$'\n'
  local v1 v2
  v1=$(jq .version "$d/cli.json")
  v2=$(jq .version "$d/helper.json")
  [[ $v1 == "$v2" ]] || problems+="version: helm $v1, helper $v2"$'\n'
  # helm v4.3.1 never prints its "orphaned API service" warning (GetVersionSet drops the
  # error first); the helper reports the condition itself. Should helm ever warn, the
  # helper must say partial too.
  local p1=false p2
  if grep -q "orphaned API service" "$d/cli.err"; then p1=true; fi
  p2=$(jq .partial "$d/helper.json")
  [[ $p1 == false || $p2 == true ]] || problems+="partial discovery: helm warned, the helper says $p2"$'\n'
  if [[ -z $problems ]]; then
    report ok "$what (revision $v1, $(wc -c <"$d/cli.manifest") bytes, $(jq length "$d/cli.hooks") hooks, partial $p2)"
  else
    report diff "$what" "${problems%$'\n'}"
  fi
}

# A release name from a chart directory's name.
release_name() { local n; n=$(basename "$1" | tr 'A-Z_.' 'a-z--'); printf '%s' "${n:0:40}"; }
chart_field() { "$helm" show chart "$1" | sed -n "s/^$2: *//p" | head -n1 | tr -d "\"'"; }

if [[ -n "$kubectl" ]]; then
  kube get namespace "$namespace" >/dev/null 2>&1 || kube create namespace "$namespace" >/dev/null
  # What the parity chart looks up: a ConfigMap, and its password Secret (so the password
  # is the stored one, not a random one that would differ between the two renders).
  kube -n "$namespace" create configmap parity-source --from-literal=token=compare \
    --dry-run=client -o yaml | kube apply -f - >/dev/null
  kube -n "$namespace" create secret generic parity-password --from-literal=password=compare-password \
    --dry-run=client -o yaml | kube apply -f - >/dev/null
else
  log "no kubectl: not creating $namespace or the parity chart's lookup objects"
fi

values="$work/values.json"
jq -nc '{wheelhouseCompare: {int: 3, big: 123456789012, float: 1.5, exp: 1e3, str: "x", bool: true,
  list: [1, "a", null], nested: {"key with space": "v"}}}' >"$values"
token="compare-$$-$RANDOM"

log "comparing ${#charts[@]} charts in namespace $namespace"
for chart in "${charts[@]}"; do
  chart=$(cd "$chart" && pwd)
  release=$(release_name "$chart")
  name=$(chart_field "$chart" name)
  version=$(chart_field "$chart" version)
  compare "$(basename "$chart") install" "$release" "$chart" "[]" null "$values" "$token"
  compare "$(basename "$chart") upgrade" "$release" "$chart" "$(seed "$release" "$name" "$version" 1 deployed)" \
    "$(previous "$name" "$version" 1 deployed)" "$values" "$token"
done

# Failing renders: the error text must be helm's.
log "comparing errors"
bad="$work/charts"
mkdir -p "$bad/fails/templates" "$bad/missing-dep/templates" "$bad/library/templates"
printf 'apiVersion: v2\nname: fails\nversion: 0.1.0\n' >"$bad/fails/Chart.yaml"
printf '{{- if .Values.fail }}{{ fail "compare: told to fail" }}{{ end }}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n' \
  >"$bad/fails/templates/cm.yaml"
printf 'apiVersion: v2\nname: missing-dep\nversion: 0.1.0\ndependencies:\n  - name: absent\n    version: 1.0.0\n    repository: https://charts.invalid\n' \
  >"$bad/missing-dep/Chart.yaml"
printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n' >"$bad/missing-dep/templates/cm.yaml"
printf 'apiVersion: v2\nname: library\ntype: library\nversion: 0.1.0\n' >"$bad/library/Chart.yaml"
printf '{{- define "library.x" }}x{{ end }}\n' >"$bad/library/templates/_x.tpl"
failing="$work/fail.json"
echo '{"fail": true}' >"$failing"
for c in fails missing-dep library; do
  v="$values"
  [[ $c == fails ]] && v="$failing"
  compare "chart $c install" "$c" "$bad/$c" "[]" null "$v" "$token"
  compare "chart $c upgrade" "$c" "$bad/$c" "$(seed "$c" "$c" 0.1.0 3 failed)" "$(previous "$c" 0.1.0 3 failed)" "$v" "$token"
done
compare "error: missing chart install" web /nonexistent/chart "[]" null "$values" "$token"
compare "error: missing chart upgrade" web /nonexistent/chart "$(seed web x 1 1 deployed)" "$(previous x 1 1 deployed)" "$values" "$token"
compare "error: bad release name" Bad_Name "$bad/fails" "[]" null "$values" "$token"
compare "error: pending previous" fails "$bad/fails" "$(seed fails fails 0.1.0 2 pending-upgrade)" \
  "$(previous fails 0.1.0 2 pending-upgrade)" "$values" "$token"
compare "uninstalled previous" fails "$bad/fails" "$(seed fails fails 0.1.0 2 uninstalled)" \
  "$(previous fails 0.1.0 2 uninstalled)" "$values" "$token"

if $partial; then
  [[ -n "$kubectl" ]] || die "--partial needs kubectl"
  log "dead APIService: creating v1.broken.wheelhouse.dev (no backend)"
  jq -n '{apiVersion: "apiregistration.k8s.io/v1", kind: "APIService", metadata: {name: "v1.broken.wheelhouse.dev"},
    spec: {group: "broken.wheelhouse.dev", version: "v1", groupPriorityMinimum: 100, versionPriority: 10,
      insecureSkipTLSVerify: true, service: {name: "nowhere", namespace: "default", port: 443}}}' |
    kube apply -f - >/dev/null
  broken_created=true
  sleep 3
  chart=$(cd "${charts[0]}" && pwd)
  compare "dead APIService: $(basename "$chart") install" "$(release_name "$chart")" "$chart" "[]" null "$values" "partial-$$-1"
  kube delete apiservice v1.broken.wheelhouse.dev >/dev/null
  broken_created=false
  sleep 1
  compare "APIService gone: $(basename "$chart") install" "$(release_name "$chart")" "$chart" "[]" null "$values" "partial-$$-2"
fi

if ((bench > 0)); then
  chart=$(cd "${charts[0]}" && pwd)
  release=$(release_name "$chart")
  median() { sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
  ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f\n", (b - a) * 1000 }'; }
  log "timing $bench renders of $(basename "$chart") each way"
  : >"$work/warm" && : >"$work/fresh" && : >"$work/cli"
  # Requests are built before the clock starts; only the round trip is timed.
  request_line() { # request_line ID TOKEN
    jq -nc --argjson id "$1" --arg release "$release" --arg ns "$namespace" --arg chart "$chart" \
      --slurpfile values "$values" --argjson cluster "$cluster_json" --arg token "$2" \
      '{id: $id, release: $release, namespace: $ns, chart: $chart, values: $values[0],
        previous: null, cluster: $cluster, discovery: $token}'
  }
  timed() { # timed FILE TOKEN...: one round trip per token, milliseconds appended to FILE
    local file=$1 token lines=() line resp t0
    shift
    for token in "$@"; do
      next_id=$((next_id + 1))
      lines+=("$(request_line "$next_id" "$token")")
    done
    for line in "${lines[@]}"; do
      t0=$EPOCHREALTIME
      printf '%s\n' "$line" >&"${HELPER[1]}"
      read -r resp <&"${HELPER[0]}" || die "the helper exited"
      ms "$t0" "$EPOCHREALTIME" >>"$file"
      [[ $resp == *'"manifest"'* ]] || die "the helper failed: ${resp:0:300}"
    done
  }
  timed "$work/prime" bench-warm # fills the cache
  warm=() fresh=()
  for ((i = 0; i < bench; i++)); do warm+=(bench-warm) fresh+=("bench-fresh-$i"); done
  timed "$work/warm" "${warm[@]}"
  timed "$work/fresh" "${fresh[@]}"
  echo '[]' >"$work/seed.json"
  for ((i = 0; i < bench; i++)); do
    t0=$EPOCHREALTIME
    helm_render "$release" "$chart" "$work/seed.json" "$values" "$work/out.json" "$work/err" ||
      die "helm failed: $(cat "$work/err")"
    ms "$t0" "$EPOCHREALTIME" >>"$work/cli"
  done
  printf 'median ms per render of %s over %d: helper warm %s, helper fresh token %s, helm CLI %s\n' \
    "$(basename "$chart")" "$bench" "$(median <"$work/warm")" "$(median <"$work/fresh")" "$(median <"$work/cli")"
  printf 'helper RSS after %d renders: %s kB\n' "$next_id" "$(ps -o rss= -p "$HELPER_PID" | tr -d ' ')"
fi

if ((failures)); then
  log "$failures difference(s)"
  exit 1
fi
log "all identical"
