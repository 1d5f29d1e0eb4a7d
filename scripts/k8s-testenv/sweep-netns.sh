#!/usr/bin/env bash
# Removes the network namespaces a killed test cluster left behind: ibk8s-* (a
# cluster's) and ibpod-* (its pods'), each only when no process is inside it and it
# was created more than MIN_AGE seconds ago (default 1800; a live cluster's namespace
# holds its API server, a live pod's its process, and a new one may be empty for a
# moment). up.sh runs it before it creates a cluster: a run killed with SIGKILL (a
# session's end, an OOM) runs no down.sh, and nothing else would ever remove them.
#
# Usage: sweep-netns.sh [MIN_AGE_SECONDS [NAME_REGEX]]   (one line per namespace removed;
# the regex, default '^(ibk8s|ibpod)-', is for its test, which must not touch a
# running cluster's namespaces)
set -euo pipefail
min_age=${1:-1800}
names=${2:-'^(ibk8s|ibpod)-'}
[[ "$min_age" =~ ^[0-9]+$ ]] || { echo "sweep-netns.sh: MIN_AGE must be a number of seconds, not '$min_age'" >&2; exit 2; }
now=$(date +%s)
for n in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "$names" || true); do
  f=/run/netns/$n
  [ -e "$f" ] || continue
  # The namespace file's time is its creation (nsfs keeps it).
  age=$((now - $(stat -c %Y "$f")))
  [ "$age" -ge "$min_age" ] || continue
  [ -z "$(ip netns pids "$n" 2>/dev/null)" ] || continue
  if ip netns delete "$n" 2>/dev/null; then
    echo "removed network namespace $n: no process inside, created ${age} s ago"
  fi
done
