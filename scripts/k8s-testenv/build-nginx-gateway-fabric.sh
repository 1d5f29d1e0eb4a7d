#!/usr/bin/env bash
# Builds, once, NGINX Gateway Fabric v1.6.2 (the `nginx-gateway-fabric` profile) for
# the Kubernetes tests, cached by version in a folder of its own beside build.sh's:
# its control plane (`gateway`) from the Go module proxy, and from the same module
# what its nginx image carries (the base nginx.conf, the njs module it routes header
# and query matches with) and its CRDs (gateway.nginx.org).
#
#   scripts/k8s-testenv/build-nginx-gateway-fabric.sh              build what is missing
#   scripts/k8s-testenv/build-nginx-gateway-fabric.sh --check      exit 1 unless all is there
#   scripts/k8s-testenv/build-nginx-gateway-fabric.sh --print-dir  print the folder and exit
#
# The proxy refuses the release under its module path (github.com/nginx/...) and
# serves it under the project's previous one (github.com/nginxinc/...), whose go.mod
# still declares the new path: `go install` refuses the mismatch by either name, so
# the binary is built inside a writable copy of the downloaded module.
set -euo pipefail

NGF_MODULE=github.com/nginxinc/nginx-gateway-fabric
NGF_VERSION=v1.6.2
# The zip's hash as `go mod download -json` gives it: the pin.
NGF_SUM='h1:9DBLE5zSOnKmj7UyxBqKiwiV+UcsU3IMKKjg0DfLRYk='
RECIPE=r2

ROOT="${INGRESSBENCH_CACHE:-$HOME/.cache/ingressbench}/k8s-testenv"
KEY="nginx-gateway-fabric${NGF_VERSION#v}-${RECIPE}"
DIR="$ROOT/$KEY"
BIN="$DIR/bin"
ETC="$DIR/etc-nginx"
CRDS="$DIR/crds"
LOGS="$DIR/logs"
STAMP="$DIR/COMPLETE"

die() { echo "build-nginx-gateway-fabric.sh: error: $*" >&2; exit 1; }
say() { echo "build-nginx-gateway-fabric.sh: $*"; }

mode=build
for arg in "$@"; do
  case "$arg" in
    --check) mode=check ;;
    --print-dir) mode=print ;;
    -h | --help) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$arg' (try --help)" ;;
  esac
done
if [ "$mode" = print ]; then echo "$DIR"; exit 0; fi

# (Outputs taken whole before grep: `grep -q` leaving a pipe early fails it under
# pipefail.)
gateway_ok() {
  local out
  [ -x "$BIN/gateway" ] && out=$(timeout 60 "$BIN/gateway" --help 2>&1) && grep -qF "static-mode" <<<"$out" &&
    [ -f "$DIR/VERSION" ] && grep -qxF "$NGF_VERSION" "$DIR/VERSION"
}
etc_ok() {
  [ -f "$ETC/nginx.conf" ] && grep -q "ssl_protocols TLSv1.2 TLSv1.3" "$ETC/nginx.conf" &&
    [ -f "$ETC/njs/httpmatches.js" ] && [ -f "$ETC/grpc-error-pages.conf" ] &&
    [ -f "$CRDS/crds.yaml" ]
}
complete() { gateway_ok && etc_ok && [ -f "$STAMP" ]; }

if [ "$mode" = check ]; then
  complete && { say "complete: $DIR"; exit 0; }
  say "incomplete: $DIR" >&2
  exit 1
fi
if complete; then say "found gateway $NGF_VERSION, its nginx.conf, njs module and CRDs: $DIR"; exit 0; fi

start_all=$(date +%s)
mkdir -p "$BIN" "$LOGS"
exec 9>"$ROOT/.lock-nginx-gateway-fabric"
flock 9
rm -f "$STAMP"
command -v go >/dev/null || die "go not found on PATH"
export GOCACHE="$ROOT/ngf-go-build" GOMODCACHE="$ROOT/ngf-gomod" GOPATH="$ROOT/ngf-gopath"
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0
export GOFLAGS="-buildvcs=false -trimpath -modcacherw -p=${K8S_TESTENV_JOBS:-$(nproc)}"
unset GOBIN GOOS GOARCH
WORK=$(mktemp -d "$ROOT/ngf-work.XXXXXX")
trap 'rc=$?; rm -rf "$WORK"; [ $rc -eq 0 ] || echo "build-nginx-gateway-fabric.sh: failed (exit $rc); Go caches kept in $GOCACHE and $GOMODCACHE" >&2' EXIT

# The module's source, pinned by its zip's hash.
json=$(cd "$WORK" && nice -n 19 go mod download -json "$NGF_MODULE@$NGF_VERSION") ||
  die "the module proxy did not serve $NGF_MODULE@$NGF_VERSION: $json"
