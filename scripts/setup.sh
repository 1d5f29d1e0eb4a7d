#!/usr/bin/env bash
# Installs what ingressbench's demo and tests need, only what is missing.
# Runs as root on the project's machines (apt-get works as is); elsewhere it uses sudo.
set -euo pipefail
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"

need_apt=()
command -v nginx >/dev/null || need_apt+=(nginx-light)
[ -e /usr/lib/nginx/modules/ngx_http_lua_module.so ] || need_apt+=(libnginx-mod-http-lua)
[ -e /usr/share/lua/5.1/resty/core.lua ] || need_apt+=(lua-resty-core)
command -v haproxy >/dev/null || need_apt+=(haproxy)
command -v caddy >/dev/null || need_apt+=(caddy)
command -v curl >/dev/null || need_apt+=(curl)
# Reports: PNG charts are drawn with DejaVu; the end-to-end tests open pages in Chromium.
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need_apt+=(fonts-dejavu-core)
command -v chromium >/dev/null || need_apt+=(chromium)
command -v openssl >/dev/null || need_apt+=(openssl)
command -v ip >/dev/null || need_apt+=(iproute2)
command -v taskset >/dev/null || need_apt+=(util-linux)
command -v pgrep >/dev/null || need_apt+=(procps)
command -v cc >/dev/null || need_apt+=(build-essential)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
if ! command -v cargo >/dev/null; then
  echo "setup: cargo not found: install Rust (rustup) first" >&2
  exit 2
fi
rustup component list --installed 2>/dev/null | grep -q rustfmt || rustup component add rustfmt clippy >/dev/null 2>&1 || true
