#!/usr/bin/env bash
# The engine's table of issue 31 on a machine with 8 or more cores: `--max` with 1 to 8
# threads against wrk, fixed rates against wrk2 and oha (lag, CPU per request, p50),
# and study S1's load (30,000 req/s over 1,000 TLS 1.2 connections) with 1 and 2
# threads. nginx runs with one worker per core of the upper half of the machine, each
# pinned; every generator is pinned to the lower half. Runs of the tools alternate.
#
# Such a machine often reaches no package registry, so everything it runs is carried
# in one folder made here first:
#
#   bench/manycore.sh bundle [DIR]   copy ingressbench (target/release, or IB=path), nginx, wrk,
#                                    wrk2 (WRK2=path, if built) and oha (if installed)
#                                    with every shared library they load and the
#                                    dynamic loader into DIR (default
#                                    target/manycore-bundle), plus a CA and a server
#                                    certificate for 127.0.0.1; copy DIR over
#   bench/manycore.sh run [DIR]      on the large machine: runs the table, prints it as
#                                    markdown and keeps every raw output in
#                                    DIR/out/<time>/ (table.md there too)
#
# Needs bash, python3 and taskset (util-linux) on the large machine, nothing else.
# Environment: MC_DURATION (seconds per run, default 10), MC_REPS (default 1),
# MC_CORES (take this many cores instead of nproc; below 8 the table is clipped, e.g.
# MC_CORES=2 to try the script on a small machine: one generator core, one nginx core).
# Traffic goes to 127.0.0.1 only; every run is bounded by `timeout`.
set -euo pipefail

HERE=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:-}
DIR=${2:-$HERE/target/manycore-bundle}
die() { echo "manycore: $*" >&2; exit 1; }
log() { echo "manycore: $*" >&2; }

