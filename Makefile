# Sluice's build. `make demo` and `make test` do all the set-up on a fresh machine that has
# Go, git, gcc and make: they build the pinned tools (tools/build.sh) into .tools/ first.

SHELL := /bin/bash
GO ?= go
TOOLS := $(CURDIR)/.tools/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/sluice-io/sluice/internal/version.Version=$(VERSION)
BINARIES := watcher translator pusher sluicectl
# The suite's own budget (CI has 90 minutes, of which tool builds take about 12 the first time).
TEST_TIMEOUT ?= 20m

export SLUICE_TOOLS_BIN := $(TOOLS)

.PHONY: all build test fuzz bench-components images certs proto proto-check lint demo bench tools tools-dev certs images clean help

all: build

help:
	@echo "make build        binaries into bin/ (and bin/caddy: Caddy with Sluice's module)"
	@echo "make test         every test (builds the pinned tools first; needs root for network namespaces)"
	@echo "make demo         the whole system on a local apiserver and a real Caddy"
	@echo "make bench        the benchmark harness (docs/benchmarks.md)"
	@echo "make proto        regenerate proto/gen;  make proto-check  fail when it is stale or buf lint fails"
	@echo "make lint         gofmt, go vet, staticcheck"
	@echo "make fuzz         every fuzz target for FUZZTIME each (default 60s), one after another"
	@echo "make tools        build the pinned kube-apiserver, etcd, caddy and developer tools into .tools/"

# CADDYMOD is Sluice's Caddy module, a Go module of its own (Caddy never enters the main one).
CADDYMOD := pusher/caddymod

build:
	@mkdir -p bin
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ ./watcher ./translator ./pusher ./cmd/sluicectl
	cd $(CADDYMOD) && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(CURDIR)/bin/caddy ./cmd/caddy

tools:
	@tools/build.sh

tools-dev:
	@tools/build.sh dev

proto: tools-dev
	$(TOOLS)/buf lint
	$(TOOLS)/buf generate

proto-check: tools-dev
	$(TOOLS)/buf lint
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	$(TOOLS)/buf generate -o $$tmp && \
	if ! diff -r $$tmp/proto/gen proto/gen >/dev/null; then \
		diff -r $$tmp/proto/gen proto/gen | head -20; \
		echo "proto-check: proto/gen is stale; run 'make proto' and commit the result" >&2; exit 1; \
	fi && echo "proto-check: generated code is current, buf lint is clean"

lint: tools-dev
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^tools/') 2>&1); \
	if [ -n "$$out" ]; then echo "gofmt: not formatted:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(TOOLS)/staticcheck ./...
	cd $(CADDYMOD) && $(GO) vet ./... && $(TOOLS)/staticcheck ./...

# test runs every test. The suite starts real kube-apiserver, etcd and Caddy processes, the
# real binaries, and network namespaces for the test backends (root).
test: tools proto-check
	cd $(CADDYMOD) && $(GO) test -count=1 ./...
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

# fuzz runs every fuzz target of the repository for FUZZTIME each, one after another, and
# stops at the first failure. A failing input is written to the package's testdata/fuzz/,
# where the seed corpus lives: plain `go test` (and so `make test`) replays every seed. A new
# fuzz target goes here too (internal/contract's TestMakeFuzzRunsEveryFuzzTarget fails
# otherwise).
FUZZTIME ?= 60s
fuzz:
	@echo "fuzz: FuzzMirror (./internal/watchstream) for $(FUZZTIME)"
	$(GO) test -run='^$$' -fuzz='^FuzzMirror$$' -fuzztime=$(FUZZTIME) ./internal/watchstream
	@echo "fuzz: FuzzDecode (./internal/watchstream) for $(FUZZTIME)"
	$(GO) test -run='^$$' -fuzz='^FuzzDecode$$' -fuzztime=$(FUZZTIME) ./internal/watchstream
	@echo "fuzz: FuzzChain (./internal/contract) for $(FUZZTIME)"
	$(GO) test -run='^$$' -fuzz='^FuzzChain$$' -fuzztime=$(FUZZTIME) ./internal/contract
	@echo "fuzz: FuzzApplyDelta (./internal/contract) for $(FUZZTIME)"
	$(GO) test -run='^$$' -fuzz='^FuzzApplyDelta$$' -fuzztime=$(FUZZTIME) ./internal/contract
	@echo "fuzz: FuzzStreamEqualsStore (./watcher/server) for $(FUZZTIME)"
	$(GO) test -run='^$$' -fuzz='^FuzzStreamEqualsStore$$' -fuzztime=$(FUZZTIME) ./watcher/server
	@echo "fuzz: FuzzIncrementalEqualsFull (./translator/translate) for $(FUZZTIME)"
	$(GO) test -run='^$$' -fuzz='^FuzzIncrementalEqualsFull$$' -fuzztime=$(FUZZTIME) ./translator/translate
	@echo "fuzz: FuzzIngressNeverLosesUnrelatedRoutes (./translator/translate) for $(FUZZTIME)"
	$(GO) test -run='^$$' -fuzz='^FuzzIngressNeverLosesUnrelatedRoutes$$' -fuzztime=$(FUZZTIME) ./translator/translate
	@echo "fuzz: FuzzRender (./pusher/caddy) for $(FUZZTIME)"
	$(GO) test -run='^$$' -fuzz='^FuzzRender$$' -fuzztime=$(FUZZTIME) ./pusher/caddy
	@echo "fuzz: FuzzStore ($(CADDYMOD)) for $(FUZZTIME)"
	cd $(CADDYMOD) && $(GO) test -run='^$$' -fuzz='^FuzzStore$$' -fuzztime=$(FUZZTIME) .

demo: tools build
	$(GO) run ./internal/demo

# bench runs the harness on the real apiserver and Caddy (1k and 10k Ingresses) and writes
# docs/benchmarks.md and docs/benchmarks.json; profiles go to .bench/.
bench: tools
	$(GO) run ./internal/bench -sizes 1000,10000 -out docs/benchmarks.md -json docs/benchmarks.json -profiles .bench

# bench-components runs the Go benchmarks of single components (translation, the watcher's
# time to marker against a bare informer, Caddy /load) for benchstat.
bench-components: tools
	@mkdir -p .bench
	$(GO) test -run '^$$' -bench . -benchtime 5x -count 5 -timeout 30m ./translator/translate/ ./watcher/ ./pusher/ | tee .bench/components.txt

# images builds one image per component (and Caddy, etcd, kube-apiserver and a test backend
# for the compose setup) from static binaries on IMAGE_BASE. Nothing can be pulled here, so
# use IMAGE_BASE=scratch on such a machine.
IMAGE_BASE ?= gcr.io/distroless/static-debian12:nonroot
images: tools
	deploy/images/build.sh $(IMAGE_BASE) dev

# certs writes a local CA and the components' mTLS certificates for the compose setup.
certs:
	$(GO) run ./internal/tools/certs -out deploy/compose/certs

clean:
	rm -rf bin
