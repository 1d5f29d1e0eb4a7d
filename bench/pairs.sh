#!/usr/bin/env bash
# Two (or more) builds of ingressbench on one load, interleaved run by run: how a change
# to the engine's hot path is measured against the build before it (DEVELOPERS: five
# pairs, the same run, never a figure from another day). The generator on one core,
# nginx (one worker) on the other; each build's runs taken in turns, so drift of the
# machine falls on every build alike.
#
#   bench/pairs.sh NAME=BIN NAME=BIN ... [-- LOAD ARGS]
#
# LOAD ARGS default to study S1's load on one core (issue 40):
#   -t1 -c1000 -R30000 -d8s --tls-version 1.2  against nginx's TLS port
# `{http}` and `{tls}` in LOAD ARGS stand for nginx's plain and TLS URLs; without
# either, the TLS URL is appended.
#
# Environment: PAIRS_REPS (default 5), BENCH_GEN_CPU / BENCH_SRV_CPU (0 / 1),
# BENCH_NICE (default -20; empty: none). Prints one line per run (lag p99 and max,
# CPU, corrected p50/p99, what the machine took) and each build's medians; the raw
# results stay in target/bench/pairs-<time>/.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
REPS=${PAIRS_REPS:-5}
GEN_CPU=${BENCH_GEN_CPU:-0}
SRV_CPU=${BENCH_SRV_CPU:-1}
NICE=${BENCH_NICE--20}
log() { echo "pairs: $*" >&2; }

names=() bins=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  case "$1" in
    *=*) names+=("${1%%=*}"); bins+=("$(realpath "${1#*=}")") ;;
    *) log "expected NAME=BIN, got '$1'"; exit 2 ;;
  esac
  shift
done
[ "${1:-}" = -- ] && shift
[ ${#bins[@]} -ge 1 ] || { log "usage: bench/pairs.sh NAME=BIN NAME=BIN ... [-- LOAD ARGS]"; exit 2; }
for b in "${bins[@]}"; do [ -x "$b" ] || { log "not an executable: $b"; exit 2; }; done
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(-t1 -c1000 -R30000 -d8s --tls-version 1.2)
command -v nginx >/dev/null || { log "nginx is missing (make setup)"; exit 2; }

ulimit -n 65536 2>/dev/null || true
PRIO=()
if [ -n "$NICE" ] && [ "$(nice -n "$NICE" nice 2>/dev/null)" -lt "$(nice)" ]; then PRIO=(nice -n "$NICE"); fi

WORK=$(mktemp -d /tmp/ingressbench-pairs.XXXXXX)
OUT=$ROOT/target/bench/pairs-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT"
NGX_PID=""
cleanup() {
  if [ -n "$NGX_PID" ] && kill -0 "$NGX_PID" 2>/dev/null; then
    kill -TERM "$NGX_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$NGX_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$NGX_PID" $(pgrep -P "$NGX_PID" 2>/dev/null) 2>/dev/null || true
    wait "$NGX_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

read -r HTTP_PORT TLS_PORT < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
source bench/certs.sh
source bench/nginx.sh
make_certs "$WORK" "ingressbench pairs CA" 2
BODY=$(head -c 1024 /dev/zero | tr '\0' 'x')
mkdir -p "$WORK/tmp"
cat >"$WORK/nginx.conf" <<EOF
worker_processes 1;
worker_rlimit_nofile 65536;
pid $WORK/nginx.pid;
error_log $WORK/error.log warn;
events { worker_connections 20000; }
http {
$(nginx_http_head "$WORK")
    ssl_certificate $WORK/server.pem;
    ssl_certificate_key $WORK/server.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    server {
        listen 127.0.0.1:$HTTP_PORT;
        location / { return 200 "$BODY"; }
    }
    server {
        listen 127.0.0.1:$TLS_PORT ssl;
        location / { return 200 "$BODY"; }
    }
}
EOF
"${PRIO[@]}" taskset -c "$SRV_CPU" nginx -p "$WORK" -c "$WORK/nginx.conf" -e "$WORK/error.log" \
  -g 'daemon off;' >"$WORK/nginx.out" 2>&1 &
NGX_PID=$!
for _ in $(seq 100); do
  curl -s -o /dev/null "http://127.0.0.1:$HTTP_PORT/" && break
  kill -0 "$NGX_PID" 2>/dev/null || { cat "$WORK/error.log" >&2; log "nginx did not start"; exit 1; }
  sleep 0.1
done

HTTP_URL="http://127.0.0.1:$HTTP_PORT/"
TLS_URL="https://127.0.0.1:$TLS_PORT/"
load=() has_url=0
for a in "${args[@]}"; do
  case "$a" in
    *'{http}'*) load+=("${a//\{http\}/$HTTP_URL}"); has_url=1 ;;
    *'{tls}'*) load+=("${a//\{tls\}/$TLS_URL}"); has_url=1 ;;
    *) load+=("$a") ;;
  esac
done
[ $has_url = 1 ] || load+=("$TLS_URL")
cacert=()
case " ${load[*]} " in *" https://"*) cacert=(--cacert "$WORK/ca.pem") ;; esac
log "load: ${load[*]}; builds: ${names[*]}; $REPS rounds; generator on CPU $GEN_CPU, nginx on $SRV_CPU"
{
  echo "load: ${load[*]}"
  for i in "${!names[@]}"; do echo "${names[$i]}=${bins[$i]} $(sha256sum "${bins[$i]}" | cut -c1-12)"; done
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r)"
} >"$OUT/about.txt"

