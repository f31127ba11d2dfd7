# agenthold — development and CI entry points. See docs/setup.md.
#
#   make dev     the whole local stack, server in the foreground
#   make up      the same, server in the background (.dev/server.log, .dev/env)
#   make down    stop the server and the private Postgres (dockerd stays up)
#   make test    everything CI runs (.ci/run calls it)
#   make lint    rustfmt + clippy, warnings are errors; the core crate depends on no IO crate
#   make bench   scripts/bench/run.sh
#   make chaos   the five-minute load: 100 sessions × 10 watchers (BENCH_ONLY=load)
#   make build | web | postgres | docker | images | base-image | e2e | sqlx-prepare

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

CARGO  ?= cargo
# The cargo target dir: CARGO_TARGET_DIR if set, else ./target.
TARGET := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)
export CARGO_TARGET_DIR := $(TARGET)

# Extra CA certificates baked into the sandbox images (files or directories of
# *.crt, space-separated). Default: the host's /usr/local/share/ca-certificates.
# `make images EXTRA_CA_CERTS=` bakes in none.
# (Unset, a missing default directory is fine; a path you name must exist.)
ifneq ($(origin EXTRA_CA_CERTS),undefined)
export AGENTHOLD_EXTRA_CA_CERTS := $(EXTRA_CA_CERTS)
endif

.PHONY: help build web web-test web-types postgres docker images base-image up dev down test e2e bench chaos lint sqlx-prepare

help:
	@sed -n '1,/^$$/p' $(firstword $(MAKEFILE_LIST)) | sed -n 's/^# \{0,1\}//p'

build: web
	$(CARGO) build --workspace --bins

# The browser UI (web/, served by the server from web/dist): `npm ci` when the lockfile changed,
# `vite build` when a source changed; nothing when neither did.
WEB_SRC := $(shell find web/src web/index.html web/vite.config.ts web/tsconfig.json web/package.json -type f 2>/dev/null)

web/node_modules/.package-lock.json: web/package-lock.json
	cd web && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

web/dist/index.html: web/node_modules/.package-lock.json $(WEB_SRC)
	cd web && npm run --silent build
	@touch $@

web: web/dist/index.html

# The UI's unit tests (vitest: the stream reducer, markdown, ANSI, forms, usage, cron, policy).
web-test: web/node_modules/.package-lock.json
	cd web && npm test --silent

# The UI's generated API types (web/src/api-types.ts) against the running server's OpenAPI
# document (AGENTHOLD_URL, as .dev/env sets it after `make up`; or OPENAPI_JSON=<file>): fails
# when they differ. `cd web && npm run gen-types` regenerates them.
web-types: web/node_modules/.package-lock.json
	cd web && npm run --silent check-types

postgres:
	@scripts/dev/postgres.sh >/dev/null

docker:
	@scripts/dev/docker.sh

images: docker
	@scripts/dev/images.sh

base-image: docker
	@scripts/dev/base-image.sh

# Order matters on 2 cores: the cheap checks first, then the build.
up: postgres images build
	@scripts/dev/server.sh start

dev: postgres images build
	@scripts/dev/server.sh fg

down:
	@scripts/dev/server.sh stop
	@scripts/dev/postgres.sh stop
	@echo "dockerd (if this checkout started it) keeps running: it is shared machine state." >&2

test:
	@scripts/dev/test.sh

e2e: up base-image
	@set -a; . .dev/env; set +a; bash scripts/e2e/sessions.sh && bash scripts/e2e/secrets.sh && bash scripts/e2e/git.sh && bash scripts/e2e/packages.sh && bash scripts/e2e/provider-logins.sh \
	    && bash scripts/e2e/claude-harness.sh && bash scripts/e2e/codex.sh && bash scripts/e2e/opencode.sh \
	    && bash scripts/e2e/gate.sh claude-code && bash scripts/e2e/gate.sh codex && bash scripts/e2e/gate.sh opencode

bench:
	@if [ -f scripts/bench/run.sh ]; then bash scripts/bench/run.sh; \
	else echo "scripts/bench/run.sh does not exist yet; nothing to run" >&2; fi

chaos:
	BENCH_ONLY=load BENCH_LOAD_SECONDS=$${BENCH_LOAD_SECONDS:-300} bash scripts/bench/run.sh

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	python3 scripts/check-module-cycles.py
	CARGO=$(CARGO) scripts/check-core-deps.sh

sqlx-prepare:
	@scripts/dev/sqlx-prepare.sh
