#!/usr/bin/env bash
# The closing summary of `make test` (scripts/test.sh), from nextest's JUnit file and
# the retries the timing tests recorded (common::record_retry):
#
#   scripts/test-summary.sh JUNIT RETRIES OPTED_OUT_COUNT OPT_OUT_NAMES FILTER
#
# Prints the slowest tests (so the next slowdown shows the day it lands), the retries by
# test, and what was left out. Exits 1 when the timing tests needed three or more
# retries in all: a regression that overloads the generator now and then must not pass
# because its second try did.
set -euo pipefail
junit=$1 retries=$2 opted_out=$3 opt_out_names=$4 filter=$5
SLOWEST=${INGRESSBENCH_TEST_SLOWEST:-15}
MAX_RETRIES=2
rc=0

echo
echo "== Slowest tests =="
if [ -f "$junit" ]; then
  # One <testcase .../> per test: "seconds binary name", slowest first.
  times=$(grep -o '<testcase [^>]*>' "$junit" |
    sed -n 's/.*name="\([^"]*\)".*classname="\([^"]*\)".*time="\([0-9.]*\)".*/\3 \2 \1/p' |
    sort -rn)
  head -n "$SLOWEST" <<<"$times" | awk '{ printf "  %7.1f s  %s %s\n", $1, $2, $3 }'
  total=$(awk '{ s += $1 } END { printf "%.0f", s }' <<<"$times")
  echo "  (the tests' own times add up to ${total} s)"
else
  echo "  no JUnit file at $junit: the run did not get as far as writing one"
fi

echo
echo "== Retries of timing tests =="
# One line per rerun: TEST, KIND, WHY (common::record_retry). KIND `retry`: the
# generator was late on a machine that did not explain it, counted toward the limit;
# `machine`: the generator said the machine took its time (steal or stalls), rerun
# once the machine settled and not counted (docs/testing.md).
n=0 m=0
if [ -f "$retries" ]; then
  n=$(awk -F'\t' '$2 == "retry"' "$retries" | grep -c . || true)
  m=$(awk -F'\t' '$2 == "machine"' "$retries" | grep -c . || true)
fi
# list KIND: the reruns of that kind by test, then each one's reason.
list() {
  awk -F'\t' -v k="$1" '$2 == k { print $1 }' "$retries" | sort | uniq -c | awk '{ printf "  %d x %s\n", $1, $2 }'
  echo "  why:"
  awk -F'\t' -v k="$1" '$2 == k { printf "    %s\t%s\n", $1, $3 }' "$retries"
}
if [ "$n" -eq 0 ]; then
  echo "  none"
else
  list retry
  if [ "$n" -gt "$MAX_RETRIES" ]; then
    echo "  FAILED: $n retries in one run (at most $MAX_RETRIES are tolerated): the generator was overloaded again and again"
    rc=1
  else
    echo "  $n retr$([ "$n" = 1 ] && echo y || echo ies) (at most $MAX_RETRIES are tolerated)"
  fi
fi

echo
echo "== Reruns the machine caused (not counted) =="
if [ "$m" -eq 0 ]; then
  echo "  none"
else
  list machine
  echo "  $m attempt(s) disturbed by the machine (stolen time or stalls), each rerun once it settled"
fi

echo
echo "== Left out =="
if [ "$opted_out" -gt 0 ]; then
  echo "  $opted_out test(s) opted out by INGRESSBENCH_TEST_OPT_OUT=$opt_out_names"
else
  echo "  none opted out"
fi
[ -n "$filter" ] && echo "  only the tests matching INGRESSBENCH_TEST_FILTER='$filter' ran"
exit "$rc"
