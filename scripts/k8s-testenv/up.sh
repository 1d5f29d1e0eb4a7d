#!/usr/bin/env bash
# Brings a real Kubernetes control plane up on this machine, for ingressbench's tests,
# inside a network namespace of its own that has no default route:
#
#   scripts/k8s-testenv/up.sh STATE_DIR [--name NAME] [--keep-state-on-failure]
#                                       [--pod-readiness kwok|harness]
#
# STATE_DIR must not exist or be empty; it receives everything: netns (the namespace's
# name), env (shell assignments for a harness), kubeconfig (admin, token auth, the real
# CA), kubectl (a wrapper running kubectl inside the namespace), pki/, etcd/, logs/,
# pids/ (<component>.pid and <component>.start, the process's start time).
# The namespace is ibk8s-NAME (default: ibk8s-<6 random hex digits>). It holds lo only:
# 127.0.0.1, 198.18.0.1/32 (the API server's advertise address) and a blackhole route for
# the whole benchmarking range 198.18.0.0/15, so any dial leaving the lab fails at once.
# Components, each in its own process group (setsid), all started with `ip netns exec`:
# etcd, kube-apiserver (https://127.0.0.1:6443), kube-controller-manager, kube-scheduler
# and kwok with graceful pod deletion (kwok-stages.yaml); one Node kwok-node-0 with
# podCIDR 198.18.64.0/18. --pod-readiness harness: pods start Running but not Ready
# (containers not ready) until a test harness running their processes marks them
# Ready; kwok (the default): Ready at once. Prints timings. On any failure (a component
# exiting, a timeout, Ctrl-C) it prints a one-line reason and the end of the log
# concerned, then calls down.sh STATE_DIR (which removes STATE_DIR unless
# --keep-state-on-failure).
# Stop with: scripts/k8s-testenv/down.sh STATE_DIR
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# The lab's addresses: everything inside the benchmarking range 198.18.0.0/15.
LAB_RANGE=198.18.0.0/15
ADVERTISE_IP=198.18.0.1
POD_CIDR=198.18.64.0/18
SERVICE_CIDR=198.19.0.0/16
SERVICE_FIRST_IP=198.19.0.1   # the `kubernetes` Service's ClusterIP
API_PORT=6443
NODE_NAME=kwok-node-0
TIMEOUT=${IBK8S_UP_TIMEOUT:-90}  # seconds, for the whole bring-up

die() { echo "up.sh: error: $*" >&2; exit 1; }
say() { echo "up.sh: $*"; }
usage() { sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

state_dir=""
name=""
keep_on_failure=0
pod_readiness=kwok
while [ $# -gt 0 ]; do
  case "$1" in
    --name) [ $# -ge 2 ] || die "--name needs a value"; name=$2; shift 2 ;;
    --name=*) name=${1#--name=}; shift ;;
    --keep-state-on-failure) keep_on_failure=1; shift ;;
    --pod-readiness) [ $# -ge 2 ] || die "--pod-readiness needs a value"; pod_readiness=$2; shift 2 ;;
    --pod-readiness=*) pod_readiness=${1#--pod-readiness=}; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) die "unknown option '$1' (try --help)" ;;
    *) [ -z "$state_dir" ] || die "one STATE_DIR only (got '$state_dir' and '$1')"; state_dir=$1; shift ;;
  esac
done
[ -n "$state_dir" ] || die "usage: up.sh STATE_DIR [--name NAME] [--keep-state-on-failure] [--pod-readiness kwok|harness]"
case "$pod_readiness" in
  kwok | harness) ;;
  *) die "--pod-readiness: 'kwok' or 'harness', not '$pod_readiness'" ;;
esac

# --- Preconditions, before anything is created -----------------------------------------
[ "$(id -u)" = 0 ] || die "must run as root (it creates a network namespace)"
for tool in ip openssl curl setsid ps base64; do
  command -v "$tool" >/dev/null || die "'$tool' not found on PATH"
done
CACHE=$("$HERE/build.sh" --print-dir)
BIN="$CACHE/bin"
[ -f "$CACHE/COMPLETE" ] || die "the binaries are not built: run scripts/k8s-testenv/build.sh (cache $CACHE)"
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok; do
  [ -x "$BIN/$b" ] || die "$BIN/$b is missing: run scripts/k8s-testenv/build.sh"
done

# What a killed cluster left (its namespace and its pods', empty and old): swept first.
"$HERE/sweep-netns.sh" >&2 || true

