#!/usr/bin/env bash
# Runs a command with a filesystem view of its own, as a container runtime gives a
# pod's container: a private mount namespace whose root is a tmpfs holding the
# machine's top-level folders (bind mounts) plus the pod's volumes at their paths
# (/certs, /sds, ...), a /dev/shm of its own, and files laid over the machine's
# (/etc/hosts, /etc/resolv.conf). Nothing is created outside ROOT: the volume paths
# exist only in the new root. Two pods never share these paths.
#
#   pod-root.sh ROOT [--bind SRC:DST]... [--file SRC:DST]... [--tmp [--keep PATH]...]
#               [--private DIR]... [--pid] -- COMMAND [ARGS...]
#
# --private DIR (a top-level folder, /etc) gives the pod that folder as a tmpfs of
# its own holding the machine's entries (bind mounts): what the command creates in
# it (ingress-nginx's /etc/ingress-controller) is the pod's, and a --bind may name a
# folder there that the machine does not have.
#
# --tmp gives the pod a /tmp of its own (a tmpfs), holding only the machine's folders
# named by --keep (at their paths: the cluster's state, the harness's folders), so
# that what a controller writes at fixed /tmp paths stays the pod's. --pid runs the
# command as process 1 of a PID namespace of its own, as a container's: when it ends,
# every process it started (a daemon that forked away included) ends with it.
#
# ROOT is an empty folder (the caller's, removed by the caller); the mounts vanish
# with the command's mount namespace. Needs root (unshare, mount, chroot).
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: pod-root.sh ROOT [--bind SRC:DST]... [--file SRC:DST]... -- COMMAND [ARGS...]" >&2; exit 2; }
if [ "${POD_ROOT_INSIDE:-}" != 1 ]; then
  # A private mount namespace first (and a PID namespace, with --pid: this script
  # is then its process 1, and so, after its execs, the command); this script again
  # inside it.
  pid=()
  for a in "$@"; do
    [ "$a" = -- ] && break
    [ "$a" = --pid ] && pid=(--pid --fork --kill-child)
  done
  POD_ROOT_INSIDE=1 exec unshare --mount --propagation private "${pid[@]}" -- "$0" "$@"
fi
unset POD_ROOT_INSIDE
root=$1; shift
binds=(); files=(); keeps=(); privates=(); tmp=0; newpid=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bind) binds+=("$2"); shift 2 ;;
    --file) files+=("$2"); shift 2 ;;
    --tmp) tmp=1; shift ;;
    --keep) keeps+=("$2"); shift 2 ;;
    --private) privates+=("$2"); shift 2 ;;
    --pid) newpid=1; shift ;;
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
if [ $tmp = 1 ]; then
  umount -l "$root/tmp"
  mount -t tmpfs -o mode=1777 podtmp "$root/tmp"
  for k in "${keeps[@]}"; do
    case "$k" in /tmp/?*) ;; *) echo "pod-root.sh: --keep $k: only a path under /tmp" >&2; exit 2 ;; esac
    mkdir -p "$root$k"
    mount --rbind "$k" "$root$k"
  done
fi
for p in "${privates[@]}"; do
  case "$p" in /*/* | /) echo "pod-root.sh: --private $p: only a top-level folder" >&2; exit 2 ;; /*) ;; *) echo "pod-root.sh: --private $p is not an absolute path" >&2; exit 2 ;; esac
  [ -d "$p" ] || { echo "pod-root.sh: --private $p: no such folder" >&2; exit 2; }
  umount -l "$root$p"
  mount -t tmpfs -o mode=0755 podprivate "$root$p"
  for e in "$p"/* "$p"/.[!.]*; do
    [ -e "$e" ] || [ -L "$e" ] || continue
    name=${e##*/}
    if [ -L "$e" ]; then
      ln -s "$(readlink "$e")" "$root$p/$name"
    elif [ -d "$e" ]; then
      mkdir "$root$p/$name"
      mount --rbind "$e" "$root$p/$name"
    else
      touch "$root$p/$name"
      mount --bind "$e" "$root$p/$name"
    fi
  done
done
# A PID namespace's own /proc, so that its processes see one another by their pids.
if [ $newpid = 1 ]; then
  umount -l "$root/proc"
  mount -t proc podproc "$root/proc"
fi
for b in "${binds[@]}"; do
  src=${b%%:*}; dst=${b#*:}
  case "$dst" in
    /*/*)
      rest=${dst#/}; top=/${rest%%/*}
      for p in "${privates[@]}"; do
        if [ "$p" = "$top" ] && [ ! -d "$root$dst" ]; then mkdir -p "$root$dst"; fi
      done
      [ -d "$root$dst" ] || { echo "pod-root.sh: $dst must be a top-level path, an existing folder or one in a --private folder" >&2; exit 2; } ;;
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
