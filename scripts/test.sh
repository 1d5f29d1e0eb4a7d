#!/usr/bin/env bash
# `make test`: what CI runs. Checks formatting and lints, builds the Kubernetes test
# environment (in the background, beside the Rust build: its first minutes are
# downloads), builds the tests once, runs them under cargo-nextest (.config/nextest.toml:
# timing tests alone, everything else in parallel), then prints a closing summary: the
# slowest tests, every retry a timing test needed (three or more fail the run), and
# the tests left out on request.
#
#   INGRESSBENCH_TEST_OPT_OUT=cpu-quotas   leave out the tests that need cgroup CPU
#                                          quotas (root and a cpu controller); CI never
#                                          sets it, and the summary counts them
#   INGRESSBENCH_TEST_FILTER='<filterset>' run only these tests (nextest's -E), for a
#                                          developer's quick loop; the summary says so
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
CACHE=${INGRESSBENCH_CACHE:-$HOME/.cache/ingressbench}
# The profile the tests are built with (Cargo.toml explains the choice).
PROFILE=${INGRESSBENCH_TEST_PROFILE:-test-release}
OUT=target/nextest/ci
START=$(date +%s)
mkdir -p "$OUT"

elapsed() { echo $(($(date +%s) - START)); }
say() { echo "make test: $* ($(elapsed) s)"; }

# --- The Kubernetes test environment, in the background -------------------------------
k8s_log="$OUT/k8s-testenv-build.log"
# A process group of its own, so that a failed lint or build stops its go commands too.
setsid bash -c 'scripts/k8s-testenv/build.sh && scripts/k8s-testenv/build-gateways.sh && scripts/k8s-testenv/build-haproxy-ingress.sh && scripts/k8s-testenv/build-ingress-nginx.sh && scripts/k8s-testenv/build-nginx-gateway-fabric.sh' >"$k8s_log" 2>&1 &
k8s_pid=$!
cleanup() {
  if kill -0 "$k8s_pid" 2>/dev/null; then
    kill -TERM -- "-$k8s_pid" 2>/dev/null || true
    wait "$k8s_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT

# What the demo needs, and cargo-nextest, pinned, from crates.io into the cache
# (setup.sh --test-tools): installed while the Kubernetes build downloads its modules.
if ! scripts/setup.sh --test-tools >"$OUT/setup-test-tools.log" 2>&1; then
  cat "$OUT/setup-test-tools.log" >&2
  exit 1
fi
NEXTEST="$CACHE/tools/bin/cargo-nextest"
say "setup done, cargo-nextest ready"

# --- Lints, then one build of every test binary and the binary under test -------------
$CARGO fmt --all --check
$CARGO clippy --workspace --locked --all-targets -- -D warnings
say "lints pass"
build_args=(--workspace --locked --cargo-profile "$PROFILE")
"$NEXTEST" nextest list "${build_args[@]}" --message-format oneline >"$OUT/tests.txt"
say "built $(wc -l <"$OUT/tests.txt") tests"

if ! wait "$k8s_pid"; then
  tail -n 40 "$k8s_log" >&2
  echo "make test: the Kubernetes test environment did not build (log: $k8s_log)" >&2
  exit 1
fi
tail -n 1 "$k8s_log"
say "Kubernetes test environment ready"

# --- Which tests -----------------------------------------------------------------------
filter=()
opted_out=""
for need in $(tr ',' ' ' <<<"${INGRESSBENCH_TEST_OPT_OUT:-}"); do
  case "$need" in
    cpu-quotas) opted_out+=" or test(/::cpu_quotas::/)" ;;
    *) echo "make test: INGRESSBENCH_TEST_OPT_OUT: unknown '$need' (known: cpu-quotas)" >&2; exit 2 ;;
  esac
done
expr="all()"
[ -n "${INGRESSBENCH_TEST_FILTER:-}" ] && expr="($INGRESSBENCH_TEST_FILTER)"
[ -n "$opted_out" ] && expr="$expr and not (${opted_out# or })"
[ "$expr" != "all()" ] && filter=(-E "$expr")
n_opted_out=0
if [ -n "$opted_out" ]; then
  n_opted_out=$("$NEXTEST" nextest list "${build_args[@]}" -E "${opted_out# or }" --message-format oneline | grep -c . || true)
fi

# --- A quiet machine for the timing tests ----------------------------------------------
# They run first, right after minutes of both cores compiling: wait (bounded) until
# the machine is back to its normal, as `ingressbench machine --settle` judges it: two
# seconds in a row with no stolen time or stall that could put a run's lag over the
# limit, other processes off the CPUs, and the timed-wait floor back near the best
# it showed while waiting (docs/testing.md). Not settling in time fails nothing: the
# tests' own reruns judge each attempt.
settle_log="$OUT/settle.txt"
"target/$PROFILE/ingressbench" machine --settle 120s >"$settle_log" 2>&1 || true
say "$(tail -n 1 "$settle_log")"

# --- Run -------------------------------------------------------------------------------
retries="$PWD/$OUT/retries.tsv"
: >"$retries"
rc=0
INGRESSBENCH_TEST_RETRIES="$retries" "$NEXTEST" nextest run "${build_args[@]}" --profile ci \
  --no-fail-fast --hide-progress-bar "${filter[@]}" || rc=$?

# --- Closing summary -------------------------------------------------------------------
scripts/test-summary.sh "$OUT/junit.xml" "$retries" "$n_opted_out" "${INGRESSBENCH_TEST_OPT_OUT:-}" \
  "${INGRESSBENCH_TEST_FILTER:-}" || { [ "$rc" -ne 0 ] || rc=1; }
say "done, exit $rc"
exit "$rc"
