#!/usr/bin/env bash
# Checks an environment brought up by up.sh and times how fast it follows changes:
#
#   scripts/k8s-testenv/smoke.sh STATE_DIR
#
# In a namespace of its own (ibk8s-smoke-<random>): a Deployment of 2 replicas (an image
# name nobody pulls: kwok runs nothing) with terminationGracePeriodSeconds 10 and a
# Service selecting it. It checks that the pods run with IPs from the node's podCIDR,
# times the EndpointSlice (2 ready endpoints; scale to 3 and back to 2), deletes a pod
# with a 5 s grace period (its endpoint must turn terminating at once, the pod must stay
# Terminating until the grace period ends), and checks that a readiness gate holds a pod
# back until its condition is set. Times are the arrival of watch events from the API
# server, counted from the moment the request is sent (with curl, not kubectl, so no
# start-up cost is counted). Everything runs inside the environment's network namespace
# and talks to 127.0.0.1 only. The namespace is deleted at the end (without waiting).
set -euo pipefail

die() { echo "smoke.sh: FAIL: $*" >&2; exit 1; }
say() { echo "smoke.sh: $*"; }

[ $# -eq 1 ] || die "usage: smoke.sh STATE_DIR"
S=$(cd "$1" && pwd) || die "no state directory $1"
[ -f "$S/env" ] || die "$S/env missing: not an up.sh state directory"
# shellcheck disable=SC1091 # written by up.sh
. "$S/env"
command -v jq >/dev/null || die "jq is needed"
TOKEN=$(awk -F, '$2 == "admin" { print $1 }' "$S/pki/tokens.csv")
NS=ibk8s-smoke-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
API=$IBK8S_API

nsx() { ip netns exec "$IBK8S_NETNS" "$@"; }
kc() { nsx "$IBK8S_BIN/kubectl" --kubeconfig "$IBK8S_KUBECONFIG" --cache-dir "$S/kube-cache" "$@"; }
api() { # method path [json body]: one request to the API server, the response on stdout
  local args=(-s --max-time 10 --cacert "$S/pki/ca.crt" -H "Authorization: Bearer $TOKEN" -X "$1")
  [ $# -ge 3 ] && args+=(-H "Content-Type: ${CT:-application/json}" --data-binary "$3")
  nsx curl "${args[@]}" "$API$2"
}
now() { date +%s%N; }
ms() { echo $((($2 - $1) / 1000000)); }

WORK=$(mktemp -d /tmp/ibk8s-smoke.XXXXXX)
watchers=()
cleanup() {
  local p
  for p in "${watchers[@]}"; do pkill -P "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  kc delete namespace "$NS" --wait=false >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

start_watch() { # name path: streams watch events into $WORK/name.log, each line "<ns> <json>"
  (
    nsx curl -sN --max-time 600 --cacert "$S/pki/ca.crt" -H "Authorization: Bearer $TOKEN" "$API$2?watch=1" |
      while IFS= read -r line; do printf '%s %s\n' "$(date +%s%N)" "$line"; done
  ) >"$WORK/$1.log" 2>/dev/null &
  watchers+=($!)
}
# wait_event log t0 jq-filter [timeout-s]: the arrival time (ns) of the first event that
# arrived after t0 and whose object matches the filter.
wait_event() {
  local log=$WORK/$1.log t0=$2 filter=$3 limit=$((${4:-15} * 1000000000)) seen=0 ts json n
  while :; do
    n=0
    while IFS=' ' read -r ts json; do
      n=$((n + 1))
      [ "$n" -gt "$seen" ] || continue
      seen=$n
      [ "$ts" -ge "$t0" ] || continue
      if jq -e ".object | $filter" >/dev/null 2>&1 <<<"$json"; then echo "$ts"; return 0; fi
    done <"$log"
    [ $(($(now) - t0)) -lt "$limit" ] || return 1
    sleep 0.02
  done
}
SLICE_READY='[.endpoints[]? | select(.conditions.ready == true)] | length'
slice_ready_is() { echo "($SLICE_READY) == $1 and ([.endpoints[]?] | length) >= $1"; }
endpoint_of() { echo "[.endpoints[]? | select(.addresses[0] == \"$1\"$2)] | length"; }

say "namespace $NS"
kc create namespace "$NS" >/dev/null
until kc get serviceaccount default -n "$NS" >/dev/null 2>&1; do sleep 0.1; done
start_watch slices "/apis/discovery.k8s.io/v1/namespaces/$NS/endpointslices"
start_watch pods "/api/v1/namespaces/$NS/pods"
sleep 0.5

deployment=$(jq -nc '{apiVersion: "apps/v1", kind: "Deployment", metadata: {name: "web"},
  spec: {replicas: 2, selector: {matchLabels: {app: "web"}},
    template: {metadata: {labels: {app: "web"}},
      spec: {terminationGracePeriodSeconds: 10,
        containers: [{name: "web", image: "ingressbench.invalid/backend:none",
                      ports: [{containerPort: 8080}]}]}}}}')
service=$(jq -nc '{apiVersion: "v1", kind: "Service", metadata: {name: "web"},
  spec: {selector: {app: "web"}, ports: [{port: 80, targetPort: 8080}]}}')

# 1. Create: pods Running with IPs from the podCIDR, 2 ready endpoints.
t0=$(now)
api POST "/api/v1/namespaces/$NS/services" "$service" | jq -e '.metadata.uid' >/dev/null || die "cannot create the Service"
api POST "/apis/apps/v1/namespaces/$NS/deployments" "$deployment" | jq -e '.metadata.uid' >/dev/null || die "cannot create the Deployment"
t=$(wait_event slices "$t0" "$(slice_ready_is 2)") || die "no EndpointSlice with 2 ready endpoints within 15 s"
create_ms=$(ms "$t0" "$t")
say "create: 2 ready endpoints $create_ms ms after the Service and Deployment were created"
pods=$(api GET "/api/v1/namespaces/$NS/pods")
jq -r '.items[] | "  \(.metadata.name) \(.status.phase) Ready=\(.status.conditions[]? | select(.type == "Ready") | .status) ip=\(.status.podIP) node=\(.spec.nodeName)"' <<<"$pods"
in_pod_cidr() { # ip: inside 198.18.64.0/18?
  local a b c d
  IFS=. read -r a b c d <<<"$1"
  [ "$a" = 198 ] && [ "$b" = 18 ] && [ "$c" -ge 64 ] && [ "$c" -le 127 ] && [ "$d" -ge 0 ] && [ "$d" -le 255 ]
}
for ip in $(jq -r '.items[].status.podIP' <<<"$pods"); do
  in_pod_cidr "$ip" || die "pod IP $ip is not inside $IBK8S_POD_CIDR"
done
[ "$(jq '[.items[] | select(.status.phase == "Running")] | length' <<<"$pods")" = 2 ] || die "not 2 Running pods"

# 2. Scale to 3 and back to 2 through the scale subresource.
scale() { CT=application/merge-patch+json api PATCH "/apis/apps/v1/namespaces/$NS/deployments/web/scale" "{\"spec\":{\"replicas\":$1}}" >/dev/null; }
t0=$(now); scale 3
t=$(wait_event slices "$t0" "$(slice_ready_is 3)") || die "the EndpointSlice did not reach 3 ready endpoints"
up_ms=$(ms "$t0" "$t")
say "scale 2 -> 3: 3 ready endpoints after $up_ms ms"
t0=$(now); scale 2
t=$(wait_event slices "$t0" "($SLICE_READY) == 2 and ([.endpoints[]? | select(.conditions.terminating == true)] | length) == 1") ||
  die "the EndpointSlice did not show 2 ready + 1 terminating endpoints after scaling down"
down_ms=$(ms "$t0" "$t")
t=$(wait_event slices "$t0" "([.endpoints[]?] | length) == 2" 20) || die "the scaled-down pod's endpoint never left the EndpointSlice"
down_gone_ms=$(ms "$t0" "$t")
say "scale 3 -> 2: the removed pod's endpoint terminating (not ready) after $down_ms ms, gone after $down_gone_ms ms (terminationGracePeriodSeconds 10)"

# 3. Delete one pod with a 5 s grace period.
victim=$(api GET "/api/v1/namespaces/$NS/pods" | jq -r '[.items[] | select(.metadata.deletionTimestamp == null)][0].metadata.name')
victim_ip=$(api GET "/api/v1/namespaces/$NS/pods/$victim" | jq -r .status.podIP)
t0=$(now)
api DELETE "/api/v1/namespaces/$NS/pods/$victim" '{"gracePeriodSeconds":5}' | jq -e '.metadata.deletionTimestamp' >/dev/null ||
  die "deleting $victim did not leave it Terminating (no deletionTimestamp in the reply)"
t=$(wait_event slices "$t0" "$(endpoint_of "$victim_ip" ' and .conditions.ready == false and .conditions.terminating == true') == 1") ||
  die "the endpoint of $victim ($victim_ip) did not turn terminating"
term_ms=$(ms "$t0" "$t")
say "delete $victim (grace 5 s): its endpoint $victim_ip ready=false terminating=true after $term_ms ms"
for i in 1 2 3 4; do
  until [ "$(now)" -ge $((t0 + i * 1000000000)) ]; do sleep 0.05; done
  st=$(api GET "/api/v1/namespaces/$NS/pods/$victim" |
    jq -r 'if .kind == "Pod" then "Terminating (deletionTimestamp \(.metadata.deletionTimestamp), phase \(.status.phase))" else "gone" end')
  say "  t=${i} s: $victim $st"
done
deleted_at() { grep -F '"type":"DELETED"' "$WORK/pods.log" | grep -F "\"name\":\"$victim\"" | head -n 1 | cut -d' ' -f1; }
until t=$(deleted_at) && [ -n "$t" ]; do
  [ $(($(now) - t0)) -lt 15000000000 ] || die "$victim was not deleted within 15 s"
  sleep 0.05
done
gone_ms=$(ms "$t0" "$t")
[ "$gone_ms" -ge 5000 ] || die "$victim was gone after $gone_ms ms, before its 5 s grace period ended"
[ "$gone_ms" -le 6500 ] || die "$victim was gone only after $gone_ms ms (grace period 5 s)"
say "  $victim deleted after $gone_ms ms (grace 5 s; kwok waits until deletionTimestamp + 1 s, the timestamp having 1 s resolution)"
t=$(wait_event slices "$t0" "$(endpoint_of "$victim_ip" '') == 0" 10) || die "the endpoint of $victim stayed after the pod was deleted"
say "  its endpoint left the EndpointSlice after $(ms "$t0" "$t") ms"

# 4. A readiness gate holds a Running pod back until its condition is True.
gated=$(jq -nc '{apiVersion: "v1", kind: "Pod", metadata: {name: "gated", labels: {app: "web"}},
  spec: {readinessGates: [{conditionType: "ingressbench.dev/serving"}],
    containers: [{name: "web", image: "ingressbench.invalid/backend:none"}]}}')
t0=$(now)
api POST "/api/v1/namespaces/$NS/pods" "$gated" | jq -e .metadata.uid >/dev/null || die "cannot create pod gated"
wait_event pods "$t0" 'select(.metadata.name == "gated" and .status.phase == "Running")' >/dev/null || die "pod gated did not run"
gated_ip=$(api GET "/api/v1/namespaces/$NS/pods/gated" | jq -r .status.podIP)
wait_event slices "$t0" "$(endpoint_of "$gated_ip" ' and .conditions.ready == false') == 1" >/dev/null ||
  die "pod gated ($gated_ip) is not a not-ready endpoint"
ready=$(api GET "/api/v1/namespaces/$NS/pods/gated" | jq -r '.status.conditions[] | select(.type == "Ready") | .status')
[ "$ready" = False ] || die "pod gated is Ready=$ready before its gate is set"
say "readiness gate: pod gated Running, Ready=False, its endpoint $gated_ip not ready"
patch='{"status":{"conditions":[{"type":"ingressbench.dev/serving","status":"True"},{"type":"Ready","status":"True"}]}}'
t0=$(now)
CT=application/strategic-merge-patch+json api PATCH "/api/v1/namespaces/$NS/pods/gated/status" "$patch" >/dev/null
t=$(wait_event slices "$t0" "$(endpoint_of "$gated_ip" ' and .conditions.ready == true') == 1") ||
  die "pod gated's endpoint did not turn ready after its gate was set"
say "readiness gate: condition set -> endpoint ready after $(ms "$t0" "$t") ms"

say "OK: create ${create_ms} ms, scale up ${up_ms} ms, scale down ${down_ms} ms (endpoint gone ${down_gone_ms} ms), delete with grace 5 s: terminating ${term_ms} ms, pod gone ${gone_ms} ms"
