#!/usr/bin/env bash
# `make bench`: ingressbench against its peers (Debian wrk, oha) on a real nginx, in one
# run, so that every goal of issue 2 section 5 is a ratio between tools measured on the
# same machine at the same time. Generator pinned to one core, nginx to the other; tools
# interleaved rep by rep; medians; report drawn by bench/report.py from the raw files.
#
# Environment:
#   BENCH_REPS=N     repetitions of each run (default 3; 1 with BENCH_QUICK=1)
#   BENCH_QUICK=1    short smoke (3 s runs, about a minute in all)
#   BENCH_SOAK=1     also the 10-minute 20,000 req/s memory soak (BENCH_SOAK_S seconds)
#   BENCH_GEN_CPU / BENCH_SRV_CPU   cores of the generator / nginx (default 0 / 1)
#   BENCH_TLS_RATE / BENCH_HS_RATE  rates of scenarios C and D (default 20000 / 400)
#   BENCH_S1_RATE / BENCH_S1_CONNS  scenario F, study S1's load (default 30000 / 1000)
#   BENCH_MIX_RATE   scenario H, a request mix of 5,000 targets (default 5000)
#   BENCH_OHA_THREADS               oha's --worker-threads (default 1; "default": oha's)
#   BENCH_QUIET_MAX  seconds to wait for idle cores before each run (default 300; 10 quick)
#   BENCH_NOISE_MAX / BENCH_RETRIES  a run during which other processes took more than
#                    this % of a core is done again, up to this many times (15 / 4; 0 quick)
#   BENCH_NICE       nice level of the generators and nginx (default -20; empty: none)
#   BIN              the ingressbench binary (default target/release/ingressbench)
# Raw outputs are kept in target/bench/<time>/ (the table is also written there).
# A tool that fails (or is missing) gives "n/a"; a missed goal prints MISSED; exit 0.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${BIN:-$ROOT/target/release/ingressbench}
QUICK=${BENCH_QUICK:-0}
SOAK=${BENCH_SOAK:-0}
SOAK_S=${BENCH_SOAK_S:-600}
GEN_CPU=${BENCH_GEN_CPU:-0}
SRV_CPU=${BENCH_SRV_CPU:-1}
OHA_THREADS=${BENCH_OHA_THREADS:-1}
RATE_B=20000
RATE_C=${BENCH_TLS_RATE:-20000}
RATE_D=${BENCH_HS_RATE:-400}
CONN_D=20
RATE_F=${BENCH_S1_RATE:-30000}
CONN_F=${BENCH_S1_CONNS:-1000}
# G: a backend that holds every answer for the first second of every five, at 1,500
# req/s for a whole number of five-second windows: a fifth of the requests wait a time
# spread evenly over 0-1 s, so the true p90 is 500 ms and the true p99 950 ms.
RATE_G=1500
DG=10
# H: a request mix of 5,000 targets over 50 virtual hosts, the same file for
# ingressbench (--targets) and Vegeta (-targets): the generator's memory with a mix.
RATE_H=${BENCH_MIX_RATE:-5000}
MIX_TARGETS=5000
MIX_HOSTS=50
DH=10
VEGETA_VERSION=v12.13.0
CLK_TCK=$(getconf CLK_TCK)
NOISE_MAX=${BENCH_NOISE_MAX:-15}
NICE=${BENCH_NICE--20}
if [ "$QUICK" = 1 ]; then
  QUIET_MAX=${BENCH_QUIET_MAX:-10}
  RETRIES=${BENCH_RETRIES:-0}
  REPS=${BENCH_REPS:-1}
  DA=3 DB=3 DC=3 DD=3 DE=3 DF=3 DH=3
else
  QUIET_MAX=${BENCH_QUIET_MAX:-300}
  RETRIES=${BENCH_RETRIES:-4}
  REPS=${BENCH_REPS:-3}
  DA=10 DB=15 DC=15 DD=10 DE=10 DF=15
fi
CONN_E=10000
RATE_E=1000

log() { echo "bench: $*" >&2; }

