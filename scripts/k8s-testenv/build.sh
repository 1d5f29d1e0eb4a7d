#!/usr/bin/env bash
# Builds the Kubernetes test environment's binaries once, cached by version outside the
# repository: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd,
# kwok, Traefik and Contour, all from the Go module proxy, plus the Gateway API, Traefik
# and Contour CRDs. A cache whose binaries are all there but whose CRDs are not (an
# older cache, or CRDs added since) only re-runs the CRD stage: a module download, no build. Idempotent: what is already built (and answers its version) is skipped.
#
#   scripts/k8s-testenv/build.sh                 build what is missing, then drop Go's caches
#   scripts/k8s-testenv/build.sh --keep-modcache keep the Go module cache (faster rebuilds)
#   scripts/k8s-testenv/build.sh --check         build nothing; exit 1 unless all is there
#   scripts/k8s-testenv/build.sh --print-dir     print the version folder and exit
#
# Cache: ${INGRESSBENCH_CACHE:-$HOME/.cache/ingressbench}/k8s-testenv/<key>/{bin,crds}
# Go's build and module caches used here live beside it (go-build/, gomod/) and nowhere
# else; every go command runs under `nice -n 19`, one after the other.
set -euo pipefail

K8S_VERSION=v1.33.13
ETCD_VERSION=v3.5.21        # what k8s.io/kubernetes v1.33.13 requires
KWOK_VERSION=v0.7.0
TRAEFIK_VERSION=v3.6.12     # v3.7.x does not build from the module proxy
CONTOUR_VERSION=v1.33.8
GWAPI_VERSION=v1.4.0
# Traefik's own CRDs (Middleware, IngressRoute, ... in traefik.io/v1alpha1), as its
# documentation publishes them, from the module of the Traefik built here.
TRAEFIK_CRDS=kubernetes-crd-definition-v1.yml
TRAEFIK_CRDS_SRC=docs/content/reference/dynamic-configuration/$TRAEFIK_CRDS
RECIPE=r1                   # bump when the way of building changes, to force a rebuild
GO_MIN_MINOR=26             # Contour v1.33.8 declares go 1.26.0

K8S_MINOR=${K8S_VERSION#v1.}; K8S_MINOR=${K8S_MINOR%%.*}
STAGING_VERSION=v0.${K8S_VERSION#v1.}   # k8s.io/api etc. are published as v0.<minor>.<patch>
K8S_BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
ALL_BINARIES=("${K8S_BINARIES[@]}" etcd kwok traefik contour)

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT="${INGRESSBENCH_CACHE:-$HOME/.cache/ingressbench}/k8s-testenv"
KEY="k8s${K8S_VERSION#v}-etcd${ETCD_VERSION#v}-kwok${KWOK_VERSION#v}-traefik${TRAEFIK_VERSION#v}-contour${CONTOUR_VERSION#v}-gwapi${GWAPI_VERSION#v}-${RECIPE}"
DIR="$ROOT/$KEY"
BIN="$DIR/bin"
CRDS="$DIR/crds"
LOGS="$DIR/logs"
STAMP="$DIR/COMPLETE"

die() { echo "build.sh: error: $*" >&2; exit 1; }
say() { echo "build.sh: $*"; }

keep_modcache=0
mode=build
for arg in "$@"; do
  case "$arg" in
    --keep-modcache) keep_modcache=1 ;;
    --check) mode=check ;;
    --print-dir) mode=print ;;
    -h|--help) sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$arg' (try --help)" ;;
  esac
done
if [ "$mode" = print ]; then echo "$DIR"; exit 0; fi

