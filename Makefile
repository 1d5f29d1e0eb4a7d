# ingressbench: `make demo` (install what is missing, build, run a short load end to end)
# and `make test` (what CI runs). Both install their own prerequisites.
SHELL := /bin/bash
CARGO ?= cargo
BIN := target/release/ingressbench

.PHONY: setup build demo test lint bench clean

setup:
	@scripts/setup.sh

build: setup
	$(CARGO) build --release --locked

demo: build
	@scripts/demo.sh

lint: setup
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --locked --all-targets -- -D warnings

# The tests under cargo-nextest (.config/nextest.toml), lints first, closing summary
# last: scripts/test.sh, docs/testing.md. It runs `scripts/setup.sh --test-tools`
# itself, once the Kubernetes build (mostly downloads at first) has started.
test:
	@scripts/test.sh

bench: build
	@bench/run.sh
	@bench/http2.sh

clean:
	$(CARGO) clean