# ---------------------------------------------------------------- prerequisites
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
need_apt=()
command -v wrk >/dev/null || need_apt+=(wrk)
command -v nginx >/dev/null || need_apt+=(nginx-light)
command -v openssl >/dev/null || need_apt+=(openssl)
[ -x /usr/bin/time ] || need_apt+=(time)
command -v python3 >/dev/null || need_apt+=(python3)
command -v taskset >/dev/null || need_apt+=(util-linux)
command -v timeout >/dev/null || need_apt+=(coreutils)
command -v pgrep >/dev/null || need_apt+=(procps)
command -v curl >/dev/null || need_apt+=(curl)
command -v lscpu >/dev/null || need_apt+=(util-linux)
if [ ${#need_apt[@]} -gt 0 ]; then
  log "installing ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Another apt may be running: wait for its lock instead of failing.
  $SUDO apt-get -o DPkg::Lock::Timeout=900 update -qq
  $SUDO apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT=$ROOT/target/bench/$STAMP
mkdir -p "$OUT"
RUNS=$OUT/runs.tsv
: >"$RUNS"

CARGO_BIN=${CARGO_HOME:-$HOME/.cargo}/bin
OHA=$(command -v oha || true)
if [ -z "$OHA" ] && [ -x "$CARGO_BIN/oha" ]; then OHA=$CARGO_BIN/oha; fi
if [ -z "$OHA" ]; then
  log "installing oha (cargo install oha --locked: compiles for several minutes)"
  if (cd / && timeout 3600 cargo install oha --locked) >"$OUT/oha-install.log" 2>&1; then
    OHA=$CARGO_BIN/oha
  else
    log "oha install failed (see $OUT/oha-install.log): its columns will be n/a"
    OHA=""
  fi
fi

# Vegeta reads the same targets file as --targets: built from the Go module proxy into
# the tools cache, version pinned, when Go is there (else its column is n/a).
TOOLS_BIN=$HOME/.cache/ingressbench/tools/bin
VEGETA=$(command -v vegeta || true)
if [ -z "$VEGETA" ] && [ -x "$TOOLS_BIN/vegeta" ]; then VEGETA=$TOOLS_BIN/vegeta; fi
if [ -z "$VEGETA" ] && command -v go >/dev/null; then
  log "building vegeta $VEGETA_VERSION (go install, about a minute)"
  if (cd / && GOBIN=$TOOLS_BIN timeout 1200 go install "github.com/tsenart/vegeta/v12@$VEGETA_VERSION") \
    >"$OUT/vegeta-install.log" 2>&1; then
    VEGETA=$TOOLS_BIN/vegeta
  else
    log "vegeta build failed (see $OUT/vegeta-install.log): its column will be n/a"
  fi
fi
[ -n "$VEGETA" ] || log "no vegeta and no Go to build it: scenario H's peer column will be n/a"

# oha's flags changed between versions: take them from its own --help.
OHA_COMMON=() OHA_TLS=() OHA_NOKA=() OHA_CACERT=0 OHA_OUT=0
if [ -n "$OHA" ]; then
  oha_help=$("$OHA" --help 2>&1 || true)
  has() { grep -q -- "$1" <<<"$oha_help"; }
  has '--no-tui' && OHA_COMMON+=(--no-tui)
  if has '--output-format'; then OHA_COMMON+=(--output-format json)
  else OHA_COMMON+=(-j); fi
  # Measure from the intended send time, as ingressbench's "corrected" latency does.
  has '--latency-correction' && OHA_COMMON+=(--latency-correction)
  # oha starts one runtime thread per physical core whatever its affinity (2 here, both
  # on core 0): one thread, like ingressbench -t1 and wrk -t1, on the one core it is
  # given (BENCH_OHA_THREADS=default keeps oha's own choice, ~30 % more CPU here).
  if has '--worker-threads' && [ "$OHA_THREADS" != default ]; then
    OHA_COMMON+=(--worker-threads "$OHA_THREADS")
  fi
  has '-o, --output' && OHA_OUT=1
  # Verify the server as ingressbench does when oha can; otherwise skip verification.
  has '--cacert' && OHA_CACERT=1
  OHA_NOKA=(--disable-keepalive)
fi

# 10,000 connections need that many descriptors in ingressbench and in nginx.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
NOFILE=$(ulimit -n)
WCONN=$((NOFILE - 100))
[ "$WCONN" -gt 20000 ] && WCONN=20000

# Generators and nginx ahead of whatever else runs on the machine (the same for all).
PRIO=()
if [ -n "$NICE" ] && [ "$(nice -n "$NICE" nice 2>/dev/null)" -lt "$(nice)" ]; then PRIO=(nice -n "$NICE"); fi

# ---------------------------------------------------------------- nginx
WORK=$(mktemp -d /tmp/ingressbench-bench.XXXXXX)
NGX_PID=""
STALL_PID=""
CUR=""
cleanup() {
  local pids p
  if [ -n "$CUR" ] && kill -0 "$CUR" 2>/dev/null; then
    kill -TERM "$CUR" 2>/dev/null || true
    wait "$CUR" 2>/dev/null || true
  fi
  if [ -n "$STALL_PID" ] && kill -0 "$STALL_PID" 2>/dev/null; then
    kill -TERM "$STALL_PID" 2>/dev/null || true
    wait "$STALL_PID" 2>/dev/null || true
  fi
  if [ -n "$NGX_PID" ] && kill -0 "$NGX_PID" 2>/dev/null; then
    pids=$(pgrep -P "$NGX_PID" || true)
    kill -TERM "$NGX_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$NGX_PID" 2>/dev/null || break; sleep 0.1; done
    for p in $NGX_PID $pids; do kill -KILL "$p" 2>/dev/null || true; done
    wait "$NGX_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

read -r HTTP_PORT TLS_PORT HS_PORT S1_PORT STALL_PORT < <(python3 - <<'EOF'
import socket
ss = [socket.socket() for _ in range(5)]
for s in ss:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])
EOF
)

# A private CA and a server certificate for 127.0.0.1 (bench/certs.sh).
source bench/certs.sh
source bench/nginx.sh
make_certs "$WORK" "ingressbench bench CA" 2
CACERT=$WORK/ca.pem
if [ "$OHA_CACERT" = 1 ]; then OHA_TLS=(--cacert "$CACERT"); else OHA_TLS=(--insecure); fi

BODY=$(head -c 1024 /dev/zero | tr '\0' 'x')
mkdir -p "$WORK/tmp"
cat >"$WORK/nginx.conf" <<EOF
worker_processes 1;
worker_rlimit_nofile $NOFILE;
pid $WORK/nginx.pid;
error_log $WORK/error.log warn;
events { worker_connections $WCONN; }
http {
$(nginx_http_head "$WORK")
    ssl_certificate $WORK/server.pem;
    ssl_certificate_key $WORK/server.key;
    ssl_protocols TLSv1.3;
    # No resumption: every new TLS connection is a full handshake.
    ssl_session_tickets off;
    ssl_session_cache off;
    log_format handshake '\$ssl_session_reused \$connection_requests \$ssl_protocol';

    server {
        listen 127.0.0.1:$HTTP_PORT;
        location / { return 200 "$BODY"; }
    }
    server {
        listen 127.0.0.1:$TLS_PORT ssl;
        location / { return 200 "$BODY"; }
    }
    # Scenario F (study S1): TLS 1.2, as S1's clients spoke.
    server {
        listen 127.0.0.1:$S1_PORT ssl;
        ssl_protocols TLSv1.2;
        location / { return 200 "$BODY"; }
    }
    # Scenario D: same as above plus a log that proves one full handshake per request.
    server {
        listen 127.0.0.1:$HS_PORT ssl;
        access_log $WORK/handshake.log handshake;
        location / { return 200 "$BODY"; }
    }
}
EOF
"${PRIO[@]}" taskset -c "$SRV_CPU" nginx -p "$WORK" -c "$WORK/nginx.conf" -e "$WORK/error.log" -g 'daemon off;' \
  >"$WORK/nginx.out" 2>&1 &
NGX_PID=$!
for _ in $(seq 100); do
  curl -s -o /dev/null "http://127.0.0.1:$HTTP_PORT/" && break
  kill -0 "$NGX_PID" 2>/dev/null || { cat "$WORK/nginx.out" "$WORK/error.log" >&2 || true; log "nginx did not start"; exit 1; }
  sleep 0.1
done
NGX_WORKER=$(pgrep -P "$NGX_PID" | head -1)
size=$(curl -s "http://127.0.0.1:$HTTP_PORT/" | wc -c)
tls=$(curl -s --cacert "$CACERT" --tlsv1.3 -o /dev/null -w '%{http_code}' "https://127.0.0.1:$TLS_PORT/")
[ "$size" = 1024 ] && [ "$tls" = 200 ] || { log "nginx check failed: body $size bytes, https $tls"; exit 1; }
tls12=$(curl -s --cacert "$CACERT" --tlsv1.2 --tls-max 1.2 -o /dev/null -w '%{http_code}' "https://127.0.0.1:$S1_PORT/")
[ "$tls12" = 200 ] || { log "nginx check failed: TLS 1.2 port answered $tls12"; exit 1; }
cp "$WORK/nginx.conf" "$OUT/nginx.conf"

# Measure one binary from start to end, even if target/ is rebuilt meanwhile.
if [ -x "$BIN" ]; then
  cp "$BIN" "$WORK/ingressbench"
  BIN=$WORK/ingressbench
fi

# ---------------------------------------------------------------- machine and versions
{
  echo "date=$(date -u +%Y-%m-%d)"
  echo "cpu=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)"
  echo "cores=$(nproc --all)"
  echo "kernel=$(uname -r)"
  echo "wrk=$(wrk -v 2>&1 | head -1 | sed 's/ *Copyright.*//' || true)"
  echo "oha=$([ -n "$OHA" ] && "$OHA" --version 2>&1 | head -1 || echo missing) (${OHA_COMMON[*]})"
  echo "nginx=$(nginx -v 2>&1 | head -1)"
  echo "openssl=$(openssl version | head -1)"
  echo "ingressbench=$("$BIN" --version 2>/dev/null | head -1 || echo missing) (git $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- src Cargo.toml Cargo.lock 2>/dev/null || echo ', uncommitted changes in src'), sha256 $(sha256sum "$BIN" 2>/dev/null | cut -c1-12))"
  echo "nice=${PRIO[*]:-none}"
  echo "reps=$REPS"
  echo "quick=$QUICK"
  echo "gen_cpu=$GEN_CPU"
  echo "srv_cpu=$SRV_CPU"
  echo "nofile=$NOFILE"
  echo "loadavg=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "clk_tck=$CLK_TCK"
  echo "rate_b=$RATE_B"
  echo "rate_c=$RATE_C"
  echo "rate_d=$RATE_D"
  echo "conn_d=$CONN_D"
  echo "rate_f=$RATE_F"
  echo "conn_f=$CONN_F"
  echo "rate_g=$RATE_G"
  echo "rate_h=$RATE_H"
  echo "dur_h=$DH"
  echo "mix=$MIX_TARGETS $MIX_HOSTS"
  echo "vegeta=$([ -n "$VEGETA" ] && "$VEGETA" -version 2>&1 | head -1 || echo missing)"
  echo "dur_fg=$DF $DG"
  echo "dur=$DA $DB $DC $DD $DE"
  echo "soak_s=$SOAK_S"
} >"$OUT/machine.txt"
sed 's/^/  /' "$OUT/machine.txt" >&2

# ---------------------------------------------------------------- runs
# CPU ticks of the server of the current run (`scen`, run's local): nginx's worker, or
# for G the frozen backend.
srv_ticks() {
  local p=$NGX_WORKER
  [ "${scen:-}" = G ] && p=$STALL_PID
  sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12 + $13}' || echo 0
}
# Idle ticks (idle + iowait) of the generator's and the server's cores. Busy time is
# taken as wall time minus idle time: the kernel measures idle time exactly, while the
# busy fields of /proc/stat are sampled at each tick and miss short bursts.
core_idle() {
  awk -v g="cpu$GEN_CPU" -v s="cpu$SRV_CPU" '$1 == g {gi = $5+$6} $1 == s {si = $5+$6}
    END {print gi, si}' /proc/stat
}
# The machine is shared: before each run wait (up to QUIET_MAX s) until both cores have
# been at least 85 % idle for two seconds.
quiet() {
  local waited=0 g0 s0 g1 s1 idle
  while :; do
    read -r g0 s0 < <(core_idle)
    sleep 2
    read -r g1 s1 < <(core_idle)
    idle=$(((g1 - g0) < (s1 - s0) ? (g1 - g0) : (s1 - s0)))
    [ $((idle * 100)) -ge $((2 * 85 * CLK_TCK)) ] && break
    waited=$((waited + 2))
    if [ "$waited" -ge "$QUIET_MAX" ]; then
      log "cores still busy after ${waited}s of waiting: running anyway"
      return
    fi
  done
  [ "$waited" -eq 0 ] || log "waited ${waited}s for quiet cores"
}

