#!/usr/bin/env bash
# Builds, once, the community ingress-nginx controller (the `ingress-nginx` profile)
# for the Kubernetes tests, cached by version in a folder of its own beside build.sh's:
# the controller from the Go module proxy (controller-v1.11.0, the only version it
# serves), and the /etc/nginx its image carries, for Debian's nginx 1.22 and its Lua
# modules: the controller's own Lua and template from its module, the template patched
# (ingress-nginx/patch-template.py says what it changes), the resty.* modules no
# registry here packages written by this project (ingress-nginx/lua), and Debian's
# mime.types and fastcgi_params.
#
#   scripts/k8s-testenv/build-ingress-nginx.sh              build what is missing
#   scripts/k8s-testenv/build-ingress-nginx.sh --check      exit 1 unless all is there
#   scripts/k8s-testenv/build-ingress-nginx.sh --print-dir  print the folder and exit
set -euo pipefail

# controller-v1.11.0 as the module proxy names it (v1.12-v1.15 are refused).
IN_MODULE=k8s.io/ingress-nginx
IN_VERSION=v0.0.0-20240708192948-52c50467d67d
IN_TAG=controller-v1.11.0
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The project's own parts are in the key: a change to them builds again.
OWN=$(cat "$HERE/ingress-nginx/patch-template.py" $(find "$HERE/ingress-nginx/lua/resty" -name '*.lua' | sort) | sha256sum | cut -c1-12)
RECIPE=r1

ROOT="${INGRESSBENCH_CACHE:-$HOME/.cache/ingressbench}/k8s-testenv"
KEY="ingress-nginx${IN_TAG#controller-v}-own${OWN}-${RECIPE}"
DIR="$ROOT/$KEY"
BIN="$DIR/bin"
ETC="$DIR/etc-nginx"
LOGS="$DIR/logs"
STAMP="$DIR/COMPLETE"

die() { echo "build-ingress-nginx.sh: error: $*" >&2; exit 1; }
say() { echo "build-ingress-nginx.sh: $*"; }

mode=build
for arg in "$@"; do
  case "$arg" in
    --check) mode=check ;;
    --print-dir) mode=print ;;
    -h | --help) sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$arg' (try --help)" ;;
  esac
done
if [ "$mode" = print ]; then echo "$DIR"; exit 0; fi

controller_ok() {
  local out
  [ -x "$BIN/nginx-ingress-controller" ] && out=$(go version -m "$BIN/nginx-ingress-controller" 2>/dev/null) &&
    grep -qE "^[[:space:]]+(dep|mod)[[:space:]]+$IN_MODULE[[:space:]]+$IN_VERSION" <<<"$out"
}
etc_ok() {
  [ -f "$ETC/template/nginx.tmpl" ] && [ -f "$ETC/lua/balancer.lua" ] && [ -f "$ETC/lua/resty/roundrobin.lua" ] &&
    [ -f "$ETC/mime.types" ] && [ -f "$ETC/nginx.conf" ]
}
complete() { controller_ok && etc_ok && [ -f "$STAMP" ]; }

if [ "$mode" = check ]; then
  complete && { say "complete: $DIR"; exit 0; }
  say "incomplete: $DIR" >&2
  exit 1
fi
if complete; then say "found nginx-ingress-controller $IN_TAG and its /etc/nginx: $DIR"; exit 0; fi

start_all=$(date +%s)
mkdir -p "$BIN" "$LOGS"
exec 9>"$ROOT/.lock-ingress-nginx"
flock 9
rm -f "$STAMP"
command -v go >/dev/null || die "go not found on PATH"
[ -f /etc/nginx/mime.types ] || die "/etc/nginx/mime.types not found (nginx-common; scripts/setup.sh installs nginx)"
export GOCACHE="$ROOT/in-go-build" GOMODCACHE="$ROOT/in-gomod" GOPATH="$ROOT/in-gopath"
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0
export GOFLAGS="-buildvcs=false -trimpath -modcacherw -p=${K8S_TESTENV_JOBS:-$(nproc)}"
unset GOBIN GOOS GOARCH
WORK=$(mktemp -d "$ROOT/in-work.XXXXXX")
trap 'rc=$?; rm -rf "$WORK"; [ $rc -eq 0 ] || echo "build-ingress-nginx.sh: failed (exit $rc); Go caches kept in $GOCACHE and $GOMODCACHE" >&2' EXIT

