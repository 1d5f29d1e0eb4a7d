#!/bin/bash
# Interleaved rounds: every configuration once per round, 10 s each, generator on core 0.
# Usage: bench.sh ROUNDS OUTFILE [FIRST_ROUND] [all|short]
#   the second batch of results.txt was `bench.sh 3 OUT 4 short` (rounds 4-6, without
#   the chain and link-defer16-txts configurations)
set -u
R=${1:-3}; OUT=${2:-/tmp/uring-spike/results.txt}; FIRST=${3:-1}; SET=${4:-all}
B=/tmp/uring-spike/target/release/uring-spike
URL=http://127.0.0.1:18080/
quiet() { # wait up to 60 s for no compiler on the machine; report what ran
  for i in $(seq 60); do pgrep -x 'rustc|cc|ld|cc1|cargo|ld.lld|clang' >/dev/null || { echo quiet; return; }; sleep 1; done; echo NOISY
}
busy_cpu1() { awk '/^cpu1 /{print $2+$3+$4+$7+$8}' /proc/stat; }
run() { # name, command...
  local name=$1; shift
  local q=$(quiet); local b0=$(busy_cpu1)
  local o=$(taskset -c 0 /usr/bin/time -f "TIME %U %S %w %c" "$@" 2>&1)
  local b1=$(busy_cpu1)
  echo "round=$r name=$name machine=$q cpu1_busy_jiffies=$((b1-b0)) $(echo "$o" | grep -E '^mode=|^TIME|Generator lag|^ 50.0000%|^ 99.0000%|requests in' | tr '\n' ' ')" >> $OUT
  if [ "$name" = oha ]; then python3 -c "
import json;d=json.load(open('/tmp/uring-spike/oha.json'));p=d['latencyPercentiles'];s=d['summary']
print('round=$r name=oha-json rps=%.0f p50_us=%.1f p99_us=%.1f ok=%s'%(s['requestsPerSec'],p['p50']*1e6,p['p99']*1e6,d['statusCodeDistribution']))" >> $OUT; fi
}
for r in $(seq "$FIRST" $((FIRST + R - 1))); do
  run epoll        $B epoll
  run link         $B link
  run link-skip    $B link --skip
  run link-defer16 $B link --defer --skip --want 16 --rxts
  [ "$SET" = short ] || run chain $B chain
  run oha          sh -c "oha -z 10s -q 20000 -c 100 --latency-correction --no-tui --worker-threads 1 --output-format json $URL > /tmp/uring-spike/oha.json"
  run ingressbench /tmp/uring-spike/ingressbench.bin load -t1 -c100 -d10s -R20000 --quiet $URL
  run epoll-txts        $B epoll --txts
  run link-skip-txts    $B link --skip --txts
  [ "$SET" = short ] || run link-defer16-txts $B link --defer --skip --want 16 --rxts --txts
done
