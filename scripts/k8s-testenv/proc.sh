# Sourced by up.sh and down.sh: what both read of a process in /proc.

# start_time PID: the process's start time (clock ticks since boot), field 22 of its
# stat; with the pid, it tells the process up.sh started from a later one that reused
# the pid.
start_time() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  # shellcheck disable=SC2086 # split on purpose
  set -- $stat
  echo "${20}"
}
