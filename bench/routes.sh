#!/bin/bash
# Routes at scale (issue 28): for each profile and N, a scenario with routes {count: N, hosts: 10},
# requests from routes, 500 req/s for 3 s, run one after the other; prints a TSV of the
# route set (config bytes, apply ms, ms until every route served, routes never served)
# and the load (mix p50/p99 ms, failed requests, the proxy's largest RSS). Sizes and
# profiles: NS="10 100 1000 5000" PROFILES="nginx-reload haproxy-reload caddy-api envoy-xds".
cd "$(dirname "$0")/.."
IB=${BIN:-$PWD/target/release/ingressbench}
PROFILES=${PROFILES:-"nginx-reload haproxy-reload caddy-api envoy-xds"}
NS=${NS:-"10 100 1000 5000"}
W=$(mktemp -d /tmp/ingressbench-routes.XXXXXX)
trap 'rm -rf "$W"' EXIT
printf 'profile\tN\tconfig_bytes\tapply_ms\tall_served_ms\tnever\tp50_ms\tp99_ms\tfailed\tproxy_rss_mib\n'
for p in $PROFILES; do for n in $NS; do
  cat > $W/s.yaml <<Y
name: sweep
systems: [$p]
backends: {replicas: 2}
tls: {enabled: false}
routes: {count: $n, hosts: 10}
requests: {from: routes}
load: {rate: 500, connections: 20, duration: 3s}
Y
  rm -rf $W/out
  timeout 300 $IB run $W/s.yaml --out $W/out > $W/log 2>&1 || { echo "$p $n failed: $(tail -2 $W/log)"; continue; }
  python3 - $W/out/$p/result.json $p $n <<'P'
import json,sys
r=json.load(open(sys.argv[1])); l=r['lab']; rs=l['route_set']; c=r['latency_ms']['corrected']
res=l.get('resources') or {}
print('\t'.join(str(x) for x in [sys.argv[2],sys.argv[3],rs.get('config_bytes'),round(rs['apply_ms'],1),round(rs['all_served_ms'],1) if rs.get('all_served_ms') is not None else 'never',rs['never_count'],c['p50'],c['p99'],r['requests']['failed'],res.get('rss_max_mib')]))
P
done; done