for r in $(seq "$REPS"); do
  for i in "${!names[@]}"; do
    f="$OUT/${names[$i]}-$r.json"
    "${PRIO[@]}" taskset -c "$GEN_CPU" "${bins[$i]}" load --quiet "${cacert[@]}" \
      --json "$f" "${load[@]}" >/dev/null 2>"$OUT/${names[$i]}-$r.err" || true
    python3 - "$f" "${names[$i]}" "$r" <<'EOF'
import json, sys
f, name, r = sys.argv[1:]
try:
    d = json.load(open(f))
except Exception as e:
    print(f"{name:>10} {r}: no result ({e})"); sys.exit()
g, lat = d["generator"], d["latency_ms"]
for k in ("generator_lag", "corrected"):
    lat[k] = {q: (v if v is not None else float("nan")) for q, v in lat[k].items()}
m = g.get("machine") or {}
sent = max(d["requests"]["sent"], 1)
print(f"{name:>10} {r}: lag p99 {lat['generator_lag']['p99']:.2f} ms, max {lat['generator_lag']['max']:.2f} ms, "
      f"cpu {g['cpu_s']:.2f} s ({g['cpu_s']*1e6/sent:.2f} us/req), corrected p50 {lat['corrected']['p50']:.2f} p99 {lat['corrected']['p99']:.2f} ms, "
      f"rate {d['rate']['achieved']:.0f}/s, failed {d['requests']['failed']}, "
      f"steal {m.get('steal_ms', 0):.0f} ms, stalls {m.get('stalls', 0)} (max {m.get('stall_max_ms', 0):.1f} ms), others {m.get('others_cores', 0):.2f}")
EOF
  done
done | tee "$OUT/runs.txt"

python3 - "$OUT" "${names[@]}" <<'EOF' | tee "$OUT/medians.txt"
import json, statistics, sys, glob, os
out, names = sys.argv[1], sys.argv[2:]
print("medians (and ranges) over the rounds:")
for n in names:
    rows = []
    for f in sorted(glob.glob(os.path.join(out, f"{n}-*.json"))):
        try:
            d = json.load(open(f))
        except Exception:
            continue
        nn = lambda v: v if v is not None else float("nan")
        lag = {q: nn(v) for q, v in d["latency_ms"]["generator_lag"].items()}
        sent = max(d["requests"]["sent"], 1)
        rows.append((lag["p99"], lag["max"], d["generator"]["cpu_s"], d["generator"]["cpu_s"] * 1e6 / sent,
                     d["latency_ms"]["corrected"]["p50"], d["latency_ms"]["corrected"]["p99"], d["rate"]["achieved"]))
    if not rows:
        print(f"  {n}: no results"); continue
    col = lambda i: [r[i] for r in rows]
    fmt = lambda i, p=2: f"{statistics.median(col(i)):.{p}f} ({min(col(i)):.{p}f}-{max(col(i)):.{p}f})"
    print(f"  {n}: lag p99 {fmt(0)} ms, lag max {fmt(1)} ms, cpu {fmt(3)} us/req, "
          f"corrected p50 {fmt(4)} ms, p99 {fmt(5)} ms, rate {fmt(6, 0)}/s [{len(rows)} runs]")
EOF
log "raw results in $OUT"
