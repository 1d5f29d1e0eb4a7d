#!/usr/bin/env bash
# `make bench`, HTTP/2 part (issue 29 section 4): ingressbench against h2load (Debian's
# nghttp2-client, the reference HTTP/2 load tool) and oha --http2 on a real nginx
# speaking h2c, in one run; generator pinned to one core, nginx to the other; tools
# interleaved rep by rep; medians and ratios printed, raw outputs kept.
#
#   J  --max, 10 connections x 10 streams: CPU per request, ingressbench / h2load
#   K  20,000 req/s, 10 connections x 10 streams: lag p50/p99 (ingressbench),
#      CPU per request, ingressbench / oha --http2
#   L  gRPC unary (Echo, 100 B) at 5,000 calls/s on the built-in backend: CPU per
#      call, ingressbench / ghz (built from the Go module proxy into the tools cache,
#      version pinned, when Go is there; its schema is bench/echo.proto)
#   M  gRPC streams (EchoStream, 32 B messages): 10 bidirectional calls, one per
#      connection, held for the run, 1,000 messages/s in all: CPU per message,
#      ingressbench (load --grpc-stream) / ghz (--stream-interval 10ms on each of 10
#      calls, -n 10: no call is reopened; its messages = OK calls x messages a call)
#
# Environment: BENCH_REPS (3), BENCH_QUICK=1 (3 s runs, 1 rep), BENCH_GEN_CPU /
# BENCH_SRV_CPU (0 / 1), BIN, BENCH_H2_ONLY (the scenarios to run, e.g. "M";
# default all).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${BIN:-$ROOT/target/release/ingressbench}
GEN_CPU=${BENCH_GEN_CPU:-0}
SRV_CPU=${BENCH_SRV_CPU:-1}
if [ "${BENCH_QUICK:-0}" = 1 ]; then REPS=${BENCH_REPS:-1}; D=3; else REPS=${BENCH_REPS:-3}; D=10; fi
RATE_K=${BENCH_H2_RATE:-20000}
RATE_L=${BENCH_GRPC_RATE:-5000}
STREAMS_M=10
RATE_M=1000
PER_CALL_M=$((RATE_M * D / STREAMS_M))
log() { echo "bench http2: $*" >&2; }
ONLY=" ${BENCH_H2_ONLY:-J K K1 L M} "
want() { [[ "$ONLY" == *" $1 "* ]]; }

SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
if ! command -v h2load >/dev/null; then
  log "installing nghttp2-client (h2load)"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get -o DPkg::Lock::Timeout=900 update -qq
  $SUDO apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends nghttp2-client >/dev/null ||
    log "nghttp2-client did not install: h2load's column will be n/a"
fi
OHA=$(command -v oha || echo "${CARGO_HOME:-$HOME/.cargo}/bin/oha")
[ -x "$OHA" ] || OHA=""
GHZ_VERSION=v0.120.0
TOOLS_BIN=$HOME/.cache/ingressbench/tools/bin
GHZ=$(command -v ghz || true)
if [ -z "$GHZ" ] && [ -x "$TOOLS_BIN/ghz" ]; then GHZ=$TOOLS_BIN/ghz; fi
if [ -z "$GHZ" ] && command -v go >/dev/null; then
  log "building ghz $GHZ_VERSION (go install, about a minute)"
  if (cd / && GOBIN=$TOOLS_BIN timeout 1200 go install "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION") >/dev/null 2>&1; then
    GHZ=$TOOLS_BIN/ghz
  else
    log "ghz build failed: L's peer column will be n/a"
  fi
