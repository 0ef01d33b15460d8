#!/usr/bin/env bash
# Starts a local Kubernetes control plane on 127.0.0.1 without containers:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (one fake node),
# Flux's source-controller and helm-controller (watching every namespace) with their CRDs,
# two OCI registries (plain HTTP; TLS with basic auth) and a Git server (anonymous smart
# HTTP; HTTPS with basic or bearer auth; SSH with a public key) for the chart-source tests.
#
# Usage: tests/cluster/up.sh [--bare] DIR
#   --bare: the Kubernetes processes only (etcd, kube-apiserver, kube-controller-manager,
#   kube-scheduler, kwok), without Flux, registries or the Git server: the "remote"
#   cluster the tests of `spec.kubeConfig` deploy to (tests/test.sh starts one in
#   DIR/remote beside the main one, and down.sh stops it with the main one).
#   DIR holds everything of this cluster: certificates, etcd data, logs, the PIDs of the
#   processes started (DIR/pids, read by down.sh) and DIR/kubeconfig. Returns once the
#   API answers, the fake node is Ready, the default ServiceAccount exists and the
#   registries and the Git server answer. What tests need to reach the registries is in
#   DIR/registry.env, and the Git server in DIR/git.env (its repositories root, URLs, CA,
#   credentials, SSH identity and known_hosts files).
#   Running it again on a DIR whose cluster is up does nothing; on a stopped DIR it
#   restarts the cluster with its data.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log() { printf '[up] %s\n' "$*" >&2; }
die() { printf '[up] error: %s\n' "$*" >&2; exit 1; }

bare=false
if [[ "${1:-}" == "--bare" ]]; then
  bare=true
  shift