# --- Checking a binary: it runs and reports the pinned version -------------------------
version_output() { # name path: what the binary says of its version
  local args=(--version)
  case "$1" in
    kubectl) args=(version --client) ;;
    traefik | contour) args=(version) ;;
  esac
  timeout 60 "$2" "${args[@]}" 2>&1
}
expected_version() { # name: a string its version output must contain
  case "$1" in
    kube-*) echo "Kubernetes $K8S_VERSION" ;;
    kubectl) echo "Client Version: $K8S_VERSION" ;;
    etcd) echo "etcd Version: ${ETCD_VERSION#v}" ;;
    kwok) echo "${KWOK_VERSION#v}" ;;
    traefik) echo "${TRAEFIK_VERSION#v}" ;;
    contour) echo "version: $CONTOUR_VERSION" ;;
  esac
}
summary() { # one line of at most 160 characters, without log lines (Contour logs one)
  grep -vE '^time=.* level=[a-z]+ msg=' <<<"$1" | tr -s ' \t\n' ' ' | sed 's/ $//' | cut -c1-160
}
check_binary() { # name [path]: true when the binary is there and reports its version
  local name=$1 path=${2:-$BIN/$1} out
  [ -x "$path" ] || return 1
  out=$(version_output "$name" "$path") || return 1
  grep -qF -- "$(expected_version "$name")" <<<"$out"
}
crds_present() {
  [ -f "$CRDS/gateway-api/standard/gateway.networking.k8s.io_httproutes.yaml" ] &&
    [ -f "$CRDS/gateway-api/experimental/gateway.networking.k8s.io_tcproutes.yaml" ] &&
    [ -f "$CRDS/contour/01-crds.yaml" ] &&
    [ -f "$CRDS/traefik/$TRAEFIK_CRDS" ]
}

missing=()
for b in "${ALL_BINARIES[@]}"; do check_binary "$b" || missing+=("$b"); done
crds_ok=1; crds_present || crds_ok=0