fi

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT=$ROOT/target/bench/http2-$STAMP
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/ingressbench-bench-h2.XXXXXX)
NGX_PID="" BACK_PID=""
cleanup() {
  for p in $BACK_PID $NGX_PID; do
    kill -TERM "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

read -r H2C_PORT GRPC_PORT < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
[s.bind(("127.0.0.1", 0)) for s in ss]
print(*[s.getsockname()[1] for s in ss])')
BODY=$(head -c 1024 /dev/zero | tr '\0' 'x')
mkdir -p "$WORK/tmp"
source bench/nginx.sh
cat >"$WORK/nginx.conf" <<CONF
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/error.log warn;
events { worker_connections 4096; }
http {
$(nginx_http_head "$WORK")
    http2_max_requests 1000000000;
    http2_max_concurrent_streams 128;
    server {
        listen 127.0.0.1:$H2C_PORT http2;
        location / { return 200 "$BODY"; }
    }
}
CONF
taskset -c "$SRV_CPU" nginx -p "$WORK" -c "$WORK/nginx.conf" -e "$WORK/error.log" -g 'daemon off;' \
  >"$WORK/nginx.out" 2>&1 &
NGX_PID=$!
taskset -c "$SRV_CPU" "$BIN" backend --listen "127.0.0.1:$GRPC_PORT" --id grpc --workers 1 \
  >"$WORK/backend.out" 2>&1 &
BACK_PID=$!
sleep 1
URL=http://127.0.0.1:$H2C_PORT/
curl -s --http2-prior-knowledge -o /dev/null -w '%{http_version}' "$URL" | grep -q 2 ||
  { log "nginx does not answer h2c"; exit 1; }

PAYLOAD_B64=$(python3 -c 'import base64; print(base64.b64encode(b"x" * 100).decode())')
PAYLOAD30_B64=$(python3 -c 'import base64; print(base64.b64encode(b"x" * 30).decode())')
# run NAME CMD...: pinned, bounded; CPU seconds (user+sys) to NAME.time, output to NAME.out.
run() {
  local name=$1
  shift
  /usr/bin/time -f '%U %S %M' -o "$OUT/$name.time" timeout -k 5 $((D + 60)) \
    taskset -c "$GEN_CPU" "$@" >"$OUT/$name.out" 2>&1 </dev/null || log "$name: exit $?"
}
for rep in $(seq "$REPS"); do
  log "rep $rep of $REPS"
  order="ib peer"
  [ $((rep % 2)) = 0 ] && order="peer ib"
  for t in $order; do
    if [ "$t" = ib ]; then
      want J && run "J.ib.$rep" "$BIN" load --quiet --max -t1 -c10 --h2c --streams 10 -d${D}s --json "$OUT/J.ib.$rep.json" "$URL"
      want K && run "K.ib.$rep" "$BIN" load --quiet -t1 -c10 --h2c --streams 10 -R"$RATE_K" -d${D}s --json "$OUT/K.ib.$rep.json" "$URL"
      # K1: the same with a 1 ms send window, the batching oha's 1 ms tick does.
      want K1 && run "K1.ib.$rep" "$BIN" load --quiet -t1 -c10 --h2c --streams 10 -R"$RATE_K" -d${D}s --send-window 1ms \
        --json "$OUT/K1.ib.$rep.json" "$URL"
      want L && run "L.ib.$rep" "$BIN" load --quiet -t1 -c10 --h2c --streams 10 -R"$RATE_L" -d${D}s \
        --grpc ingressbench.Backend/Echo --grpc-payload 100B --json "$OUT/L.ib.$rep.json" "http://127.0.0.1:$GRPC_PORT/"
      want M && run "M.ib.$rep" "$BIN" load --quiet --grpc-stream -c "$STREAMS_M" -R "$RATE_M" -d${D}s \
        --message-size 32B --json "$OUT/M.ib.$rep.json" "http://127.0.0.1:$GRPC_PORT/"
    else
      want J && command -v h2load >/dev/null && run "J.h2load.$rep" h2load -t1 -c10 -m10 -D "$D" "$URL"
      want K && [ -n "$OHA" ] && run "K.oha.$rep" "$OHA" --no-tui --http2 -z ${D}s -c 10 -p 10 -q "$RATE_K" \
        --latency-correction --worker-threads 1 "$URL"
      # ghz: 10 connections, 100 workers (10 calls in flight per connection, as
      # ingressbench's 10 streams), one Go thread.
      want L && [ -n "$GHZ" ] && run "L.ghz.$rep" "$GHZ" --insecure --proto "$ROOT/bench/echo.proto" \
        --call ingressbench.Backend/Echo -d "{\"payload\":\"$PAYLOAD_B64\"}" --rps "$RATE_L" -z ${D}s \
        -c 100 --connections 10 --cpus 1 "127.0.0.1:$GRPC_PORT"
      # ghz: each of 10 workers holds one call on its own connection and sends a
      # message every 10 ms, PER_CALL_M of them, then ends its side (a 30-byte bytes
      # field: a 32-byte message, as ingressbench's).
      want M && [ -n "$GHZ" ] && run "M.ghz.$rep" "$GHZ" --insecure --proto "$ROOT/bench/echo.proto" \
        --call ingressbench.Backend/EchoStream -d "{\"payload\":\"$PAYLOAD30_B64\"}" \
        -n "$STREAMS_M" -c "$STREAMS_M" --connections "$STREAMS_M" --cpus 1 \
        --stream-interval $((1000 * STREAMS_M / RATE_M))ms --stream-call-count "$PER_CALL_M" \
        --stream-call-duration $((D + 30))s "127.0.0.1:$GRPC_PORT"
    fi
  done
done

python3 - "$OUT" "$REPS" "$PER_CALL_M" <<'PY' | tee "$OUT/table.md"
import json, re, statistics, sys
out, reps, per_call_m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def cpu(name):
    try:
        u, s, _ = open(f"{out}/{name}.time").read().split()[-3:]
        return float(u) + float(s)
    except Exception:
        return None
def ib(name):
    try:
        return json.load(open(f"{out}/{name}.json"))
    except Exception:
        return None
def h2load_done(name):
    try:
        m = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded", open(f"{out}/{name}.out").read())
        return int(m.group(1)) if m else None
    except Exception:
        return None
def oha_done(name):
    try:
        t = open(f"{out}/{name}.out").read()
        m = re.search(r"Success rate:\s+([\d.]+)%", t)
        rps = re.search(r"Requests/sec:\s+([\d.]+)", t)
        tot = re.search(r"Total:\s+([\d.]+) (ms|secs?)", t)
        secs = float(tot.group(1)) / (1000 if tot.group(2) == "ms" else 1) if tot else None
        return float(rps.group(1)) * secs * float(m.group(1)) / 100 if m and rps and secs else None
    except Exception:
        return None
def ghz_ok(name):
    try:
        m = re.search(r"\[OK\]\s+(\d+) responses", open(f"{out}/{name}.out").read())
        return int(m.group(1)) if m else None
    except Exception:
        return None
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None
def per_req(c, n):
    return c / n * 1e6 if c is not None and n else None
rows = []
def fmt(v, f="{:.2f}"):
    return "n/a" if v is None else f.format(v)
j_ib = med(per_req(cpu(f"J.ib.{r}"), (ib(f"J.ib.{r}") or {}).get("requests", {}).get("completed")) for r in range(1, reps + 1))
j_h2 = med(per_req(cpu(f"J.h2load.{r}"), h2load_done(f"J.h2load.{r}")) for r in range(1, reps + 1))
j_rps = med((ib(f"J.ib.{r}") or {}).get("rate", {}).get("achieved") for r in range(1, reps + 1))
k_ib = med(per_req(cpu(f"K.ib.{r}"), (ib(f"K.ib.{r}") or {}).get("requests", {}).get("completed")) for r in range(1, reps + 1))
k1_ib = med(per_req(cpu(f"K1.ib.{r}"), (ib(f"K1.ib.{r}") or {}).get("requests", {}).get("completed")) for r in range(1, reps + 1))
k_oha = med(per_req(cpu(f"K.oha.{r}"), oha_done(f"K.oha.{r}")) for r in range(1, reps + 1))
lag = lambda r, p: ((ib(f"K.ib.{r}") or {}).get("latency_ms", {}).get("generator_lag") or {}).get(p)
k_p50 = med(lag(r, "p50") for r in range(1, reps + 1))
k_p99 = med(lag(r, "p99") for r in range(1, reps + 1))
l_ghz = med(per_req(cpu(f"L.ghz.{r}"), ghz_ok(f"L.ghz.{r}")) for r in range(1, reps + 1))
l_ib = med(per_req(cpu(f"L.ib.{r}"), (ib(f"L.ib.{r}") or {}).get("requests", {}).get("completed")) for r in range(1, reps + 1))
m_ib = med(per_req(cpu(f"M.ib.{r}"), ((ib(f"M.ib.{r}") or {}).get("sessions") or {}).get("messages", {}).get("echoed")) for r in range(1, reps + 1))
m_ghz = med(per_req(cpu(f"M.ghz.{r}"), (ghz_ok(f"M.ghz.{r}") or 0) * per_call_m) for r in range(1, reps + 1))
ratio = lambda a, b: None if a is None or not b else a / b
print("| scenario | figure | ingressbench | peer | ratio | goal |")
print("|---|---|---|---|---|---|")
print(f"| J h2c --max, 10x10 streams | CPU us/request | {fmt(j_ib)} | h2load {fmt(j_h2)} | {fmt(ratio(j_ib, j_h2))} | <= 0.8 |")
print(f"| J | req/s (ingressbench) | {fmt(j_rps, '{:.0f}')} | | | |")
print(f"| K h2c 20k req/s, 10x10 | CPU us/request | {fmt(k_ib)} | oha --http2 {fmt(k_oha)} | {fmt(ratio(k_ib, k_oha))} | <= 1.0 |")
print(f"| K | generator lag p50 / p99 ms | {fmt(k_p50, '{:.3f}')} / {fmt(k_p99, '{:.3f}')} | | | p99 <= 0.100 |")
print(f"| K1 K with --send-window 1ms | CPU us/request | {fmt(k1_ib)} | oha --http2 {fmt(k_oha)} | {fmt(ratio(k1_ib, k_oha))} | (oha's 1 ms tick) |")
print(f"| L gRPC Echo 100 B, 5,000/s, 10x10 | CPU us/call | {fmt(l_ib)} | ghz {fmt(l_ghz)} | {fmt(ratio(l_ib, l_ghz))} | recorded |")
print(f"| M gRPC streams, 10 calls, 1,000 msg/s, 32 B | CPU us/message | {fmt(m_ib)} | ghz {fmt(m_ghz)} | {fmt(ratio(m_ib, m_ghz))} | recorded |")
PY
log "raw outputs in $OUT"