if [ -n "$name" ]; then
  ns=ibk8s-${name#ibk8s-}
else
  ns=ibk8s-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
fi
[[ "$ns" =~ ^ibk8s-[a-z0-9][a-z0-9-]{0,25}$ ]] ||
  die "bad --name '$name': lower-case letters, digits and '-', at most 26 characters"
[ ! -e "/run/netns/$ns" ] || die "network namespace $ns already exists (choose another --name)"

if [ -e "$state_dir" ]; then
  [ -d "$state_dir" ] || die "$state_dir exists and is not a directory"
  [ -z "$(ls -A "$state_dir")" ] || die "$state_dir is not empty (up.sh wants a new or empty STATE_DIR)"
fi
mkdir -p "$state_dir"
S=$(cd "$state_dir" && pwd)
# The marker tells down.sh that this folder is ours to delete.
echo "ingressbench k8s-testenv state directory (scripts/k8s-testenv/up.sh); netns $ns" >"$S/.ibk8s-state"
mkdir -p "$S/logs" "$S/pids" "$S/pki" "$S/kubeconfigs"
chmod 700 "$S/pki" "$S/kubeconfigs"

# --- From here on, any failure tears down what was made ----------------------------------
finished=0
on_exit() {
  local rc=$?
  [ $finished = 1 ] && return 0
  [ $rc -ne 0 ] || rc=1
  echo "up.sh: bring-up failed (exit $rc); tearing down with down.sh" >&2
  if [ $keep_on_failure = 1 ]; then
    "$HERE/down.sh" "$S" --keep-state >&2 || true
    echo "up.sh: state kept in $S (logs in $S/logs)" >&2
  else
    "$HERE/down.sh" "$S" >&2 || true
  fi
  exit "$rc"
}
trap on_exit EXIT
trap 'echo "up.sh: interrupted" >&2; exit 130' INT
trap 'echo "up.sh: terminated" >&2; exit 143' TERM

T0=$(date +%s%N)
elapsed() { echo $((($(date +%s%N) - T0) / 1000000)); }           # ms since start
secs() { printf '%d.%02d s' $(($1 / 1000)) $((($1 % 1000) / 10)); } # ms -> "1.23 s"
timings=()
mark() { # key description: remember the time since start under key, and say it
  local ms; ms=$(elapsed); timings+=("$1=$(secs "$ms" | tr -d ' ')"); say "$(secs "$ms"): $2"
}
nsx() { ip netns exec "$ns" "$@"; }

# --- The network namespace ---------------------------------------------------------------
ip netns add "$ns" || die "cannot create network namespace $ns"
echo "$ns" >"$S/netns"
nsx ip link set lo up
nsx ip addr add "$ADVERTISE_IP/32" dev lo
nsx ip route add blackhole "$LAB_RANGE"
if nsx ip -4 route show | grep -q '^default' || nsx ip -6 route show | grep -q '^default'; then
  die "network namespace $ns has a default route: $(nsx ip route show | tr '\n' ';')"
fi
links=$(nsx ip -o link show | awk -F': ' '{ print $2 }' | tr '\n' ' ')
[ "$links" = "lo " ] || die "network namespace $ns has interfaces other than lo: $links"
# One probe: with no route, connect() fails in the kernel before any packet exists.
probe=$(nsx timeout 5 bash -c 'exec 3<>/dev/tcp/1.1.1.1/80' 2>&1) &&
  die "a TCP connection to 1.1.1.1:80 succeeded inside $ns: the namespace is not sealed"
grep -q 'Network is unreachable' <<<"$probe" ||
  die "dialing 1.1.1.1:80 inside $ns failed, but not with 'Network is unreachable': $(tr '\n' ' ' <<<"$probe")"
mark netns "netns $ns sealed (lo only, $ADVERTISE_IP/32, blackhole $LAB_RANGE, no default route)"

# --- Certificates, keys, tokens, kubeconfigs ---------------------------------------------
P="$S/pki"
cat >"$P/openssl.cnf" <<EOF
[req]
distinguished_name = dn
[dn]
[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign,digitalSignature
subjectKeyIdentifier = hash
[v3_apiserver]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:$ADVERTISE_IP,IP:$SERVICE_FIRST_IP
EOF
ossl() { # args...: openssl, its output shown only on failure
  local out
  out=$(openssl "$@" 2>&1) || die "openssl $1 failed: $(tr '\n' ' ' <<<"$out" | cut -c1-300)"
}
ossl ecparam -name prime256v1 -genkey -noout -out "$P/ca.key"
ossl req -x509 -new -key "$P/ca.key" -sha256 -days 365 -subj "/CN=ingressbench $ns CA" \
  -config "$P/openssl.cnf" -extensions v3_ca -out "$P/ca.crt"
ossl ecparam -name prime256v1 -genkey -noout -out "$P/apiserver.key"
ossl req -new -key "$P/apiserver.key" -subj "/CN=kube-apiserver" -config "$P/openssl.cnf" -out "$P/apiserver.csr"
ossl x509 -req -in "$P/apiserver.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" \
  -set_serial "0x$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')" -days 365 -sha256 \
  -extfile "$P/openssl.cnf" -extensions v3_apiserver -out "$P/apiserver.crt"
ossl ecparam -name prime256v1 -genkey -noout -out "$P/sa.key"
ossl ec -in "$P/sa.key" -pubout -out "$P/sa.pub"
rm -f "$P/apiserver.csr"

token() { od -An -N16 -tx1 /dev/urandom | tr -d ' \n'; }
admin_token=$(token); cm_token=$(token); sched_token=$(token); kwok_token=$(token)
# token,user,uid,"groups": the controller manager and the scheduler get their own
# identities (bootstrap RBAC roles exist for them); kwok acts as a cluster admin.
cat >"$P/tokens.csv" <<EOF
$admin_token,admin,admin,"system:masters"
$cm_token,system:kube-controller-manager,system:kube-controller-manager
$sched_token,system:kube-scheduler,system:kube-scheduler
$kwok_token,kwok,kwok,"system:masters"
EOF
chmod 600 "$P"/*.key "$P/tokens.csv"

ca_data=$(base64 -w0 <"$P/ca.crt")
write_kubeconfig() { # file user token
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: ibk8s
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $ca_data
users:
- name: $2
  user:
    token: $3
contexts:
- name: ibk8s
  context:
    cluster: ibk8s
    user: $2
current-context: ibk8s
EOF
  chmod 600 "$1"
}
write_kubeconfig "$S/kubeconfig" admin "$admin_token"
write_kubeconfig "$S/kubeconfigs/controller-manager" system:kube-controller-manager "$cm_token"
write_kubeconfig "$S/kubeconfigs/scheduler" system:kube-scheduler "$sched_token"
write_kubeconfig "$S/kubeconfigs/kwok" kwok "$kwok_token"

# kwok's pod stages (they replace kwok's default pod stages; its node stages stay).
cp "$HERE/kwok-stages.yaml" "$S/kwok-stages.yaml"

{
  echo '#!/usr/bin/env bash'
  echo '# kubectl against this environment, run inside its network namespace.'
  printf 'exec ip netns exec %q %q --kubeconfig %q --cache-dir %q "$@"\n' \
    "$ns" "$BIN/kubectl" "$S/kubeconfig" "$S/kube-cache"
} >"$S/kubectl"
chmod 755 "$S/kubectl"
# For a harness: `. STATE_DIR/env` (bash) or read the KEY=VALUE lines.
for kv in "IBK8S_NETNS=$ns" "IBK8S_STATE_DIR=$S" "IBK8S_BIN=$BIN" "IBK8S_KUBECONFIG=$S/kubeconfig" \
  "IBK8S_KUBECTL=$S/kubectl" "IBK8S_API=https://127.0.0.1:$API_PORT" "IBK8S_CA=$P/ca.crt" \
  "IBK8S_ADVERTISE_IP=$ADVERTISE_IP" "IBK8S_LAB_RANGE=$LAB_RANGE" "IBK8S_POD_CIDR=$POD_CIDR" \
  "IBK8S_SERVICE_CIDR=$SERVICE_CIDR" "IBK8S_NODE=$NODE_NAME" "IBK8S_POD_READINESS=$pod_readiness"; do
  printf '%s=%q\n' "${kv%%=*}" "${kv#*=}"
done >"$S/env"
mark pki "certificates, tokens and kubeconfigs written"

# --- Starting components -----------------------------------------------------------------
components=()
# shellcheck source=scripts/k8s-testenv/proc.sh
source "$(dirname "${BASH_SOURCE[0]}")/proc.sh"
start() { # name command...: runs it inside the namespace in a new session, logs in logs/
  local name=$1; shift
  setsid ip netns exec "$ns" "$@" </dev/null >"$S/logs/$name.log" 2>&1 &
  local pid=$!
  echo "$pid" >"$S/pids/$name.pid"
  start_time "$pid" >"$S/pids/$name.start" || true
  components+=("$name")
  # setsid makes it the leader of a new process group (the group down.sh kills), once
  # the forked shell has reached it: wait for that.
  local pgid="" _
  for _ in $(seq 100); do
    pgid=$(ps -o pgid= -p "$pid" | tr -d ' ') || true
    [ "$pgid" = "$pid" ] && return 0
    [ -n "$pgid" ] || return 0 # exited already: check_alive reports it
    sleep 0.01
  done
  die "$name (pid $pid) did not become the leader of its own process group (pgid $pgid)"
}
check_alive() { # fails with the end of the log of the first component that has exited
  local c pid st
  for c in "${components[@]}"; do
    pid=$(cat "$S/pids/$c.pid")
    st=$(ps -o stat= -p "$pid" 2>/dev/null || true)
    if [ -z "$st" ] || [[ "$st" == Z* ]]; then
      local rc="?"
      if { wait "$pid"; } 2>/dev/null; then rc=0; else rc=$?; fi
      {
        echo "up.sh: error: $c exited during bring-up (exit status $rc); last lines of $S/logs/$c.log:"
        tail -n 20 "$S/logs/$c.log" | sed 's/^/    /'
      } >&2
      exit 1
    fi
  done
}
deadline=$(($(date +%s) + TIMEOUT))
wait_for() { # description command...: polls every 0.1 s, checking the components meanwhile
  local what=$1; shift
  until "$@" >/dev/null 2>&1; do
    check_alive
    [ "$(date +%s)" -lt "$deadline" ] || {
      echo "up.sh: error: timed out after ${TIMEOUT} s waiting for $what (IBK8S_UP_TIMEOUT raises it); last log lines:" >&2
      local c
      for c in "${components[@]}"; do echo "  $c:"; tail -n 3 "$S/logs/$c.log" | sed 's/^/    /'; done >&2
      exit 1
    }
    sleep 0.1
  done
  check_alive
}
kc() { nsx "$BIN/kubectl" --kubeconfig "$S/kubeconfig" --cache-dir "$S/kube-cache" --request-timeout=10s "$@"; }

# etcd: loopback only, no fsync (test data).
mkdir -m 700 "$S/etcd"
start etcd "$BIN/etcd" --name=ibk8s --data-dir="$S/etcd" \
  --listen-client-urls=http://127.0.0.1:2379 --advertise-client-urls=http://127.0.0.1:2379 \
  --listen-peer-urls=http://127.0.0.1:2380 --initial-advertise-peer-urls=http://127.0.0.1:2380 \
  --initial-cluster=ibk8s=http://127.0.0.1:2380 --initial-cluster-state=new \
  --listen-metrics-urls=http://127.0.0.1:2381 --unsafe-no-fsync --log-level=warn \
  --heartbeat-interval=10 --election-timeout=100
etcd_healthy() { nsx curl -sf --max-time 2 http://127.0.0.1:2379/health | grep -q '"health":"true"'; }
wait_for "etcd to answer /health" etcd_healthy
mark etcd "etcd healthy"

start kube-apiserver "$BIN/kube-apiserver" \
  --etcd-servers=http://127.0.0.1:2379 \
  --bind-address=127.0.0.1 --secure-port=$API_PORT --advertise-address=$ADVERTISE_IP \
  --cert-dir="$P" --tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" \
  --client-ca-file="$P/ca.crt" --token-auth-file="$P/tokens.csv" \
  --authorization-mode=RBAC \
  --service-account-key-file="$P/sa.pub" --service-account-signing-key-file="$P/sa.key" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-cluster-ip-range=$SERVICE_CIDR \
  --endpoint-reconciler-type=none \
  --enable-priority-and-fairness=false \
  --allow-privileged=true --profiling=false
apiserver_ready() {
  [ "$(nsx curl -s --max-time 2 --cacert "$P/ca.crt" "https://127.0.0.1:$API_PORT/readyz")" = ok ]
}
wait_for "kube-apiserver to answer /readyz" apiserver_ready
mark apiserver "kube-apiserver ready (/readyz ok)"

start kube-controller-manager "$BIN/kube-controller-manager" \
  --kubeconfig="$S/kubeconfigs/controller-manager" \
  --authentication-kubeconfig="$S/kubeconfigs/controller-manager" \
  --authorization-kubeconfig="$S/kubeconfigs/controller-manager" \
  --bind-address=127.0.0.1 \
  --controllers='*,-nodeipam' --allocate-node-cidrs=false --leader-elect=false \
  --use-service-account-credentials=true \
  --service-account-private-key-file="$P/sa.key" --root-ca-file="$P/ca.crt" \
  --cluster-signing-cert-file="$P/ca.crt" --cluster-signing-key-file="$P/ca.key" \
  --service-cluster-ip-range=$SERVICE_CIDR --cluster-name=ibk8s --profiling=false
start kube-scheduler "$BIN/kube-scheduler" \
  --kubeconfig="$S/kubeconfigs/scheduler" \
  --authentication-kubeconfig="$S/kubeconfigs/scheduler" \
  --authorization-kubeconfig="$S/kubeconfigs/scheduler" \
  --bind-address=127.0.0.1 --leader-elect=false --profiling=false
# kwok-stages.yaml reads IBK8S_POD_READINESS (kwok's templates have sprig's env); set
# here for kwok alone, whatever the caller's environment holds (`env` execs kwok).
start kwok env IBK8S_POD_READINESS="$pod_readiness" "$BIN/kwok" --kubeconfig="$S/kubeconfigs/kwok" --config="$S/kwok-stages.yaml" \
  --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --node-lease-duration-seconds=40 \
  --cidr=$POD_CIDR --node-ip=$ADVERTISE_IP
mark started "kube-controller-manager, kube-scheduler and kwok started"

cat >"$S/node.yaml" <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $NODE_NAME
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/hostname: $NODE_NAME
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
spec:
  podCIDR: $POD_CIDR
  podCIDRs:
  - $POD_CIDR
EOF
out=$(kc create -f "$S/node.yaml" 2>&1) || die "cannot create node $NODE_NAME: $out"

node_ready() {
  [ "$(kc get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
wait_for "node $NODE_NAME to be Ready" node_ready
mark node "node $NODE_NAME Ready (kwok)"

# The controller manager starts its controllers one by one, in a random order, ~150 ms
# apart (each fetches a service-account token, at its default 20 requests/s): the
# environment is usable once those the lab relies on are running. Its /healthz?verbose
# lists the controllers started so far.
NEEDED_CONTROLLERS=(deployment-controller replicaset-controller endpointslice-controller
  endpoints-controller serviceaccount-controller serviceaccount-token-controller
  namespace-controller garbage-collector-controller node-lifecycle-controller
  taint-eviction-controller pod-garbage-collector-controller root-ca-certificate-publisher-controller)
controllers_started() {
  local health c
  health=$(nsx curl -sk --max-time 2 "https://127.0.0.1:10257/healthz?verbose") || return 1
  for c in "${NEEDED_CONTROLLERS[@]}"; do grep -qx "\[+\]$c ok" <<<"$health" || return 1; done
}
wait_for "kube-controller-manager to start ${NEEDED_CONTROLLERS[*]}" controllers_started
healthz() { [ "$(nsx curl -sk --max-time 2 "https://127.0.0.1:$1/healthz")" = ok ]; }
wait_for "kube-scheduler /healthz (127.0.0.1:10259)" healthz 10259
# The node-lifecycle controller removes the not-ready taint the API server put on the
# new node; pods are not scheduled before that.
node_untainted() {
  local effects
  effects=$(kc get node "$NODE_NAME" -o jsonpath='{.spec.taints[*].effect}')
  [[ "$effects" != *NoSchedule* ]] && [[ "$effects" != *NoExecute* ]]
}
wait_for "node $NODE_NAME to lose its NoSchedule/NoExecute taints" node_untainted
# Pods cannot be created in a namespace before its ServiceAccount default exists.
wait_for "ServiceAccount default/default" kc get serviceaccount default -n default
n_started=$(nsx curl -sk --max-time 2 "https://127.0.0.1:10257/healthz?verbose" | grep -c -- '-controller ok$' || true)
mark controllers "controller manager running (${n_started} controllers), scheduler healthy, node untainted"

finished=1
total=$(elapsed)
say "up in $(secs "$total"): netns $ns, API https://127.0.0.1:$API_PORT (inside the netns), state $S"
say "timings: ${timings[*]}"
say "kubectl: $S/kubectl get pods -A    (or: ip netns exec $ns $BIN/kubectl --kubeconfig $S/kubeconfig ...)"
say "stop with: $HERE/down.sh $S"
