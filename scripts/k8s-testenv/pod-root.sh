#!/usr/bin/env bash
# Runs a command with a filesystem view of its own, as a container runtime gives a
# pod's container: a private mount namespace whose root is a tmpfs holding the
# machine's top-level folders (bind mounts) plus the pod's volumes at their paths
# (/certs, /sds, ...), a /dev/shm of its own, and files laid over the machine's
# (/etc/hosts, /etc/resolv.conf). Nothing is created outside ROOT: the volume paths
# exist only in the new root. Two pods never share these paths.
#
#   pod-root.sh ROOT [--bind SRC:DST]... [--file SRC:DST]... -- COMMAND [ARGS...]
#
# ROOT is an empty folder (the caller's, removed by the caller); the mounts vanish
# with the command's mount namespace. Needs root (unshare, mount, chroot).
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: pod-root.sh ROOT [--bind SRC:DST]... [--file SRC:DST]... -- COMMAND [ARGS...]" >&2; exit 2; }
if [ "${POD_ROOT_INSIDE:-}" != 1 ]; then
  # A private mount namespace first; this script again inside it.
  POD_ROOT_INSIDE=1 exec unshare --mount --propagation private -- "$0" "$@"
fi
unset POD_ROOT_INSIDE
root=$1; shift
binds=(); files=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bind) binds+=("$2"); shift 2 ;;
    --file) files+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) echo "pod-root.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ $# -ge 1 ] || { echo "pod-root.sh: no command after --" >&2; exit 2; }
cwd=$PWD
mount -t tmpfs -o mode=0755 podroot "$root"
for e in /*; do
  name=${e#/}
  if [ -L "$e" ]; then
    ln -s "$(readlink "$e")" "$root/$name"
  elif [ -d "$e" ]; then
    mkdir "$root/$name"
    mount --rbind "$e" "$root/$name"
  fi
done
# The pod's own /dev/shm: Envoy keys its shared memory by a base id every Envoy
# shares, which containers keep apart this way.
mount -t tmpfs -o mode=1777 podshm "$root/dev/shm"
for b in "${binds[@]}"; do
  src=${b%%:*}; dst=${b#*:}
  case "$dst" in
    /*/*) [ -d "$root$dst" ] || { echo "pod-root.sh: $dst must be a top-level path or an existing folder" >&2; exit 2; } ;;
    /*) mkdir -p "$root$dst" ;;
    *) echo "pod-root.sh: $dst is not an absolute path" >&2; exit 2 ;;
  esac
  mount --bind "$src" "$root$dst"
done
for f in "${files[@]}"; do
  src=${f%%:*}; dst=${f#*:}
  [ -f "$root$dst" ] || { echo "pod-root.sh: $dst is not a file of the machine to lay over" >&2; exit 2; }
  mount --bind "$src" "$root$dst"
done
exec chroot "$root" /bin/sh -c 'cd "$1" 2>/dev/null || cd /; shift; exec "$@"' pod-root "$cwd" "$@"
