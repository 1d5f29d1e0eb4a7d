#!/usr/bin/env bash
# The main job end to end on this machine: study S1's comparison (seven real proxy profiles
# under endpoint churn), scaled down to run in a couple of minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/ingressbench}
OUT=${OUT:-results/demo-$(date -u +%Y%m%dT%H%M%SZ)}
echo "demo: S1 (dynamic endpoints, --quick): 7 proxy profiles (nginx, HAProxy, Caddy, Envoy), 500 req/s over TLS, backends 5 <-> 7"
"$BIN" run scenarios/dynamic-endpoints.yaml --quick --out "$OUT"
