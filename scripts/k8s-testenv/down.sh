#!/usr/bin/env bash
# Tears down what scripts/k8s-testenv/up.sh brought up:
#
#   scripts/k8s-testenv/down.sh STATE_DIR [--keep-state] [--grace SECONDS]
#
# Sends SIGTERM to every process group recorded in STATE_DIR/pids/ (only when the
# recorded process is still the one that was started: same pid and start time) and to
# every process still inside the network namespace named in STATE_DIR/netns; sends
# SIGKILL to whatever is left after --grace seconds (default 5); deletes the namespace;
# removes STATE_DIR unless --keep-state. Idempotent: safe to call twice, on a STATE_DIR
# that no longer exists, or after up.sh failed half-way. It only ever touches a namespace
# named ibk8s-* and a STATE_DIR holding up.sh's marker file (.ibk8s-state).
set -euo pipefail

die() { echo "down.sh: error: $*" >&2; exit 1; }
say() { echo "down.sh: $*"; }

state_dir=""
keep_state=0
grace=5
while [ $# -gt 0 ]; do
  case "$1" in
    --keep-state) keep_state=1; shift ;;
    --grace) [ $# -ge 2 ] || die "--grace needs a value"; grace=$2; shift 2 ;;
    --grace=*) grace=${1#--grace=}; shift ;;
    -h | --help) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$1' (try --help)" ;;
    *) [ -z "$state_dir" ] || die "one STATE_DIR only (got '$state_dir' and '$1')"; state_dir=$1; shift ;;
  esac
done
[ -n "$state_dir" ] || die "usage: down.sh STATE_DIR [--keep-state] [--grace SECONDS]"
[[ "$grace" =~ ^[0-9]+$ ]] || die "--grace wants whole seconds, not '$grace'"

if [ ! -e "$state_dir" ]; then
  say "$state_dir does not exist: nothing to do"
  exit 0
fi
[ -d "$state_dir" ] || die "$state_dir is not a directory"
S=$(cd "$state_dir" && pwd)
[ -f "$S/.ibk8s-state" ] || die "$S has no .ibk8s-state marker: not a state directory of up.sh, left alone"
[ "$(id -u)" = 0 ] || die "must run as root (it deletes a network namespace)"

ns=""
if [ -f "$S/netns" ]; then
  ns=$(cat "$S/netns")
  [[ "$ns" =~ ^ibk8s-[a-z0-9][a-z0-9-]{0,25}$ ]] || die "$S/netns names '$ns', not an ibk8s-* namespace: left alone"
fi

if [ -n "$ns" ] && [ -e "/run/netns/$ns" ] &&
  [ "$(stat -L -c %i /proc/$$/ns/net)" = "$(stat -L -c %i "/run/netns/$ns")" ]; then
  die "running inside $ns itself: run down.sh from outside the namespace"
fi

# shellcheck source=scripts/k8s-testenv/proc.sh
source "$(dirname "${BASH_SOURCE[0]}")/proc.sh"
group_alive() { # pgid: true while a process of that group is alive (zombies do not count)
  ps -e -o pgid=,stat= | awk -v g="$1" '$1 == g && $2 !~ /^Z/ { found = 1 } END { exit !found }'
}
ns_pids() { # the pids of the processes inside the namespace (none if it is gone)
  [ -n "$ns" ] && [ -e "/run/netns/$ns" ] || return 0
  ip netns pids "$ns" 2>/dev/null || true
}
alive() { # pid: running and not a zombie
  local st
  st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [ -n "$st" ] && [[ "$st" != Z* ]]
}

# The process groups that are still ours. A group id is only reused once no process of
# the old group is left, so: if its leader still runs it must have the recorded start
# time; if the leader is gone, the group's remaining members are still ours.
groups=()
names=()
shopt -s nullglob
for f in "$S"/pids/*.pid; do
  name=$(basename "$f" .pid)
  pid=$(cat "$f" 2>/dev/null || true)
  if ! [[ "$pid" =~ ^[0-9]+$ ]] || [ "$pid" -le 1 ]; then continue; fi
  want=$(cat "$S/pids/$name.start" 2>/dev/null || true)
  if [ -e "/proc/$pid" ]; then
    got=$(start_time "$pid" || true)
    if [ -n "$want" ] && [ "$got" != "$want" ]; then
      say "pid $pid ($name) is another process now (start time $got, recorded $want): left alone"
      continue
    fi
  fi
  group_alive "$pid" || continue
  groups+=("$pid")
  names+=("$name")
done

signal_all() { # signal: to each recorded group, then to every process left in the namespace
  local g p
  for g in "${groups[@]}"; do kill "-$1" -- "-$g" 2>/dev/null || true; done
  for p in $(ns_pids); do kill "-$1" "$p" 2>/dev/null || true; done
}
anything_left() {
  local g p
  for g in "${groups[@]}"; do group_alive "$g" && return 0; done
  for p in $(ns_pids); do alive "$p" && return 0; done
  return 1
}

t0=$(date +%s%N)
if [ ${#groups[@]} -gt 0 ] || [ -n "$(ns_pids)" ]; then
  say "stopping ${names[*]:-}$([ -n "$(ns_pids)" ] && echo " and what runs in $ns") (SIGTERM)"
  signal_all TERM
  deadline=$(($(date +%s%N) + grace * 1000000000))
  while anything_left && [ "$(date +%s%N)" -lt "$deadline" ]; do sleep 0.1; done
  if anything_left; then
    say "still running after ${grace} s: SIGKILL"
    signal_all KILL
    deadline=$(($(date +%s%N) + 5000000000))
    while anything_left && [ "$(date +%s%N)" -lt "$deadline" ]; do sleep 0.1; done
  fi
  anything_left && die "processes survived SIGKILL (groups: ${groups[*]}; in $ns: $(ns_pids | tr '\n' ' ')); $S kept"
  say "processes stopped in $((($(date +%s%N) - t0) / 1000000)) ms"
fi

if [ -n "$ns" ] && [ -e "/run/netns/$ns" ]; then
  ip netns delete "$ns" || die "cannot delete network namespace $ns"
  say "deleted network namespace $ns"
fi

if [ $keep_state = 1 ]; then
  rm -f "$S"/pids/*.pid "$S"/pids/*.start
  say "kept $S (--keep-state)"
else
  rm -rf -- "$S"
  say "removed $S"
fi