fi
[[ $# -eq 1 ]] || die "usage: $0 [--bare] DIR"
mkdir -p "$1"
dir=$(cd "$1" && pwd)
bin=$("$here/testbin.sh")
if ! $bare; then
  fluxbin=$("$here/flux.sh")
  registrybin=$("$here/registry.sh")
  gitserverbin=$("$here/gitserver.sh")
fi
kubectl=("$bin/kubectl" --kubeconfig "$dir/kubeconfig")

started=$EPOCHREALTIME
elapsed() { printf "%.1fs" "$(python3 -c "print($EPOCHREALTIME - $started)")"; }

alive() { [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null; }

# Already up? Then there is nothing to do.
if [[ -f "$dir/pids" && -f "$dir/kubeconfig" ]]; then
  all_alive=true
  while read -r _ pid; do alive "$pid" || all_alive=false; done <"$dir/pids"
  if $all_alive && "${kubectl[@]}" get --raw /readyz >/dev/null 2>&1; then
    log "already up ($dir)"
    exit 0
  fi
  log "found a stopped or partial cluster in $dir; stopping its leftovers and restarting"
  "$here/down.sh" --keep "$dir"
fi

mkdir -p "$dir/pki" "$dir/logs" "$dir/etcd"
: >"$dir/pids"

# Stop what this run started if anything below fails, and show why.
on_error() {
  local code=$?
  log "failed after $(elapsed); recent logs:"
  for f in "$dir"/logs/*.log; do
    [[ -s "$f" ]] || continue
    printf -- '--- %s\n' "$f" >&2
    tail -n 15 "$f" >&2
  done
  "$here/down.sh" --keep "$dir" || true
  exit "$code"
}
trap on_error ERR

# --- ports -------------------------------------------------------------------------------
# Reuse the ports of an earlier run of this DIR (etcd remembers its peer URL), else pick
# free ones: bind to port 0 and read what the kernel chose.
if [[ ! -f "$dir/ports.env" ]]; then
  read -r p1 p2 p3 p4 < <(python3 - <<'PY'
import socket
socks = [socket.socket() for _ in range(4)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])
PY
)
  printf 'ETCD_CLIENT_PORT=%s\nETCD_PEER_PORT=%s\nAPISERVER_PORT=%s\nKWOK_NODE_PORT=%s\n' \
    "$p1" "$p2" "$p3" "$p4" >"$dir/ports.env"
fi
# Ports added since a DIR was first started are picked and remembered the same way, all in
# one process holding every socket open: separate picks may get the same port back.
missing=()
for var in FLUX_STORAGE_PORT FLUX_SOURCE_HEALTH_PORT FLUX_HELM_HEALTH_PORT FLUX_LOCKED_HEALTH_PORT REGISTRY_PORT REGISTRY_TLS_PORT \
  GIT_HTTP_PORT GIT_HTTPS_PORT GIT_SSH_PORT; do
  grep -q "^$var=" "$dir/ports.env" || missing+=("$var")
done
if ((${#missing[@]})); then
  python3 - "$dir/ports.env" "${missing[@]}" <<'PY' >>"$dir/ports.env"
import socket, sys
taken = {int(l.split("=")[1]) for l in open(sys.argv[1]) if "=" in l}
socks = []
for var in sys.argv[2:]:
    while True:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        port = s.getsockname()[1]
        if port not in taken:
            taken.add(port)
            print(f"{var}={port}")
            break
PY
fi
# shellcheck source=/dev/null
source "$dir/ports.env"
for port in "$ETCD_CLIENT_PORT" "$ETCD_PEER_PORT" "$APISERVER_PORT"; do
  if ss -Hltn "sport = :$port" | grep -q .; then
    die "port $port on 127.0.0.1 is taken; remove $dir/ports.env to pick new ports"
  fi
done

# --- certificates --------------------------------------------------------------------------
pki="$dir/pki"
if [[ ! -f "$pki/admin.crt" ]]; then
  log "creating certificates"
  ossl() { openssl "$@" 2>>"$dir/logs/openssl.log"; }
  ossl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=wheelhouse-local-ca" \
    -keyout "$pki/ca.key" -out "$pki/ca.crt"
  ossl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
    -keyout "$pki/apiserver.key" -out "$pki/apiserver.csr"
  printf 'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' >"$pki/apiserver.ext"
  ossl x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
    -CAcreateserial -days 3650 -extfile "$pki/apiserver.ext" -out "$pki/apiserver.crt"
  # One client identity in system:masters for the local components and for tests.
  ossl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=wheelhouse-admin" \
    -keyout "$pki/admin.key" -out "$pki/admin.csr"
  printf 'extendedKeyUsage=clientAuth\n' >"$pki/admin.ext"
  ossl x509 -req -in "$pki/admin.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
    -CAcreateserial -days 3650 -extfile "$pki/admin.ext" -out "$pki/admin.crt"
  ossl genrsa -out "$pki/sa.key" 2048
  ossl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub"
fi

# server_cert NAME DNS: $pki/NAME.crt and .key for 127.0.0.1 and DNS, signed by our CA
# (made once per DIR).
server_cert() {
  local name=$1 dns=$2
  [[ -f "$pki/$name.crt" ]] && return 0
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$dns" \
    -keyout "$pki/$name.key" -out "$pki/$name.csr" 2>>"$dir/logs/openssl.log"
  printf 'subjectAltName=IP:127.0.0.1,DNS:%s\nextendedKeyUsage=serverAuth\n' "$dns" >"$pki/$name.ext"
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
    -CAcreateserial -days 3650 -extfile "$pki/$name.ext" -out "$pki/$name.crt" 2>>"$dir/logs/openssl.log"
}

# kwok serves pod logs to the API server as a kubelet would, over TLS verified with our CA.
server_cert kwok kwok-node-0

# What every fake pod's container logs, in the CRI log format a kubelet reads
# (`<RFC 3339 time> stdout F <line>`): 300 numbered lines now, and 50 from before its last
# restart (`previous`), so a tail of 200 and the previous logs can be told apart.
mkdir -p "$dir/pod-logs"
for i in $(seq 1 300); do printf '2026-01-01T00:%02d:%02d.000000000Z stdout F current line %03d\n' $((i / 60)) $((i % 60)) "$i"; done >"$dir/pod-logs/current.log"
for i in $(seq 1 50); do printf '2025-12-31T23:59:%02d.000000000Z stderr F previous line %03d\n' "$i" "$i"; done >"$dir/pod-logs/previous.log"
cat >"$dir/kwok-logs.yaml" <<YAML
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata: {name: every-pod}
spec:
  logs:
  - logsFile: $dir/pod-logs/current.log
    previousLogsFile: $dir/pod-logs/previous.log
    follow: true
YAML

b64() { base64 -w0 <"$1"; }
cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: wheelhouse-local
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $(b64 "$pki/ca.crt")
users:
- name: wheelhouse-admin
  user:
    client-certificate-data: $(b64 "$pki/admin.crt")
    client-key-data: $(b64 "$pki/admin.key")
contexts:
- name: wheelhouse-local
  context: {cluster: wheelhouse-local, user: wheelhouse-admin, namespace: default}
current-context: wheelhouse-local
EOF
chmod 600 "$dir/kubeconfig"

# --- processes -----------------------------------------------------------------------------
# setsid: a Ctrl-C in the terminal that ran `up` (or the dashboard) must not stop the
# cluster; down.sh stops it by the PIDs recorded here.
start() {
  local name=$1
  shift
  setsid "$@" </dev/null >>"$dir/logs/$name.log" 2>&1 &
  echo "$name $!" >>"$dir/pids"
}

wait_for() {
  local what=$1 timeout=$2
  shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    while read -r name pid; do
      if ! alive "$pid"; then
        tail -n 20 "$dir/logs/$name.log" >&2 || true
        die "$name exited while waiting for $what (its log's last lines above; all of it in $dir/logs/$name.log)"
      fi
    done <"$dir/pids"
    ((SECONDS < deadline)) || die "timed out after ${timeout}s waiting for $what"
    sleep 0.2
  done
}

log "starting etcd"
start etcd "$bin/etcd" \
  --name local --data-dir "$dir/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
  --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "local=http://127.0.0.1:$ETCD_PEER_PORT" \
  --unsafe-no-fsync --log-level warn
wait_for etcd 30 curl -sf "http://127.0.0.1:$ETCD_CLIENT_PORT/health"

log "starting kube-apiserver"
# --endpoint-reconciler-type=none: the `kubernetes` Service may not point at loopback.
# --service-cluster-ip-range: a /16 (65,534 Services, the `kubernetes` Service at 10.0.0.1
# as in the certificate above), so scale benchmarks with 1,000 releases do not run out.
start kube-apiserver "$bin/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$ETCD_CLIENT_PORT" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$APISERVER_PORT" \
  --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --client-ca-file "$pki/ca.crt" \
  --service-account-key-file "$pki/sa.pub" \
  --service-account-signing-key-file "$pki/sa.key" \
  --service-account-issuer https://kubernetes.default.svc \
  --service-cluster-ip-range 10.0.0.0/16 \
  --authorization-mode RBAC \
  --kubelet-certificate-authority "$pki/ca.crt" \
  --kubelet-client-certificate "$pki/admin.crt" --kubelet-client-key "$pki/admin.key" \
  --kubelet-preferred-address-types InternalIP \
  --endpoint-reconciler-type none \
  --allow-privileged
wait_for "the API server" 90 "${kubectl[@]}" get --raw /readyz

log "starting kube-controller-manager and kube-scheduler"
start kube-controller-manager "$bin/kube-controller-manager" \
  --kubeconfig "$dir/kubeconfig" \
  --bind-address 127.0.0.1 --secure-port 0 \
  --leader-elect=false \
  --service-account-private-key-file "$pki/sa.key" \
  --root-ca-file "$pki/ca.crt" \
  --use-service-account-credentials=false \
  --node-monitor-grace-period 120s \
  --kube-api-qps 200 --kube-api-burst 400 \
  --controllers '*,-nodeipam,-service-lb-controller,-cloud-node-lifecycle'
# Both would otherwise hold themselves to 20 (50) API requests a second: at 1,000 releases
# the Deployment controller's client limit, not the reconciler, set the pace of Ready
# (4.1 releases/s whatever renders; tests/bench.sh scale, docs/benchmarks/scale.md).
start kube-scheduler "$bin/kube-scheduler" \
  --kubeconfig "$dir/kubeconfig" \
  --bind-address 127.0.0.1 --secure-port 0 \
  --kube-api-qps 200 --kube-api-burst 400 \
  --leader-elect=false

log "starting kwok"
start kwok "$bin/kwok" \
  --kubeconfig "$dir/kubeconfig" \
  --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
  --config "$here/kwok-stages.yaml" --config "$dir/kwok-logs.yaml" \
  --server-address "127.0.0.1:$KWOK_NODE_PORT" \
  --tls-cert-file "$pki/kwok.crt" --tls-private-key-file "$pki/kwok.key" \
  --node-lease-duration-seconds 40 \
  --node-ip 127.0.0.1 --node-port "$KWOK_NODE_PORT" \
  --cidr 10.244.0.0/16

# Room for 20,000 pods: the scale benchmark's 10,000 releases run a pod each, beside
# whatever else the cluster runs (the default of 110 a node would stop them at 110).
"${kubectl[@]}" apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-0
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/hostname: kwok-node-0
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
status:
  allocatable: {cpu: "64", memory: 256Gi, pods: "20000"}
  capacity: {cpu: "64", memory: 256Gi, pods: "20000"}
EOF
wait_for "the fake node to be Ready" 60 "${kubectl[@]}" wait --for=condition=Ready node/kwok-node-0 --timeout=1s
wait_for "the default ServiceAccount" 60 "${kubectl[@]}" get serviceaccount default -n default

if $bare; then
  trap - ERR
  log "up (bare) in $(elapsed): export KUBECONFIG=$dir/kubeconfig"
  exit 0
fi

# Flux: its CRDs, its namespace, and both controllers as local processes. source-controller
# serves chart artifacts to helm-controller on 127.0.0.1. No leader election (one of each),
# metrics off, and the health probes on ports of their own so two controllers fit one host.
# helm-controller runs with CancelHealthCheckOnNewRevision, the gate under which a new
# revision (a reconcile request among them) cancels its running health check.
log "starting Flux source-controller and helm-controller"
"${kubectl[@]}" apply --server-side --force-conflicts -f "$fluxbin/crds" >/dev/null
# A controller that starts before its kinds are served exits ("no matches for kind").
"${kubectl[@]}" wait --for condition=Established --timeout 60s \
  crd/helmreleases.helm.toolkit.fluxcd.io crd/helmrepositories.source.toolkit.fluxcd.io \
  crd/helmcharts.source.toolkit.fluxcd.io crd/gitrepositories.source.toolkit.fluxcd.io \
  crd/ocirepositories.source.toolkit.fluxcd.io crd/buckets.source.toolkit.fluxcd.io \
  crd/externalartifacts.source.toolkit.fluxcd.io >/dev/null
"${kubectl[@]}" get namespace flux-system >/dev/null 2>&1 || "${kubectl[@]}" create namespace flux-system >/dev/null
mkdir -p "$dir/flux/storage"
flux_env=(env KUBECONFIG="$dir/kubeconfig" RUNTIME_NAMESPACE=flux-system)
start source-controller "${flux_env[@]}" "$fluxbin/source-controller" \
  --storage-path "$dir/flux/storage" \
  --storage-addr "127.0.0.1:$FLUX_STORAGE_PORT" \
  --storage-adv-addr "127.0.0.1:$FLUX_STORAGE_PORT" \
  --metrics-addr 0 --health-addr "127.0.0.1:$FLUX_SOURCE_HEALTH_PORT" \
  --log-level info --log-encoding console
# Two helm-controllers, as Flux shards them: the unsharded one, and the shard `lockdown`
# (HelmReleases labelled sharding.fluxcd.io/key: lockdown) run with Flux's multi-tenancy
# lockdown, for the tenancy tests that compare wheelhouse's with Flux's.
start helm-controller "${flux_env[@]}" "$fluxbin/helm-controller" \
  --metrics-addr 0 --health-addr "127.0.0.1:$FLUX_HELM_HEALTH_PORT" \
  --feature-gates CancelHealthCheckOnNewRevision=true \
  --watch-label-selector '!sharding.fluxcd.io/key' \
  --log-level info --log-encoding console
start helm-controller-lockdown "${flux_env[@]}" "$fluxbin/helm-controller" \
  --metrics-addr 0 --health-addr "127.0.0.1:$FLUX_LOCKED_HEALTH_PORT" \
  --watch-label-selector 'sharding.fluxcd.io/key=lockdown' \
  --default-service-account tenant-deployer --no-cross-namespace-refs \
  --log-level info --log-encoding console
wait_for "Flux's source-controller" 60 curl -sf "http://127.0.0.1:$FLUX_SOURCE_HEALTH_PORT/readyz"
wait_for "Flux's helm-controller" 60 curl -sf "http://127.0.0.1:$FLUX_HELM_HEALTH_PORT/readyz"
wait_for "Flux's locked-down helm-controller" 60 curl -sf "http://127.0.0.1:$FLUX_LOCKED_HEALTH_PORT/readyz"

# OCI registries for the chart-source tests (the CNCF distribution registry): one plain
# HTTP and anonymous, one over TLS (a certificate of the local CA, which no system trusts)
# with basic auth. What tests need to reach them is in DIR/registry.env.
log "starting the OCI registries"
reg="$dir/registry"
mkdir -p "$reg/plain" "$reg/tls"
server_cert registry localhost
if [[ ! -f "$reg/htpasswd" ]]; then
  password=$(python3 -c 'import secrets; print(secrets.token_hex(12))')
  "$registrybin/htpasswd" wheelhouse "$password" >"$reg/htpasswd"
  printf 'REGISTRY_USER=wheelhouse\nREGISTRY_PASSWORD=%s\n' "$password" >"$reg/credentials.env"
fi
cat >"$reg/plain.yaml" <<YAML
version: 0.1
log: {level: warn, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $reg/plain}, delete: {enabled: true}}
http: {addr: 127.0.0.1:$REGISTRY_PORT}
YAML
cat >"$reg/tls.yaml" <<YAML
version: 0.1
log: {level: warn, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $reg/tls}, delete: {enabled: true}}
http:
  addr: 127.0.0.1:$REGISTRY_TLS_PORT
  tls: {certificate: $pki/registry.crt, key: $pki/registry.key}
auth:
  htpasswd: {realm: wheelhouse-local, path: $reg/htpasswd}
YAML
start registry "$registrybin/registry" serve "$reg/plain.yaml"
start registry-tls "$registrybin/registry" serve "$reg/tls.yaml"
wait_for "the OCI registry" 30 curl -sf "http://127.0.0.1:$REGISTRY_PORT/v2/"
wait_for "the OCI registry with TLS and basic auth" 30 \
  curl -s -o /dev/null --cacert "$pki/ca.crt" "https://127.0.0.1:$REGISTRY_TLS_PORT/v2/"
{
  echo "REGISTRY=127.0.0.1:$REGISTRY_PORT"
  echo "REGISTRY_TLS=127.0.0.1:$REGISTRY_TLS_PORT"
  echo "REGISTRY_CA=$pki/ca.crt"
  cat "$reg/credentials.env"
} >"$dir/registry.env"

# The Git server of the Git chart-source tests (tests/cluster/gitserver/main.go), one
# process serving the bare repositories under DIR/git/repos (tests create them) read-only:
# anonymous smart HTTP, HTTPS (a certificate of the local CA) with basic auth or a bearer
# token (403 for anything under /forbidden/), and SSH with a public key. What tests need
# to reach it is in DIR/git.env.
log "starting the Git server"
gitdir="$dir/git"
mkdir -p "$gitdir/repos"
server_cert git localhost
[[ -f "$gitdir/ssh/client_ed25519" ]] || "$gitserverbin/gitserver" keygen "$gitdir/ssh"
if [[ ! -f "$gitdir/credentials.env" ]]; then
  printf 'GIT_USER=wheelhouse\nGIT_PASSWORD=%s\nGIT_TOKEN=%s\n' \
    "$(python3 -c 'import secrets; print(secrets.token_hex(12))')" \
    "$(python3 -c 'import secrets; print(secrets.token_hex(20))')" >"$gitdir/credentials.env"
  chmod 600 "$gitdir/credentials.env"
fi
# known_hosts lines as OpenSSH writes them for a non-default port: the server's host key,
# and an unrelated key for the same host (a known_hosts the client must refuse).
host_key_line() { printf '[127.0.0.1]:%s %s\n' "$GIT_SSH_PORT" "$(cut -d' ' -f1,2 "$1")"; }
host_key_line "$gitdir/ssh/host_ed25519.pub" >"$gitdir/ssh/known_hosts"
host_key_line "$gitdir/ssh/other_host_ed25519.pub" >"$gitdir/ssh/wrong_known_hosts"
start gitserver "$gitserverbin/gitserver" serve \
  -root "$gitdir/repos" \
  -http "127.0.0.1:$GIT_HTTP_PORT" \
  -https "127.0.0.1:$GIT_HTTPS_PORT" -cert "$pki/git.crt" -key "$pki/git.key" \
  -credentials "$gitdir/credentials.env" \
  -ssh "127.0.0.1:$GIT_SSH_PORT" -host-key "$gitdir/ssh/host_ed25519" \
  -authorized-keys "$gitdir/ssh/authorized_keys"
# An SSH server speaks first: its version line.
ssh_banner() { timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && head -c 8 <&3 | grep -q "^SSH-2.0-"' _ "$1"; }
wait_for "the Git server over HTTP" 30 curl -s -o /dev/null "http://127.0.0.1:$GIT_HTTP_PORT/"
wait_for "the Git server over HTTPS" 30 curl -s -o /dev/null --cacert "$pki/ca.crt" "https://127.0.0.1:$GIT_HTTPS_PORT/"
wait_for "the Git server over SSH" 30 ssh_banner "$GIT_SSH_PORT"
{
  echo "GIT_ROOT=$gitdir/repos"
  echo "GIT_HTTP=http://127.0.0.1:$GIT_HTTP_PORT"
  echo "GIT_HTTPS=https://127.0.0.1:$GIT_HTTPS_PORT"
  echo "GIT_CA=$pki/ca.crt"
  cat "$gitdir/credentials.env"
  echo "GIT_SSH=ssh://git@127.0.0.1:$GIT_SSH_PORT"
  echo "GIT_SSH_IDENTITY=$gitdir/ssh/client_ed25519"
  echo "GIT_SSH_KNOWN_HOSTS=$gitdir/ssh/known_hosts"
  echo "GIT_SSH_WRONG_KNOWN_HOSTS=$gitdir/ssh/wrong_known_hosts"
} >"$dir/git.env"

trap - ERR
log "up in $(elapsed): export KUBECONFIG=$dir/kubeconfig"
