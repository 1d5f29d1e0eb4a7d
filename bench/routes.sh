#!/bin/bash
# Routes at scale (issue 28): one scenario, every profile at every size of
# `route_scale` (routes over 10 hosts), requests from the routes at 500 req/s for 8 s;
# 2 s in, route N is added, 3 s later removed again (`route_set: add|remove`). Prints a
# TSV: the route set (config bytes, apply ms, ms until every route served, routes
# never served), the load (mix p50/p99 ms, failed requests, the proxy's largest RSS),
# and the one change at N (ms until traffic showed the added and the removed route,
# and the load's errors in each change's window: routes nobody touched).
# Sizes and profiles: NS="10 100 1000 5000" PROFILES="nginx-reload haproxy-reload caddy-api envoy-xds".
cd "$(dirname "$0")/.."
IB=${BIN:-$PWD/target/release/ingressbench}
PROFILES=${PROFILES:-"nginx-reload haproxy-reload haproxy-runtime caddy-api envoy-xds"}
NS=${NS:-"10 100 1000 5000"}
W=$(mktemp -d /tmp/ingressbench-routes.XXXXXX)
trap 'rm -rf "$W"' EXIT
systems=$(echo $PROFILES | sed 's/ /, /g')
sizes=$(echo $NS | sed 's/ /, /g')
first=${NS%% *}
cat > $W/s.yaml <<Y
name: routes-at-scale
systems: [$systems]
backends: {replicas: 2}
tls: {enabled: false}
routes: {count: $first, hosts: 10}
route_scale: [$sizes]
requests: {from: routes}
load: {rate: 500, connections: 20, duration: 8s}
changes:
  - wait: 2s
  - route_set: add
  - wait: 3s
  - route_set: remove
Y
timeout 1800 $IB run $W/s.yaml --out $W/out > $W/log 2>&1 || { echo "run failed: $(tail -3 $W/log)"; }
printf 'profile\tN\tconfig_bytes\tapply_ms\tall_served_ms\tnever\tp50_ms\tp99_ms\tfailed\tproxy_rss_mib\tadd_shown_ms\tremove_shown_ms\tadd_window_errors\tremove_window_errors\n'
for p in $PROFILES; do for n in $NS; do
  f=$W/out/$p-${n}routes/result.json
  [ -f "$f" ] || { echo -e "$p\t$n\tno result"; continue; }
  python3 - "$f" $p $n <<'P'
import json,sys
r=json.load(open(sys.argv[1])); l=r['lab']; rs=l['route_set']; c=r['latency_ms']['corrected']
res=l.get('resources') or {}
ch={x['change']: x for x in rs.get('changes', [])}
win={w['change'].split()[1]: sum(w.get('errors', {}).values()) for w in l.get('windows', []) if w['change'].startswith('route_set')}
def ms(v): return 'never' if v is None else round(v, 1)
print('\t'.join(str(x) for x in [sys.argv[2], sys.argv[3], rs.get('config_bytes'), round(rs['apply_ms'], 1),
      ms(rs.get('all_served_ms')), rs['never_count'], c['p50'], c['p99'], r['requests']['failed'], res.get('rss_max_mib'),
      ms(ch.get('add', {}).get('shown_ms')), ms(ch.get('remove', {}).get('shown_ms')), win.get('add'), win.get('remove')]))
P
done; done
