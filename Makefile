# Hourglass: the usual tasks. `make test` is what CI runs (.ci/run).
#
#   make test         vet and the tests with -race, as CI runs them
#   make fuzz         every fuzz target for FUZZTIME (default 5m) one after
#                     another, stopping at the first failure with the path of
#                     its input; FUZZ=FuzzReader runs one (scripts/fuzz.sh
#                     lists the other settings)
#   make soak-model   the power-loss model test for HOURGLASS_MODEL_DURATION
#   make crash        100 kill -9 cycles of the server under load, checked
#   make soak         30 minutes of mixed load, RSS, files and goroutines
#   make chaos        20 faults on a three-member replica set under load, checked
#   make ui           the console's assets, typechecked and bundled
#   make serve        the server on 127.0.0.1:7700
#   make screenshots  the console's screenshots for docs/console.md

GO ?= go
CHROMIUM ?= /usr/bin/chromium
# PyMongo, from Debian: it installs for Debian's python3.
PYMONGO := /usr/lib/python3/dist-packages/pymongo/__init__.py
# Prometheus, from Debian, for the remote-write end-to-end test.
PROMETHEUS := /usr/bin/prometheus

.PHONY: test deps ui serve screenshots soak-model fuzz

# The tests, with what they need installed first when it is missing:
# Chromium for the console's end-to-end test, the console's npm packages,
# mongosh for the MongoDB shell's test (mongowire/mongoshtest), PyMongo for
# the Python driver's (mongowire/pymongotest), Prometheus for remote write's
# (api/promtest), DuckDB for the archive's (archive/duckdbtest), SeaweedFS's
# weed for the S3 store's (objstore, timeseries' archive, backup).
test: deps
	$(GO) vet ./...
	$(GO) test -race -timeout 20m ./...

FUZZTIME ?= 5m
FUZZ ?=

# Long fuzzing, on demand: a table of execs, duration and new inputs per target.
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) FUZZ=$(FUZZ) scripts/fuzz.sh

deps: $(CHROMIUM) $(PYMONGO) $(PROMETHEUS) ui/node_modules/.package-lock.json mongowire/mongoshtest/node_modules/.package-lock.json \
	archive/duckdbtest/node_modules/.package-lock.json weed

# SeaweedFS's weed, the S3 server of objstore's tests (internal/s3test),
# pinned in internal/s3test/build.go: built from the Go module proxy into
# $HOURGLASS_CACHE, else ~/.cache/hourglass, once (5 to 9 minutes on two
# cores, with a module and build cache of its own that it removes after);
# a second run finds it and returns at once. Not in go.mod.
.PHONY: weed
weed:
	$(GO) run ./internal/s3test/buildweed

# Node is on the project's machines; Debian's is enough where it is not.
NPM := $(shell command -v npm 2>/dev/null)
ifeq ($(NPM),)
NODE_DEP := install-node
endif
.PHONY: install-node
install-node:
	DEBIAN_FRONTEND=noninteractive apt-get update && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs npm

$(CHROMIUM):
	DEBIAN_FRONTEND=noninteractive apt-get update && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium

$(PYMONGO):
	DEBIAN_FRONTEND=noninteractive apt-get update && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-pymongo

# The package enables no service here (no systemd in CI); the test starts
# its own server on a loopback port.
$(PROMETHEUS):
	DEBIAN_FRONTEND=noninteractive apt-get update && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus

ui/node_modules/.package-lock.json: ui/package-lock.json | $(NODE_DEP)
	npm ci --prefix ui

# mongosh, pinned in mongowire/mongoshtest/package-lock.json; its .npmrc
# skips the install scripts of optional native modules mongosh runs without.
mongowire/mongoshtest/node_modules/.package-lock.json: mongowire/mongoshtest/package-lock.json | $(NODE_DEP)
	npm ci --prefix mongowire/mongoshtest

# DuckDB, pinned in archive/duckdbtest/package-lock.json: it reads the
# archive's Parquet files in the archive's test.
archive/duckdbtest/node_modules/.package-lock.json: archive/duckdbtest/package-lock.json | $(NODE_DEP)
	npm ci --prefix archive/duckdbtest

# The console's assets: typecheck, then bundle into ui/dist (commit it).
ui: ui/node_modules/.package-lock.json
	cd ui && npm run typecheck && npm run build

serve:
	$(GO) run ./cmd/hourglass serve

# Screenshots for docs/console.md, from a run of the end-to-end test.
screenshots: deps
	$(GO) test -count=1 -run TestConsoleEndToEnd ./ui
	cp ui/e2e/artifacts/token.png ui/e2e/artifacts/collections.png ui/e2e/artifacts/collection.png ui/e2e/artifacts/collection-*.png \
	  ui/e2e/artifacts/explore*.png ui/e2e/artifacts/server.png docs/console/

# The power-loss model test (timeseries.TestPowerLossModel) run for
# HOURGLASS_MODEL_DURATION (default 10m) of random sequences; a failure
# prints the seed to rerun with HOURGLASS_MODEL_SEED.
HOURGLASS_MODEL_DURATION ?= 10m
soak-model:
	HOURGLASS_MODEL_DURATION=$(HOURGLASS_MODEL_DURATION) $(GO) test -count=1 -timeout 0 -run '^TestPowerLossModel$$' ./timeseries

# The crash loop and the soak (docs/reliability.md), on the binary built from
# this checkout; figures in docs/benchmarks.md. Pass other flags with
# CRASH_FLAGS or SOAK_FLAGS, e.g. make crash CRASH_FLAGS="--cycles 10 --seed 7".
.PHONY: crash soak
CRASH_FLAGS ?= --cycles 100
SOAK_FLAGS ?= --duration 30m
crash:
	$(GO) build -o bin/hourglass ./cmd/hourglass
	bin/hourglass bench crash $(CRASH_FLAGS)

soak:
	$(GO) build -o bin/hourglass ./cmd/hourglass
	bin/hourglass bench soak $(SOAK_FLAGS)

# The replica set's chaos run (docs/replication.md): faults on three members
# under load, checked after each; CHAOS_FLAGS as CRASH_FLAGS.
.PHONY: chaos
CHAOS_FLAGS ?= --cycles 20
chaos:
	$(GO) build -o bin/hourglass ./cmd/hourglass
	bin/hourglass bench chaos $(CHAOS_FLAGS)