# ------------------------------------------------------------------------- bundle
bundle() {
  local ib=${IB:-$HERE/target/release/ingressbench}
  [ -x "$ib" ] || die "no $ib: run 'cargo build --release' first"
  rm -rf "$DIR"
  mkdir -p "$DIR/bin" "$DIR/lib" "$DIR/certs"
  local tools=("ingressbench=$ib")
  local p
  p=$(command -v nginx || true)
  [ -n "$p" ] || die "nginx not found (apt-get install nginx-light)"
  tools+=("nginx=$p")
  p=$(command -v wrk || true)
  if [ -n "$p" ]; then tools+=("wrk=$p"); else log "wrk not found (apt-get install wrk): its rows will be n/a"; fi
  if [ -n "${WRK2:-}" ]; then tools+=("wrk2=$WRK2"); else log "WRK2 not set: wrk2's rows will be n/a"; fi
  p=$(command -v oha || true)
  [ -z "$p" ] && [ -x "${CARGO_HOME:-$HOME/.cargo}/bin/oha" ] && p=${CARGO_HOME:-$HOME/.cargo}/bin/oha
  if [ -n "$p" ]; then tools+=("oha=$p"); else log "oha not found (cargo install oha): its rows will be n/a"; fi
  local t name path lib
  for t in "${tools[@]}"; do
    name=${t%%=*}
    path=${t#*=}
    cp -L "$path" "$DIR/bin/$name"
    # Every library the binary loads, and the loader itself (the `=>`-less line).
    while read -r lib; do
      [ -n "$lib" ] && [ -f "$lib" ] && cp -Ln "$lib" "$DIR/lib/" 2>/dev/null || true
    done < <(ldd "$path" 2>/dev/null | awk '/=> \//{print $3} $1 ~ /^\/.*ld-linux/{print $1}')
  done
  local ld
  ld=$(ls "$DIR"/lib/ld-linux* 2>/dev/null | head -1 || true)
  [ -n "$ld" ] || die "no dynamic loader found among the libraries"
  # shellcheck source=certs.sh
  source "$HERE/bench/certs.sh"
  make_certs "$DIR/certs" "ingressbench manycore CA" 30
  cp "$0" "$DIR/manycore.sh"
  {
    echo "made $(date -u +%FT%TZ) on $(uname -srm)"
    "$ld" --library-path "$DIR/lib" "$DIR/bin/ingressbench" --version 2>&1 | head -1
    "$ld" --library-path "$DIR/lib" "$DIR/bin/nginx" -v 2>&1 | head -1
  } >"$DIR/VERSIONS"
  log "bundle in $DIR ($(du -sh "$DIR" | cut -f1)); on the large machine: $DIR/manycore.sh run $DIR"
}

# ------------------------------------------------------------------------- run
run_table() {
  [ -x "$DIR/bin/ingressbench" ] || die "no bundle in $DIR (run '$0 bundle' first)"
  command -v python3 >/dev/null || die "python3 is needed to read the results"
  command -v taskset >/dev/null || die "taskset (util-linux) is needed to pin"
  local LD
  LD=$(ls "$DIR"/lib/ld-linux* | head -1)
  x() { "$LD" --library-path "$DIR/lib" "$DIR/bin/$1" "${@:2}"; }
  have() { [ -x "$DIR/bin/$1" ]; }

  local cores=${MC_CORES:-$(nproc)}
  [ "$cores" -ge 2 ] || die "at least 2 cores are needed"
  [ "$cores" -ge 8 ] || log "only $cores cores: the table is clipped (the issue's needs 8 or more)"
  local half=$((cores / 2))
  local gen_cpus="0-$((half - 1))" srv_first=$half
  local D=${MC_DURATION:-10} REPS=${MC_REPS:-1}
  local OUT
  OUT=$DIR/out/$(date -u +%Y%m%dT%H%M%SZ)
  mkdir -p "$OUT/tmp"
  ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

  # nginx: one worker per core of the upper half, each pinned to its core.
  local affinity="" i
  for ((i = 0; i < cores; i++)); do
    if [ $i -ge $srv_first ]; then
      local mask=""
      for ((j = cores - 1; j >= 0; j--)); do if [ $j = $i ]; then mask+=1; else mask+=0; fi; done
      affinity+=" $mask"
    fi
  done
  local body
  body=$(head -c 1024 /dev/zero | tr '\0' 'x')
  cat >"$OUT/nginx.conf" <<EOF
worker_processes $((cores - half));
worker_cpu_affinity$affinity;
worker_rlimit_nofile 65536;
pid $OUT/nginx.pid;
error_log $OUT/nginx-error.log warn;
events { worker_connections 16384; }
http {
    access_log off;
    client_body_temp_path $OUT/tmp/b; proxy_temp_path $OUT/tmp/p; fastcgi_temp_path $OUT/tmp/f;
    uwsgi_temp_path $OUT/tmp/u; scgi_temp_path $OUT/tmp/s;
    keepalive_requests 1000000000;
    keepalive_timeout 300s;
    ssl_certificate $DIR/certs/server.pem;
    ssl_certificate_key $DIR/certs/server.key;
    server { listen 127.0.0.1:28080; location / { return 200 "$body"; } }
    server { listen 127.0.0.1:28443 ssl; ssl_protocols TLSv1.2; location / { return 200 "$body"; } }
}
EOF
  # Started directly, not through `x`: $! must be nginx's master (the loader runs it in
  # its own process), so that killing it stops nginx.
  "$LD" --library-path "$DIR/lib" "$DIR/bin/nginx" -p "$OUT" -c "$OUT/nginx.conf" \
    -e "$OUT/nginx-error.log" -g 'daemon off;' >"$OUT/nginx.out" 2>&1 &
  local ngx=$!
  trap 'kill -TERM '"$ngx"' 2>/dev/null; wait '"$ngx"' 2>/dev/null; true' EXIT
  sleep 1
  kill -0 "$ngx" 2>/dev/null || { cat "$OUT/nginx.out" "$OUT/nginx-error.log" >&2; die "nginx did not start"; }
  local HTTP=http://127.0.0.1:28080/ HTTPS=https://127.0.0.1:28443/

  # One run: name tool rep cmd...; CPU time (user+sys) from bash's `time`.
  TIMEFORMAT='%U %S'
  one() {
    local name=$1 tool=$2 rep=$3
    shift 3
    local f="$OUT/$name.$tool.$rep"
    # `x TOOL ARGS`: the bundled TOOL through the bundled loader (taskset runs a
    # program, not this script's function).
    if [ "$1" = x ]; then
      shift
      set -- "$LD" --library-path "$DIR/lib" "$DIR/bin/$1" "${@:2}"
    fi
    { time timeout $((D + 30)) taskset -c "$gen_cpus" "$@" >"$f.out" 2>"$f.err"; } 2>"$f.time" || true
  }
  ib() { one "$1" ingressbench "$2" x ingressbench load --quiet --json "$OUT/$1.ingressbench.$2.json" "${@:3}"; }
  local t rate rep rows=()
  local maxthreads=$((half < 8 ? half : 8))
  for ((rep = 1; rep <= REPS; rep++)); do
    for t in 1 2 4 8; do
      [ $t -le $maxthreads ] || continue
      ib "max-t$t" "$rep" --max -t$t -c$((64 * t)) -d${D}s "$HTTP"
      have wrk && one "max-t$t" wrk "$rep" x wrk -t$t -c$((64 * t)) -d${D}s "$HTTP"
    done
    for rate in 20000 50000; do
      ib "fixed-$rate" "$rep" -t1 -c100 -R$rate -d${D}s "$HTTP"
      have wrk2 && one "fixed-$rate" wrk2 "$rep" x wrk2 -t1 -c100 -R$rate -d${D}s --latency "$HTTP"
      have oha && one "fixed-$rate" oha "$rep" x oha --no-tui -z ${D}s -c 100 -q $rate "$HTTP"
    done
    for t in 2 4 8; do
      [ $t -le $maxthreads ] || continue
      ib "fixed-$((50000 * t))-t$t" "$rep" -t$t -c$((100 * t)) -R$((50000 * t)) -d${D}s "$HTTP"
    done
    for t in 1 2; do
      [ $t -le $maxthreads ] || continue
      ib "s1-t$t" "$rep" -t$t -c1000 -R30000 -d${D}s --tls-version 1.2 --cacert "$DIR/certs/ca.pem" "$HTTPS"
      have wrk2 && one "s1-t$t" wrk2 "$rep" x wrk2 -t$t -c1000 -R30000 -d${D}s --latency "$HTTPS"
    done
  done
  kill -TERM "$ngx" 2>/dev/null || true
  wait "$ngx" 2>/dev/null || true
  trap - EXIT

  {
    echo "# ingressbench engine table, $(date -u +%F)"
    echo
    echo "Machine: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $cores cores used ($(nproc) online), kernel $(uname -r); nginx: $((cores - half)) workers pinned to cores $srv_first-$((cores - 1)); generators pinned to $gen_cpus; $D s runs, $REPS repetition(s), medians."
    echo
    python3 - "$OUT" "$D" <<'PY'
import glob, json, os, re, statistics, sys
out, dur = sys.argv[1], float(sys.argv[2])
def cpu(path):
    try:
        u, s = open(path + ".time").read().split()[-2:]
        return float(u) + float(s)
    except Exception:
        return None
def runs(name, tool):
    return sorted(glob.glob(f"{out}/{name}.{tool}.*.out"))
def ib(name):
    rows = []
    for o in runs(name, "ingressbench"):
        base = o[:-4]
        rep = base.rsplit(".", 1)[1]
        try:
            r = json.load(open(f"{out}/{name}.ingressbench.{rep}.json"))
        except Exception:
            continue
        q = r["requests"]; n = q["completed"] + q["failed"]
        g = r["latency_ms"]["generator_lag"]; c = cpu(base)
        rows.append(dict(rps=n / r["duration_s"], cpu=(c or 0) / max(n, 1) * 1e6,
                         p50=r["latency_ms"]["corrected"].get("p50"), lag99=(g.get("p99") or 0) * 1000,
                         lagmax=(g.get("max") or 0) * 1000, late=r["generator"].get("woke_late"),
                         over=r["generator"]["overloaded"], wake=r["generator"].get("wakeup_us")))
    return rows
def wrkish(name, tool):
    rows = []
    for o in runs(name, tool):
        base = o[:-4]; text = open(o).read()
        m = re.search(r"(\d+) requests in", text); c = cpu(base)
        if not m:
            continue
        n = int(m.group(1))
        p50 = re.search(r"^\s*50\.000?%\s+([\d.]+)(us|ms|s)\b", text, re.M)
        v = None
        if p50:
            v = float(p50.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[p50.group(2)]
        rows.append(dict(rps=n / dur, cpu=(c or 0) / max(n, 1) * 1e6, p50=v))
    return rows
def oha(name):
    rows = []
    for o in runs(name, "oha"):
        base = o[:-4]; text = open(o).read(); c = cpu(base)
        m = re.search(r"Requests/sec:\s+([\d.]+)", text)
        if not m:
            continue
        rps = float(m.group(1)); n = rps * dur
        p = re.search(r"50(?:\.00)?% in ([\d.]+) secs", text)
        rows.append(dict(rps=rps, cpu=(c or 0) / max(n, 1) * 1e6, p50=float(p.group(1)) * 1e3 if p else None))
    return rows
def med(rows, k):
    v = [r[k] for r in rows if r.get(k) is not None]
    return statistics.median(v) if v else None
def f(v, fmt="{:,.0f}"):
    return "n/a" if v is None else fmt.format(v)
print("| run | ingressbench | peer | ratio (ours / peer) |")
print("| --- | --- | --- | --- |")
names = sorted({os.path.basename(p).split(".")[0] for p in glob.glob(f"{out}/*.out") if not p.endswith("nginx.out")},
               key=lambda n: (n.split("-")[0] != "max", n.split("-")[0] != "fixed", n))
for name in names:
    a = ib(name)
    if not a:
        continue
    ours = f"{f(med(a,'rps'))} req/s, {f(med(a,'cpu'),'{:.1f}')} µs CPU/req"
    if not name.startswith("max"):
        ours += f", p50 {f(med(a,'p50'),'{:.3f}')} ms, lag p99 {f(med(a,'lag99'),'{:.0f}')} µs, max {f(med(a,'lagmax'),'{:.0f}')} µs"
        w = a[0].get("wake")
        if w:
            ours += f" (wake-ups p50 {w['p50']:.0f} / p99 {w['p99']:.0f} µs)"
        if any(r["over"] for r in a):
            ours += ", overloaded"
        if any(r["late"] for r in a):
            ours += ", woke late"
    peers = []
    if name.startswith("max"):
        peers.append(("wrk", wrkish(name, "wrk")))
    else:
        peers.append(("wrk2", wrkish(name, "wrk2")))
        if name.startswith("fixed-") and name.count("-") == 1:
            peers.append(("oha", oha(name)))
    for tool, rows in peers:
        if rows:
            peer = f"{tool}: {f(med(rows,'rps'))} req/s, {f(med(rows,'cpu'),'{:.1f}')} µs CPU/req"
            if med(rows, "p50") is not None:
                peer += f", p50 {med(rows,'p50'):.3f} ms"
            ratio = f"CPU/req {med(a,'cpu') / med(rows,'cpu'):.2f}" if med(rows, 'cpu') else "n/a"
        else:
            peer, ratio = f"{tool}: n/a", "n/a"
        print(f"| {name} | {ours} | {peer} | {ratio} |")
        ours = "〃"
PY
  } | tee "$OUT/table.md"
  log "raw outputs in $OUT"
}

case "$cmd" in
  bundle) bundle ;;
  run) run_table ;;
  *) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