src=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
sum=$(sed -n 's/^[[:space:]]*"Sum": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
[ "$sum" = "$NGF_SUM" ] || die "$NGF_MODULE@$NGF_VERSION has hash '$sum', not the pinned $NGF_SUM"
[ -f "$src/go.mod" ] && [ -d "$src/cmd/gateway" ] || die "no source of $NGF_MODULE@$NGF_VERSION from the module proxy"

# What its Makefile stamps in besides the version: without a report period the
# control plane exits at start ("error parsing telemetry report period"). No
# endpoint: its reports go to its own log, and the harness turns them off anyway.
LDVARS="-X main.telemetryReportPeriod=24h -X main.telemetryEndpointInsecure=false"

if ! gateway_ok; then
  t0=$(date +%s)
  say "building gateway $NGF_VERSION (nice -n 19; log $LOGS/gateway.log)"
  cp -r "$src" "$WORK/ngf" && chmod -R u+w "$WORK/ngf"
  if ! (cd "$WORK/ngf" && nice -n 19 go build -ldflags "-s -w -X main.version=${NGF_VERSION#v} $LDVARS" \
    -o "$WORK/gateway" ./cmd/gateway) >"$LOGS/gateway.log" 2>&1; then
    tail -n 30 "$LOGS/gateway.log" >&2
    die "building $NGF_MODULE/cmd/gateway@$NGF_VERSION failed"
  fi
  mv -f "$WORK/gateway" "$BIN/gateway"
  echo "$NGF_VERSION" >"$DIR/VERSION"
  gateway_ok || die "the new gateway does not run ('gateway --help')"
  say "built gateway in $(($(date +%s) - t0)) s"
fi

# --- What its nginx image carries, and its CRDs -------------------------------------
conf=$(find "$src/internal" -path '*/nginx/conf/nginx.conf' | head -n 1)
njs=$(find "$src/internal" -name httpmatches.js -not -path '*/test*' | head -n 1)
[ -n "$conf" ] && [ -n "$njs" ] || die "no nginx.conf or httpmatches.js in $NGF_MODULE@$NGF_VERSION"
[ -f "$src/deploy/crds.yaml" ] || die "no deploy/crds.yaml in $NGF_MODULE@$NGF_VERSION"
rm -rf "$ETC.new" && mkdir -p "$ETC.new/njs" "$CRDS"
# The image's nginx.conf for Debian's nginx: its stream module is a dynamic one
# (libnginx-mod-stream) where the image's nginx has it built in; the njs module is
# read from /etc/nginx/njs (the pod's /etc/nginx is a volume of its own; the image
# puts it under /usr/lib/nginx/modules, which is the machine's here); and the TLS
# versions are the image's nginx's (1.27.4: TLSv1.2 TLSv1.3), which NGF writes
# none of: 1.22's default has no TLSv1.3 and answered a 1.3 client's handshake
# with a protocol_version alert.
{
  echo "load_module /usr/lib/nginx/modules/ngx_stream_module.so;"
  sed -e 's#/usr/lib/nginx/modules/njs/httpmatches.js#/etc/nginx/njs/httpmatches.js#' \
    -e 's#^http {$#http {\n  ssl_protocols TLSv1.2 TLSv1.3;#' "$conf"
} >"$ETC.new/nginx.conf"
grep -qx "  ssl_protocols TLSv1.2 TLSv1.3;" "$ETC.new/nginx.conf" || die "nginx.conf of $NGF_VERSION has no 'http {' line to add the TLS versions to"
grep -qF "js_import /etc/nginx/njs/httpmatches.js;" "$ETC.new/nginx.conf" || die "nginx.conf of $NGF_VERSION imports its njs module otherwise than expected"
cp "$njs" "$ETC.new/njs/httpmatches.js"
for f in grpc-error-locations.conf grpc-error-pages.conf; do
  cp "$(dirname "$conf")/$f" "$ETC.new/$f" || die "no $f beside nginx.conf in $NGF_MODULE@$NGF_VERSION"
done
cp /etc/nginx/mime.types "$ETC.new/" 2>/dev/null || die "/etc/nginx/mime.types not found (scripts/setup.sh installs nginx)"
cp "$src/deploy/crds.yaml" "$CRDS/crds.yaml"
chmod -R u+w,a+rX "$ETC.new" "$CRDS"
rm -rf "$ETC" && mv "$ETC.new" "$ETC"
etc_ok || die "the files under $DIR are incomplete"

{
  echo "key: $KEY"
  echo "completed: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "go: $(go env GOVERSION)"
  echo "gateway: $NGF_MODULE@$NGF_VERSION ($NGF_SUM) sha256=$(sha256sum "$BIN/gateway" | cut -c1-64)"
} >"$STAMP.new"
mv -f "$STAMP.new" "$STAMP"
go clean -cache 2>/dev/null || true
go clean -modcache 2>/dev/null || true
rm -rf "$GOCACHE" "$GOMODCACHE" "$GOPATH"
say "done in $(($(date +%s) - start_all)) s: $DIR ($(du -sh "$DIR" | cut -f1))"
