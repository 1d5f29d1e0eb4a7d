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

test: lint
	@scripts/k8s-testenv/build.sh
	$(CARGO) build --release --locked
	$(CARGO) test --workspace --release --locked --no-fail-fast -- --test-threads=2

bench: build
	@bench/run.sh

clean:
	$(CARGO) clean