# The module's source (its Lua, template and go.sum).
mod="$WORK/in"; mkdir -p "$mod"
printf 'module ingressbench.invalid/k8s-testenv/ingress-nginx\n\ngo 1.22.0\n\nrequire %s %s\n' "$IN_MODULE" "$IN_VERSION" >"$mod/go.mod"
src=$(cd "$mod" && nice -n 19 go mod download -json "$IN_MODULE@$IN_VERSION" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
[ -f "$src/go.sum" ] && [ -d "$src/rootfs/etc/nginx/lua" ] || die "no source of $IN_MODULE@$IN_VERSION from the module proxy"

# --- The controller: a throw-away module requiring it. Its own go.sum comes along:
# the checksum database does not know every module it pins.
if ! controller_ok; then
  t0=$(date +%s)
  say "building nginx-ingress-controller $IN_TAG (nice -n 19; log $LOGS/controller.log)"
  printf '//go:build tools\n\npackage tools\n\nimport _ "%s/cmd/nginx"\n' "$IN_MODULE" >"$mod/tools.go"
  cp "$src/go.sum" "$mod/go.sum" && chmod u+w "$mod/go.sum"
  if ! (cd "$mod" && nice -n 19 go mod tidy && nice -n 19 go build -ldflags "-s -w" \
    -o "$WORK/nginx-ingress-controller" "$IN_MODULE/cmd/nginx") >"$LOGS/controller.log" 2>&1; then
    tail -n 30 "$LOGS/controller.log" >&2
    die "building $IN_MODULE/cmd/nginx@$IN_VERSION failed"
  fi
  mv -f "$WORK/nginx-ingress-controller" "$BIN/nginx-ingress-controller"
  controller_ok || die "the new nginx-ingress-controller is not $IN_VERSION by its build information"
  say "built nginx-ingress-controller in $(($(date +%s) - t0)) s"
fi

# --- /etc/nginx as the image has it, for Debian's nginx --------------------------------
rm -rf "$ETC.new" && mkdir -p "$ETC.new/template"
cp -r "$src/rootfs/etc/nginx/lua" "$ETC.new/lua"
rm -rf "$ETC.new/lua/test"
cp "$src/rootfs/etc/nginx/nginx.conf" "$ETC.new/nginx.conf"
python3 "$HERE/ingress-nginx/patch-template.py" "$src/rootfs/etc/nginx/template/nginx.tmpl" "$ETC.new/template/nginx.tmpl"
cp -r "$HERE/ingress-nginx/lua/resty" "$ETC.new/lua/resty"
cp /etc/nginx/mime.types /etc/nginx/fastcgi_params "$ETC.new/"
chmod -R u+w,a+rX "$ETC.new"
rm -rf "$ETC" && mv "$ETC.new" "$ETC"
etc_ok || die "the /etc/nginx under $ETC is incomplete"

{
  echo "key: $KEY"
  echo "completed: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "go: $(go env GOVERSION)"
  echo "nginx-ingress-controller: $IN_TAG ($IN_VERSION) sha256=$(sha256sum "$BIN/nginx-ingress-controller" | cut -c1-64)"
} >"$STAMP.new"
mv -f "$STAMP.new" "$STAMP"
go clean -cache 2>/dev/null || true
go clean -modcache 2>/dev/null || true
rm -rf "$GOCACHE" "$GOMODCACHE" "$GOPATH"
say "done in $(($(date +%s) - start_all)) s: $DIR ($(du -sh "$DIR" | cut -f1))"
