# drip — run `make help` for the targets. Every target CI runs is one a developer can run.
SHELL := /usr/bin/env bash
GO ?= go
BIN := bin/drip
PKGS := ./...
STATICCHECK_VERSION := v0.8.2
GOBIN := $(shell $(GO) env GOPATH)/bin
# Benchmarks: override BENCH/COUNT/BENCHTIME, e.g. `make bench BENCH=Match COUNT=10`.
BENCH ?= .
COUNT ?= 5
BENCHTIME ?= 1s

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_.-]+:.*## / {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the drip binary into bin/.
	$(GO) build -trimpath -o $(BIN) ./cmd/drip

.PHONY: run
run: ## Run a 4-broker mesh on loopback with a demo publisher and subscribers (Ctrl-C stops it).
	$(GO) run ./cmd/drip local --demo

.PHONY: demo
demo: ## The same demo for 5 seconds; fails if nothing is delivered (CI smoke test).
	$(GO) run ./cmd/drip local --demo --duration 5s --log-level warn

.PHONY: test
test: ## Run all tests with the race detector (what CI runs).
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

.PHONY: test-short
test-short: ## Run the fast subset of the tests.
	$(GO) test -short -count=1 $(PKGS)

.PHONY: bench
bench: ## Run benchmarks (BENCH=regexp COUNT=n BENCHTIME=d); see docs/results/.
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(COUNT) -benchtime $(BENCHTIME) $(PKGS)

.PHONY: fuzz
fuzz: ## Fuzz every Fuzz* target for FUZZTIME each (default 30s).
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $${FUZZTIME:-30s} $$pkg || exit 1; \
	  done; \
	done

.PHONY: tools
tools: ## Install the pinned developer tools (staticcheck).
	@test -x $(GOBIN)/staticcheck && $(GOBIN)/staticcheck -version | grep -q '($(STATICCHECK_VERSION:v%=%))' \
	  || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

.PHONY: fmt
fmt: ## Format the code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: lint
lint: tools ## go vet and staticcheck.
	$(GO) vet $(PKGS)
	$(GOBIN)/staticcheck $(PKGS)

.PHONY: verify
verify: lint proto-check ## Everything CI checks before tests: gofmt, vet, staticcheck, go.mod tidy, generated code.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@cp go.mod /tmp/drip-go.mod.bak; cp go.sum /tmp/drip-go.sum.bak; $(GO) mod tidy; \
	  if ! git diff --quiet -- go.mod go.sum; then echo "go.mod/go.sum not tidy:"; git diff -- go.mod go.sum; \
	    cp /tmp/drip-go.mod.bak go.mod; cp /tmp/drip-go.sum.bak go.sum; exit 1; fi

.PHONY: clean
clean: ## Remove build outputs.
	rm -rf bin dist

PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
PROTO_FILES := $(wildcard api/proto/drip/v1/*.proto)

.PHONY: proto-tools
proto-tools: ## Install protoc (Debian) and the pinned Go protoc plugins.
	@command -v protoc >/dev/null || { apt-get update -qq && apt-get install -y -qq protobuf-compiler; }
	@$(GOBIN)/protoc-gen-go --version 2>/dev/null | grep -q '$(PROTOC_GEN_GO_VERSION)' \
	  || $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	@$(GOBIN)/protoc-gen-go-grpc --version 2>/dev/null | grep -q '$(PROTOC_GEN_GO_GRPC_VERSION:v%=%)' \
	  || $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

.PHONY: proto
proto: proto-tools ## Regenerate the committed protobuf/gRPC Go code.
	PATH="$(GOBIN):$$PATH" protoc -I api/proto -I /usr/include \
	  --go_out=. --go_opt=module=github.com/dripmesh/drip \
	  --go-grpc_out=. --go-grpc_opt=module=github.com/dripmesh/drip \
	  $(PROTO_FILES)

.PHONY: proto-check
proto-check: proto ## Fail if the committed generated code differs from `make proto`.
	@git diff --exit-code -- api/ || { echo "generated code is stale: run make proto and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api/)" || { git status --porcelain -- api/; echo "untracked generated files: run make proto and commit"; exit 1; }
