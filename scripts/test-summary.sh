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
n=0
[ -f "$retries" ] && n=$(grep -c . "$retries" || true)
if [ "$n" -eq 0 ]; then
  echo "  none"
else
  cut -f1 "$retries" | sort | uniq -c | awk '{ printf "  %d x %s\n", $1, $2 }'
  echo "  why:"
  sed 's/^/    /' "$retries"
  if [ "$n" -gt "$MAX_RETRIES" ]; then
    echo "  FAILED: $n retries in one run (at most $MAX_RETRIES are tolerated): the generator was overloaded again and again"
    rc=1
  else
    echo "  $n retr$([ "$n" = 1 ] && echo y || echo ies) (at most $MAX_RETRIES are tolerated)"
  fi
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