if [ "$mode" = check ]; then
  if [ ${#missing[@]} -eq 0 ] && [ $crds_ok = 1 ] && [ -f "$STAMP" ]; then
    say "complete: $DIR"; exit 0
  fi
  say "incomplete: $DIR (missing: ${missing[*]:-none}; crds: $([ $crds_ok = 1 ] && echo ok || echo missing))" >&2
  exit 1
fi

start_all=$(date +%s)
mkdir -p "$BIN" "$CRDS" "$LOGS"
exec 9>"$ROOT/.lock"
if ! flock -n 9; then
  say "another build.sh holds $ROOT/.lock; waiting for it"
  flock 9
  missing=(); for b in "${ALL_BINARIES[@]}"; do check_binary "$b" || missing+=("$b"); done
  crds_ok=1; crds_present || crds_ok=0
fi

say "cache: $DIR"
for b in "${ALL_BINARIES[@]}"; do
  if check_binary "$b"; then say "found $b: $(summary "$(version_output "$b" "$BIN/$b")")"; fi
done
[ $crds_ok = 1 ] && say "found CRDs: gateway-api $GWAPI_VERSION (standard, experimental), traefik $TRAEFIK_VERSION, contour $CONTOUR_VERSION"

# --- The Go environment: everything under $ROOT ----------------------------------------
command -v go >/dev/null || die "go not found on PATH (Go 1.$GO_MIN_MINOR or newer is needed)"
go_version=$(go env GOVERSION)
go_minor=$(sed -n 's/^go1\.\([0-9]*\).*/\1/p' <<<"$go_version")
[ -n "$go_minor" ] && [ "$go_minor" -ge $GO_MIN_MINOR ] ||
  die "$go_version is too old: Go 1.$GO_MIN_MINOR or newer is needed (Contour $CONTOUR_VERSION declares go 1.$GO_MIN_MINOR.0)"
export GOCACHE="$ROOT/go-build" GOMODCACHE="$ROOT/gomod" GOPATH="$ROOT/gopath"
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0
export GOFLAGS="-buildvcs=false -trimpath -modcacherw -p=${K8S_TESTENV_JOBS:-$(nproc)}"
unset GOBIN GOOS GOARCH

built=()
if [ ${#missing[@]} -gt 0 ]; then
  avail_gb=$(df -Pk "$ROOT" | awk 'NR==2 { print int($4 / 1048576) }')
  [ "$avail_gb" -ge 14 ] ||
    die "only ${avail_gb} GB free under $ROOT; a cold build needs about 14 GB (module cache ~4.5 GB, build cache ~7 GB)"
  # Only a missing binary unstamps the cache: while just the CRDs are restaged, the
  # binaries stay usable (and --check fails on the CRDs by itself).
  rm -f "$STAMP"
fi
if [ ${#missing[@]} -gt 0 ] || [ $crds_ok = 0 ]; then
  say "to build: $(echo "${missing[@]}" "$([ $crds_ok = 0 ] && echo CRDs)" | xargs) (with $go_version, nice -n 19, one at a time; logs in $LOGS)"
fi

WORK=$(mktemp -d "$ROOT/work.XXXXXX")
OUT="$WORK/out"
mkdir -p "$OUT"
on_exit() {
  local rc=$?
  rm -rf "$WORK"
  if [ $rc -ne 0 ]; then
    echo "build.sh: failed (exit $rc); Go's caches are kept in $ROOT/go-build and $ROOT/gomod so a rerun resumes" >&2
  fi
}
trap on_exit EXIT

gocmd() { nice -n 19 go "$@"; }
run_logged() { # log-name command...: runs it with its output in $LOGS/<log-name>.log
  local log="$LOGS/$1.log"; shift
  if ! "$@" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    die "'$*' failed; full output in $log"
  fi
}
is_missing() { local b; for b in "${missing[@]}"; do [ "$b" = "$1" ] && return 0; done; return 1; }
module_field() { # module version field: Dir or GoMod of a module, downloaded into $GOMODCACHE
  local json
  json=$(cd "$WORK" && gocmd mod download -json "$1@$2" 2>&1) || die "cannot download $1@$2: $(summary "$json")"
  sed -n "s/^[[:space:]]*\"$3\": \"\(.*\)\",\{0,1\}\$/\1/p" <<<"$json" | head -n 1
}
go_lines() { grep -E '^(go|godebug) ' "$1" || true; } # the go and godebug lines of a go.mod
copy_replaces() { # go.mod: its replace directives, staging ones mapped to published modules
  awk '/^replace[[:space:]]*\(/ { inblock = 1; next }
       inblock && /^\)/ { inblock = 0; next }
       inblock && /=>/ { print; next }
       /^replace[[:space:]].*=>/ { sub(/^replace[[:space:]]+/, ""); print }' "$1" |
    while read -r from arrow to rest; do
      [ "$arrow" = "=>" ] || die "unexpected replace line in $1: $from $arrow $to $rest"
      case "$to" in
        ./staging/src/"$from") printf '\t%s => %s %s\n' "$from" "$from" "$STAGING_VERSION" ;;
        ./* | ../* | /*) die "replace $from => $to in $1 points into its own tree: no published module to use" ;;
        *) printf '\t%s => %s %s\n' "$from" "$to" "$rest" ;;
      esac
    done
}
install_binary() { # name: verify $OUT/name and move it into $BIN
  local name=$1 out
  out=$(version_output "$name" "$OUT/$name") || die "the new $name does not run: $(summary "$out")"
  grep -qF -- "$(expected_version "$name")" <<<"$out" ||
    die "the new $name reports '$(summary "$out")', expected '$(expected_version "$name")'"
  mv -f "$OUT/$name" "$BIN/$name"
  built+=("$name")
  say "built $name in $(($(date +%s) - t0)) s: $(summary "$out")"
}
build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)

# --- kube-apiserver, kube-controller-manager, kube-scheduler, kubectl -----------------
# `go install k8s.io/kubernetes/...@v` is refused (its go.mod has replace directives), so
# a throw-away module requires it and replaces each staging module by its published one.
need_k8s=0
for b in "${K8S_BINARIES[@]}"; do is_missing "$b" && need_k8s=1; done
if [ $need_k8s = 1 ]; then
  t0=$(date +%s)
  say "kubernetes $K8S_VERSION: preparing a module (staging modules at $STAGING_VERSION)"
  mod="$WORK/kubernetes"; mkdir -p "$mod"
  k8s_gomod=$(module_field k8s.io/kubernetes "$K8S_VERSION" GoMod)
  [ -f "$k8s_gomod" ] || die "no go.mod for k8s.io/kubernetes@$K8S_VERSION"
  replaces=$(copy_replaces "$k8s_gomod")
  [ "$(grep -cE '=> \./staging/' "$k8s_gomod")" -gt 20 ] ||
    die "k8s.io/kubernetes@$K8S_VERSION's go.mod does not list its staging modules as expected"
  {
    echo "module ingressbench.invalid/k8s-testenv/kubernetes"
    echo
    go_lines "$k8s_gomod"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    echo "$replaces"
    echo ")"
  } >"$mod/go.mod"
  # kube-proxy is not built, but without it among the imports go.sum is incomplete.
  {
    echo "//go:build tools"
    echo
    echo "package tools"
    echo
    echo "import ("
    for c in "${K8S_BINARIES[@]}" kube-proxy; do echo "	_ \"k8s.io/kubernetes/cmd/$c\""; done
    echo ")"
  } >"$mod/tools.go"
  (cd "$mod" && run_logged kubernetes-tidy gocmd mod tidy)
  say "kubernetes: module ready in $(($(date +%s) - t0)) s"
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$K8S_MINOR"
    ldflags+=" -X $pkg.gitTreeState=archive -X $pkg.buildDate=$build_date"
  done
  for b in "${K8S_BINARIES[@]}"; do
    is_missing "$b" || continue
    t0=$(date +%s)
    say "building $b $K8S_VERSION"
    (cd "$mod" && run_logged "$b" gocmd build -ldflags "$ldflags" -o "$OUT/$b" "k8s.io/kubernetes/cmd/$b")
    install_binary "$b"
  done
fi

# --- etcd: our own three-line main over go.etcd.io/etcd/server/v3 --------------------
if is_missing etcd; then
  t0=$(date +%s)
  say "building etcd $ETCD_VERSION"
  mod="$WORK/etcd"; mkdir -p "$mod"
  etcd_gomod=$(module_field go.etcd.io/etcd/server/v3 "$ETCD_VERSION" GoMod)
  {
    echo "module ingressbench.invalid/k8s-testenv/etcd"
    echo
    go_lines "$etcd_gomod"
    echo
    echo "require go.etcd.io/etcd/server/v3 $ETCD_VERSION"
  } >"$mod/go.mod"
  cp "$HERE/etcd/main.go" "$mod/main.go"
  (cd "$mod" && run_logged etcd-tidy gocmd mod tidy)
  got=$(cd "$mod" && go list -m -f '{{.Version}}' go.etcd.io/etcd/api/v3)
  [ "$got" = "$ETCD_VERSION" ] || die "etcd's module graph selected go.etcd.io/etcd/api/v3 $got, not $ETCD_VERSION"
  (cd "$mod" && run_logged etcd gocmd build -ldflags "-s -w" -o "$OUT/etcd" .)
  install_binary etcd
fi

# --- kwok and Contour: plain go install ------------------------------------------------
if is_missing kwok; then
  t0=$(date +%s)
  say "building kwok $KWOK_VERSION"
  (cd "$WORK" && GOBIN="$OUT" run_logged kwok gocmd install -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION")
  install_binary kwok
fi

# --- Traefik: a throw-away module copying its replace directives ----------------------
if is_missing traefik; then
  t0=$(date +%s)
  say "building traefik $TRAEFIK_VERSION"
  mod="$WORK/traefik"; mkdir -p "$mod"
  traefik_gomod=$(module_field github.com/traefik/traefik/v3 "$TRAEFIK_VERSION" GoMod)
  replaces=$(copy_replaces "$traefik_gomod")
  {
    echo "module ingressbench.invalid/k8s-testenv/traefik"
    echo
    go_lines "$traefik_gomod"
    echo
    echo "require github.com/traefik/traefik/v3 $TRAEFIK_VERSION"
    if [ -n "$replaces" ]; then echo; echo "replace ("; echo "$replaces"; echo ")"; fi
  } >"$mod/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/traefik/traefik/v3/cmd/traefik"\n' >"$mod/tools.go"
  (cd "$mod" && run_logged traefik-tidy gocmd mod tidy)
  v=github.com/traefik/traefik/v3/pkg/version
  (cd "$mod" && run_logged traefik gocmd build \
    -ldflags "-s -w -X $v.Version=${TRAEFIK_VERSION#v} -X $v.BuildDate=$build_date" \
    -o "$OUT/traefik" github.com/traefik/traefik/v3/cmd/traefik)
  install_binary traefik
fi

if is_missing contour; then
  t0=$(date +%s)
  say "building contour $CONTOUR_VERSION"
  (cd "$WORK" && GOBIN="$OUT" run_logged contour gocmd install \
    -ldflags "-s -w -X github.com/projectcontour/contour/internal/build.Version=$CONTOUR_VERSION" \
    "github.com/projectcontour/contour/cmd/contour@$CONTOUR_VERSION")
  install_binary contour
fi

# --- CRDs ------------------------------------------------------------------------------
if [ $crds_ok = 0 ]; then
  gw_dir=$(module_field sigs.k8s.io/gateway-api "$GWAPI_VERSION" Dir)
  contour_dir=$(module_field github.com/projectcontour/contour "$CONTOUR_VERSION" Dir)
  traefik_dir=$(module_field github.com/traefik/traefik/v3 "$TRAEFIK_VERSION" Dir)
  stage="$WORK/crds"
  for channel in standard experimental; do
    src="$gw_dir/config/crd/$channel"
    [ -d "$src" ] || die "no $src in sigs.k8s.io/gateway-api@$GWAPI_VERSION"
    mkdir -p "$stage/gateway-api/$channel"
    # kustomization.yaml is left out so that `kubectl apply -f <folder>` takes the folder as is.
    find "$src" -maxdepth 1 -name '*.yaml' ! -name kustomization.yaml -exec cp {} "$stage/gateway-api/$channel/" \;
  done
  [ -f "$contour_dir/examples/contour/01-crds.yaml" ] ||
    die "no examples/contour/01-crds.yaml in github.com/projectcontour/contour@$CONTOUR_VERSION"
  mkdir -p "$stage/contour"
  cp "$contour_dir/examples/contour/01-crds.yaml" "$stage/contour/"
  [ -f "$traefik_dir/$TRAEFIK_CRDS_SRC" ] ||
    die "no $TRAEFIK_CRDS_SRC in github.com/traefik/traefik/v3@$TRAEFIK_VERSION"
  grep -q '^  name: middlewares\.traefik\.io$' "$traefik_dir/$TRAEFIK_CRDS_SRC" ||
    die "$TRAEFIK_CRDS_SRC in github.com/traefik/traefik/v3@$TRAEFIK_VERSION defines no middlewares.traefik.io"
  mkdir -p "$stage/traefik"
  cp "$traefik_dir/$TRAEFIK_CRDS_SRC" "$stage/traefik/"
  printf 'gateway-api %s (sigs.k8s.io/gateway-api config/crd/{standard,experimental})\ntraefik %s (%s)\ncontour %s (examples/contour/01-crds.yaml)\n' \
    "$GWAPI_VERSION" "$TRAEFIK_VERSION" "$TRAEFIK_CRDS_SRC" "$CONTOUR_VERSION" >"$stage/VERSIONS"
  chmod -R u+w "$stage"
  rm -rf "$CRDS.new" && mv "$stage" "$CRDS.new" && rm -rf "$CRDS" && mv "$CRDS.new" "$CRDS"
  crds_present || die "CRDs were copied but are not where expected under $CRDS"
  say "copied CRDs: gateway-api $GWAPI_VERSION ($(ls "$CRDS/gateway-api/standard" | wc -l) standard, $(ls "$CRDS/gateway-api/experimental" | wc -l) experimental), traefik $TRAEFIK_VERSION ($(grep -c '^kind: CustomResourceDefinition' "$CRDS/traefik/$TRAEFIK_CRDS") definitions), contour $CONTOUR_VERSION"
fi

# --- Stamp, then drop Go's caches ------------------------------------------------------
for b in "${ALL_BINARIES[@]}"; do check_binary "$b" || die "$b is still missing or wrong after the build"; done
if [ ${#built[@]} -gt 0 ] || [ $crds_ok = 0 ] || [ ! -f "$STAMP" ]; then
  {
    echo "key: $KEY"
    echo "completed: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "go: $go_version"
    echo "built this run: ${built[*]:-none}"
    for b in "${ALL_BINARIES[@]}"; do
      echo "$b: $(summary "$(version_output "$b" "$BIN/$b")") sha256=$(sha256sum "$BIN/$b" | cut -c1-64)"
    done
  } >"$STAMP.new"
  mv -f "$STAMP.new" "$STAMP"
  say "wrote $STAMP"
fi
if [ -d "$GOCACHE" ]; then
  go clean -cache
  rm -rf "$GOCACHE"
  say "removed Go's build cache $GOCACHE"
fi
if [ -d "$GOMODCACHE" ]; then
  if [ $keep_modcache = 1 ]; then
    say "kept Go's module cache $GOMODCACHE ($(du -sh "$GOMODCACHE" | cut -f1))"
  else
    go clean -modcache
    rm -rf "$GOMODCACHE"
    say "removed Go's module cache $GOMODCACHE (--keep-modcache keeps it)"
  fi
fi
[ -d "$GOPATH" ] && rm -rf "$GOPATH"
say "done in $(($(date +%s) - start_all)) s: $DIR ($(du -sh "$DIR" | cut -f1)); built: ${built[*]:-nothing, all cached}"
