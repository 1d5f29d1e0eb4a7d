#!/usr/bin/env bash
# The main job end to end on this machine (until the lab lands: a short load against
# the built-in backend).
set -euo pipefail
BIN=${BIN:-target/release/ingressbench}
echo "demo: being built"