# run SCEN TOOL REP DUR EXTRA CMD...: one pinned, time-bounded run; its CPU and peak RSS
# from /usr/bin/time, nginx's CPU over the run from /proc; one line into runs.tsv. A run
# during which other processes took more than NOISE_MAX % of either core is done again
# (up to RETRIES times; the last attempt counts, marked noisy in the report).
run() {
  local scen=$1 tool=$2 rep=$3 dur=$4 extra=$5 rc s0 s1 g0 g1 c0 c1 t0 t1 off hs try=0 noise
  local wall gbusy cbusy
  shift 5
  local base=$OUT/$scen.$tool.$rep
  while :; do
    rc=0
    off=0
    [ "$scen" = D ] && off=$(stat -c %s "$WORK/handshake.log" 2>/dev/null || echo 0)
    quiet
    s0=$(srv_ticks)
    read -r g0 c0 < <(core_idle)
    t0=$(date +%s%N)
    if [ "$1" = missing ]; then
      rc=127
    else
      rm -f "$base.time"
      timeout -k 5 $((dur + 60)) /usr/bin/time -f 'CPU %U %S %M %e' -o "$base.time" \
        "${PRIO[@]}" taskset -c "$GEN_CPU" "$@" >"$base.out" 2>&1 </dev/null &
      CUR=$!
      wait "$CUR" || rc=$?
      CUR=""
    fi
    t1=$(date +%s%N)
    read -r g1 c1 < <(core_idle)
    s1=$(srv_ticks)
    wall=$(((t1 - t0) / 1000000 + 1))
    # Busy ticks of each core over the run (everyone's).
    gbusy=$((wall * CLK_TCK / 1000 - (g1 - g0)))
    cbusy=$((wall * CLK_TCK / 1000 - (c1 - c0)))
    # Percent of the run's wall time that other processes took on the busier core.
    noise=$(awk -v clk="$CLK_TCK" -v wall="$wall" -v g="$gbusy" -v c="$cbusy" -v s=$((s1 - s0)) '
      /^CPU / {cpu = ($2 + $3) * clk}
      END {a = (g - cpu) / clk * 1000 / wall; b = (c - s) / clk * 1000 / wall
           printf "%d", 100 * (a > b ? a : b)}' "$base.time" 2>/dev/null || true)
    noise=${noise%%$'\n'*}
    noise=${noise:-0}
    [ "$rc" != 127 ] && [ "$noise" -gt "$NOISE_MAX" ] && [ "$try" -lt "$RETRIES" ] || break
    try=$((try + 1))
    log "$(printf '%s %-12s rep %s: other processes took %s %% of a core: again (%s/%s)' \
      "$scen" "$tool" "$rep" "$noise" "$try" "$RETRIES")"
  done
  extra="$extra;wall_ms=$wall;gen_core_ticks=$gbusy;srv_core_ticks=$cbusy;retries=$try"
  if [ "$scen" = D ] && [ -f "$WORK/handshake.log" ]; then
    # lines = connections served; reused = resumed sessions; multi = >1 request on one.
    hs=$(tail -c +$((off + 1)) "$WORK/handshake.log" |
      awk '{n++; if ($1 == "r") r++; if ($2 > 1) m++} END {printf "hs_conns=%d;hs_reused=%d;hs_multi=%d", n, r, m}')
    extra="$extra;$hs"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$scen" "$tool" "$rep" "$rc" "$dur" "$((s1 - s0))" "$extra" >>"$RUNS"
  log "$(printf '%s %-12s rep %s: exit %s' "$scen" "$tool" "$rep" "$rc")"
}

IB_OK=1
[ -x "$BIN" ] || { log "$BIN not built: ingressbench columns will be n/a"; IB_OK=0; }
ib() { if [ "$IB_OK" = 1 ]; then echo "$BIN"; else echo missing; fi; }
oha() { if [ -n "$OHA" ]; then echo "$OHA"; else echo missing; fi; }
HTTP=http://127.0.0.1:$HTTP_PORT/
HTTPS=https://127.0.0.1:$TLS_PORT/
HS=https://127.0.0.1:$HS_PORT/

# pair SCEN REP PEER: ingressbench and the peer, in alternating order from rep to rep.
pair() {
  local scen=$1 rep=$2 peer=$3 first second t
  if [ $((rep % 2)) = 1 ]; then first=ib second=$peer; else first=$peer second=ib; fi
  for t in $first $second; do "run_${scen}_$t" "$rep"; done
}
J() { echo "$OUT/$1.ingressbench.$2.json"; }
# oha's JSON goes to its own file when it can, else to stdout (the run's .out file).
# Sets OHA_O to the output flags of oha for scenario $1, rep $2.
O() { OHA_O=(); if [ "$OHA_OUT" = 1 ]; then OHA_O=(-o "$OUT/$1.oha.$2.json"); fi; }

run_A_ib() { run A ingressbench "$1" $DA "" "$(ib)" load --quiet --max -t1 -c50 -d${DA}s --json "$(J A "$1")" "$HTTP"; }
run_A_wrk() { run A wrk "$1" $DA "" wrk -t1 -c50 -d${DA}s "$HTTP"; }
run_B_ib() { run B ingressbench "$1" $DB "" "$(ib)" load --quiet -t1 -c100 -R$RATE_B -d${DB}s --json "$(J B "$1")" "$HTTP"; }
run_B_oha() { O B "$1"; run B oha "$1" $DB "" "$(oha)" -z ${DB}s -c 100 -q $RATE_B "${OHA_COMMON[@]}" "${OHA_O[@]}" "$HTTP"; }
# I: B's load with a 1 ms send window (the batching wrk2 and oha do on their 1 ms
# tick), run right after B in each rep: its peer is B's oha run.
run_I_ib() {
  run I ingressbench "$1" $DB "" "$(ib)" load --quiet -t1 -c100 -R$RATE_B -d${DB}s --send-window 1ms \
    --json "$(J I "$1")" "$HTTP"
}
run_C_ib() {
  run C ingressbench "$1" $DC "" "$(ib)" load --quiet -t1 -c100 -R$RATE_C -d${DC}s --tls-version 1.3 \
    --cacert "$CACERT" --json "$(J C "$1")" "$HTTPS"
}
run_C_oha() {
  O C "$1"
  run C oha "$1" $DC "" "$(oha)" -z ${DC}s -c 100 -q $RATE_C "${OHA_COMMON[@]}" "${OHA_O[@]}" "${OHA_TLS[@]}" "$HTTPS"
}
run_D_ib() {
  run D ingressbench "$1" $DD "" "$(ib)" load --quiet -t1 -c$CONN_D -R$RATE_D -d${DD}s --new-connection \
    --tls-version 1.3 --cacert "$CACERT" --json "$(J D "$1")" "$HS"
}
run_D_oha() {
  O D "$1"
  run D oha "$1" $DD "" "$(oha)" -z ${DD}s -c $CONN_D -q $RATE_D "${OHA_NOKA[@]}" "${OHA_COMMON[@]}" \
    "${OHA_O[@]}" "${OHA_TLS[@]}" "$HS"
}
run_F_ib() {
  run F ingressbench "$1" $DF "" "$(ib)" load --quiet -t1 -c$CONN_F -R$RATE_F -d${DF}s --tls-version 1.2 \
    --cacert "$CACERT" --json "$(J F "$1")" "https://127.0.0.1:$S1_PORT/"
}
run_F_oha() {
  O F "$1"
  run F oha "$1" $DF "" "$(oha)" -z ${DF}s -c $CONN_F -q $RATE_F "${OHA_COMMON[@]}" "${OHA_O[@]}" "${OHA_TLS[@]}" \
    "https://127.0.0.1:$S1_PORT/"
}
run_G_ib() {
  run G ingressbench "$1" $DG "" "$(ib)" load --quiet -t1 -c50 -R$RATE_G -d${DG}s --json "$(J G "$1")" "$STALL"
}
run_G_oha() { O G "$1"; run G oha "$1" $DG "" "$(oha)" -z ${DG}s -c 50 -q $RATE_G "${OHA_COMMON[@]}" "${OHA_O[@]}" "$STALL"; }
# H's targets: every URL at nginx's address, the virtual host in a Host header: the
# file both tools read as it is.
for ((i = 0; i < MIX_TARGETS; i++)); do
  printf 'GET http://127.0.0.1:%s/r%s\nHost: h%s.test\n\n' "$HTTP_PORT" "$i" $((i % MIX_HOSTS))
done >"$WORK/mix.targets"
run_H_ib() {
  run H ingressbench "$1" $DH "" "$(ib)" load --quiet -t1 -c100 -R$RATE_H -d${DH}s --targets "$WORK/mix.targets" \
    --json "$(J H "$1")" "$HTTP"
}
run_H_vegeta() {
  local v=missing
  [ -n "$VEGETA" ] && v=$VEGETA
  run H vegeta "$1" $DH "" "$v" attack -targets "$WORK/mix.targets" -rate "$RATE_H" -duration ${DH}s \
    -connections 100 -workers 100 -max-workers 100 -output "$OUT/H.vegeta.$1.bin"
  # Its summary, read by bench/report.py (not part of the measured run).
  if [ -n "$VEGETA" ] && [ -f "$OUT/H.vegeta.$1.bin" ]; then
    "$VEGETA" report -type=json <"$OUT/H.vegeta.$1.bin" >"$OUT/H.vegeta.$1.json" 2>/dev/null || true
    rm -f "$OUT/H.vegeta.$1.bin"
  fi
}
run_E_ib() {
  run E ingressbench "$1" $DE "nofile=$NOFILE" "$(ib)" load --quiet -t1 -c$CONN_E -R$RATE_E -d${DE}s \
    --json "$(J E "$1")" "$HTTP"
}

# G's frozen server: the built-in backend, one worker on nginx's core.
STALL=http://127.0.0.1:$STALL_PORT/
G_OK=0
if [ "$IB_OK" = 1 ]; then
  "${PRIO[@]}" taskset -c "$SRV_CPU" "$BIN" backend --listen "127.0.0.1:$STALL_PORT" --id stall --workers 1 \
    --stall 1s/5s >"$WORK/stall.out" 2>&1 &
  STALL_PID=$!
  for _ in $(seq 100); do
    # Answered at once outside the stall, or held up to 1 s inside it.
    curl -s -m 3 -o /dev/null "$STALL" && { G_OK=1; break; }
    sleep 0.1
  done
fi
[ "$G_OK" = 1 ] || log "G skipped: its frozen backend did not answer (see $WORK/stall.out)"

for rep in $(seq "$REPS"); do
  log "rep $rep of $REPS"
  pair A "$rep" wrk
  pair B "$rep" oha
  run_I_ib "$rep"
  pair C "$rep" oha
  pair D "$rep" oha
  pair F "$rep" oha
  [ "$G_OK" = 1 ] && pair G "$rep" oha
  pair H "$rep" vegeta
  if [ "$WCONN" -gt $((CONN_E + 50)) ]; then
    run_E_ib "$rep"
  else
    log "E skipped: only $NOFILE descriptors"
  fi
done

# ---------------------------------------------------------------- soak (optional)
if [ "$SOAK" = 1 ]; then
  log "soak: $SOAK_S s at $RATE_B req/s, RSS sampled every 10 s"
  : >"$OUT/soak.tsv"
  if [ "$IB_OK" = 1 ]; then
    timeout -k 5 $((SOAK_S + 60)) "${PRIO[@]}" taskset -c "$GEN_CPU" "$BIN" load --quiet -t1 -c100 -R$RATE_B \
      -d${SOAK_S}s --json "$OUT/soak.json" "$HTTP" >"$OUT/soak.out" 2>&1 </dev/null &
    CUR=$!
    sleep 0.5
    ibpid=$(pgrep -P "$CUR" | head -1 || true)
    t=0
    while [ -n "$ibpid" ] && kill -0 "$ibpid" 2>/dev/null; do
      rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$ibpid/status" 2>/dev/null || true)
      [ -n "$rss" ] && printf '%s\t%s\n' "$t" "$rss" >>"$OUT/soak.tsv"
      sleep 10
      t=$((t + 10))
    done
    wait "$CUR" || true
    CUR=""
  fi
fi

python3 "$ROOT/bench/report.py" "$OUT" | tee "$OUT/table.md"
log "raw outputs in $OUT"
