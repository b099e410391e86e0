# drip — run `make help` for the targets. Every target CI runs is one a developer can run.
SHELL := /usr/bin/env bash
GO ?= go
BIN := bin/drip
# The testbed (lab, experiments) is a binary of its own, so drip ships without it.
LAB_BIN := bin/driplab
PKGS := ./...
STATICCHECK_VERSION := v0.8.2
HELM_VERSION := v3.22.0
# Container image of `make image`; the Helm chart defaults to drip:<appVersion> (docs/kubernetes.md).
IMAGE ?= drip
TAG ?= dev
GOBIN := $(shell $(GO) env GOPATH)/bin
# Benchmarks: override BENCH/COUNT/BENCHTIME, e.g. `make bench BENCH=Match COUNT=10`.
BENCH ?= .
COUNT ?= 5
BENCHTIME ?= 1s
# Lab experiments (`make experiments`, root, bin/driplab): where results go and how rates are scaled.
EXPERIMENTS_OUT ?= docs/results/experiments
EXPERIMENT_ARGS ?= --scale 0.1 --duration 60s
# The overload runs offer the 8-broker mesh twice and four times the paper's load for its links.
OVERLOAD_ARGS ?= --scale 0.2 --lab-bandwidth-scale 0.1 --duration 60s
OVERLOAD4_ARGS ?= --scale 0.4 --lab-bandwidth-scale 0.1 --duration 60s

.DEFAULT_GOAL := help

.PHONY: help
# Target names are coloured only on a terminal, in a column as wide as the longest.
help: ## Show this help.
	@if [ -t 1 ]; then on='\033[36m'; off='\033[0m'; else on=; off=; fi; \
	  awk -v on="$$on" -v off="$$off" 'BEGIN {FS = ":.*## "} \
	    /^[a-zA-Z0-9_.-]+:.*## / {name[++n] = $$1; text[n] = $$2; if (length($$1) > w) w = length($$1)} \
	    END {for (i = 1; i <= n; i++) printf "  %s%-" w "s%s  %s\n", on, name[i], off, text[i]}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/drip (the broker and its tools) and bin/driplab (the lab and experiments).
	$(GO) build -trimpath -o $(BIN) ./cmd/drip
	$(GO) build -trimpath -o $(LAB_BIN) ./cmd/driplab

.PHONY: run
# The built binary, not `go run`: go run exits 1 when interrupted, and make
# would report that as an error on every Ctrl-C.
run: build ## Run a 4-broker mesh on loopback with a demo publisher and subscribers (Ctrl-C stops it).
	$(BIN) local --demo

.PHONY: demo
demo: build ## The same demo for 5 seconds; fails if nothing is delivered (CI smoke test).
	$(BIN) local --demo --duration 5s

# brokertest's simulations run whole meshes on one goroutine, where the race
# detector has nothing to find and costs a tenfold slowdown: make test runs
# them once, without it, and every other package with it.
SIM_PKGS := ./internal/broker/brokertest/
RACE_PKGS = $(shell $(GO) list $(PKGS) | grep -v '/internal/broker/brokertest$$')

.PHONY: test
test: ## Run all tests: with the race detector, but the single-goroutine simulations (200 churn schedules), which run without it (what CI runs).
	$(GO) test -race -count=1 -timeout 20m $(RACE_PKGS)
	$(GO) test -count=1 -timeout 20m $(SIM_PKGS)

# Churn schedules for make soak: SOAK_SEEDS random fault schedules from seed 1.
SOAK_SEEDS ?= 3000

.PHONY: soak
soak: ## Run SOAK_SEEDS (3000) random churn schedules in virtual time (about 20 minutes on 2 cores).
	$(GO) test -count=1 -timeout 3h ./internal/broker/brokertest/ -run TestChurnProperty -args -seeds $(SOAK_SEEDS)

.PHONY: test-short
test-short: ## Run the fast subset of the tests.
	$(GO) test -short -count=1 $(PKGS)

.PHONY: bench
bench: ## Run benchmarks (BENCH=regexp COUNT=n BENCHTIME=d); see docs/results/.
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(COUNT) -benchtime $(BENCHTIME) $(PKGS)

.PHONY: experiments
# 28 runs of about 75 s each (60 s of sending, start-up, drain): about 35 minutes.
# driplab runs the brokers as bin/drip processes, the drip it finds beside it.
experiments: build ## Run Carzaniga09 §5.2.1 on drip, ActiveMQ and NATS in the emulated WAN lab (root, ~35 min) into EXPERIMENTS_OUT.
	$(LAB_BIN) experiment run --lab --scenario scaling --systems drip,drip-uncompressed,activemq,nats $(EXPERIMENT_ARGS) --out $(EXPERIMENTS_OUT)
	$(LAB_BIN) experiment run --lab --scenario single-broker --systems drip,drip-uncompressed,activemq,nats $(EXPERIMENT_ARGS) --out $(EXPERIMENTS_OUT)
	$(LAB_BIN) experiment run --lab --scenario brokers-8 --systems drip,drip-uncompressed,activemq,nats $(OVERLOAD_ARGS) --out $(EXPERIMENTS_OUT)/overload
	$(LAB_BIN) experiment run --lab --scenario brokers-8 --systems drip,drip-uncompressed,activemq,nats $(OVERLOAD4_ARGS) --out $(EXPERIMENTS_OUT)/overload4

.PHONY: experiments-scale
# Carzaniga09 §5.2.2 / Fig. 7 (issue 19): 42 drip broker processes in the lab
# (root). Rates are the paper's times --scale (CPU-bound: 42 brokers, the
# clients and the emulator share 2 cores), links keep the paper's 1 MB/s
# (docs/results/experiments/scale/README.md says why). The sweeps of
# SCALE_SWEEPS on drip and drip-uncompressed, the base on NATS, then the Fig. 7
# plots from all the JSON; about 20 minutes for the clients sweep.
SCALE_OUT ?= docs/results/experiments/scale
SCALE_ARGS ?= --scale 0.005 --lab-bandwidth-scale 1 --duration 60s --drip-args=--pprof
SCALE_SWEEPS ?= scale-clients
# Live reconvergence at 42 sites: a link cut on a cycle and a broker restart
# while the base ramps (into SCALE_OUT/faults; empty SCALE_FAULTS skips it).
SCALE_FAULTS ?= --fault cut:s0/s11@12s+8s --fault restart:s5@35s+5s
experiments-scale: build ## Run Carzaniga09 §5.2.2's 42-broker sweeps on drip and NATS in the emulated WAN lab (root, ~20 min) into SCALE_OUT.
	$(LAB_BIN) experiment topology --scenario scale-base --out $(SCALE_OUT)
	for s in $(SCALE_SWEEPS); do \
	  $(LAB_BIN) experiment run --lab --scenario $$s --systems drip,drip-uncompressed $(SCALE_ARGS) --out $(SCALE_OUT) || exit 1; \
	done
	$(LAB_BIN) experiment run --lab --scenario scale-base --systems nats $(SCALE_ARGS) --out $(SCALE_OUT)
	if [ -n "$(SCALE_FAULTS)" ]; then \
	  $(LAB_BIN) experiment run --lab --scenario scale-base --systems drip $(SCALE_ARGS) $(SCALE_FAULTS) --out $(SCALE_OUT)/faults || exit 1; \
	fi
	for s in $(SCALE_SWEEPS); do \
	  $(LAB_BIN) experiment plot --scenario $$s --systems drip,drip-uncompressed,nats --dir $(SCALE_OUT) || exit 1; \
	done

.PHONY: experiments-harmony
# Kim10 §4 (issue 14): dynamic path delays and path failures on drip's four
# deadline variants and NATS, in the lab (root); about 25 minutes.
HARMONY_OUT ?= docs/results/harmony
HARMONY_ARGS ?=
experiments-harmony: build ## Run Kim10 §4's delay and failure experiments on drip's deadline variants and NATS in the lab (root, ~25 min) into HARMONY_OUT.
	$(LAB_BIN) harmony --scenario all --out $(HARMONY_OUT) $(HARMONY_ARGS)

.PHONY: experiments-congestion
# Malekpour11 §IV (issue 13): Figs. 7–10 and §IV-E on drip without and with
# content-aware congestion control (and NATS and ActiveMQ for Figs. 7 and 8), in
# the lab (root); about 22 minutes. CONGESTION_ARGS adds flags (--scenario fig7, --scale 0.5).
CONGESTION_OUT ?= docs/results/congestion/lab
CONGESTION_ARGS ?=
experiments-congestion: build ## Run Malekpour11 §IV's congestion-control experiments on drip with and without control in the lab (root, ~22 min) into CONGESTION_OUT.
	$(LAB_BIN) congestion --scenario all --out $(CONGESTION_OUT) $(CONGESTION_ARGS)

.PHONY: churn
# Three runs of about 70 s each (40 s of sending, start-up, drain) on 12
# broker processes; not part of make test. CHURN_ARGS adds flags (--seed, --keep DIR).
CHURN_OUT ?= docs/results/churn
CHURN_ARGS ?=
churn: build ## Kill, SIGTERM and restart brokers of a 12-process loopback mesh under the bench (~4 min) into CHURN_OUT.
	$(LAB_BIN) churn --scenario all --out $(CHURN_OUT) $(CHURN_ARGS)

# make perf (issue 12): drip broker processes (bin/drip), nats-server and
# ActiveMQ side by side on loopback, driven by bin/driplab; about 15 minutes
# on 2 cores. It records the commit measured; PERF_NOTE heads the report,
# PERF_ARGS adds flags (--cases one-to-one,latency, --reps 5, ...).
PERF_OUT ?= docs/results/perf
PERF_REPORT ?= docs/results/perf.md
PERF_NOTE ?=
PERF_ARGS ?=
PERF_QUICK_OUT ?= /tmp/drip-perf-quick

.PHONY: perf
perf: build ## Measure the data plane against nats-server and ActiveMQ here (~15 min) into docs/results/perf.md (not part of test).
	$(LAB_BIN) perf --out $(PERF_OUT) --report $(PERF_REPORT) \
	  --source "$$(git rev-parse --short HEAD)$$(git diff --quiet HEAD -- . ':!docs/results' 2>/dev/null || echo ' with uncommitted changes')" \
	  $(if $(PERF_NOTE),--note "$(PERF_NOTE)") $(PERF_ARGS)

.PHONY: perf-quick
perf-quick: build ## A 2-minute smoke run of every perf case into PERF_QUICK_OUT (/tmp/drip-perf-quick); docs untouched.
	$(LAB_BIN) perf --quick --out $(PERF_QUICK_OUT) --report $(PERF_QUICK_OUT)/perf.md $(PERF_ARGS)

.PHONY: fuzz
fuzz: ## Fuzz every Fuzz* target for FUZZTIME each (default 30s).
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $${FUZZTIME:-30s} $$pkg || exit 1; \
	  done; \
	done

.PHONY: tools
tools: ## Install the pinned developer tools (staticcheck, helm).
	@test -x $(GOBIN)/staticcheck && $(GOBIN)/staticcheck -version | grep -q '($(STATICCHECK_VERSION:v%=%))' \
	  || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@$(GO) version -m $(GOBIN)/helm 2>/dev/null | grep -q 'mod[[:space:]]*helm.sh/helm/v3[[:space:]]*$(HELM_VERSION)[[:space:]]' \
	  || (cd / && GOFLAGS=-mod=mod $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION))

.PHONY: fmt
fmt: ## Format the code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: lint
lint: tools ## go vet and staticcheck.
	$(GO) vet $(PKGS)
	$(GOBIN)/staticcheck $(PKGS)

.PHONY: verify
verify: lint proto-check tidy-check ## Everything CI checks before tests: gofmt, vet, staticcheck, go.mod tidy, generated code.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: tidy-check
# Plain `go mod tidy` (no -e): a module the proxy cannot serve fails the check
# with tidy's own error instead of passing silently. go.mod and go.sum are
# restored either way, so the check never edits the tree.
tidy-check: ## Fail if go.mod/go.sum are not what `go mod tidy` makes, or tidy itself fails.
	@bak=$$(mktemp -d); cp go.mod go.sum "$$bak"/; \
	  restore() { cp "$$bak"/go.mod "$$bak"/go.sum .; rm -rf "$$bak"; }; \
	  if ! $(GO) mod tidy 2>"$$bak/err"; then echo "go mod tidy failed:"; cat "$$bak/err"; restore; exit 1; fi; \
	  if ! cmp -s go.mod "$$bak"/go.mod || ! cmp -s go.sum "$$bak"/go.sum; then \
	    echo "go.mod/go.sum not tidy (run go mod tidy and commit):"; \
	    diff -u "$$bak"/go.mod go.mod; diff -u "$$bak"/go.sum go.sum; restore; exit 1; fi; \
	  rm -rf "$$bak"

.PHONY: image
image: ## Build the container image IMAGE:TAG (default drip:dev) with Docker (deploy/Dockerfile).
	docker build -f deploy/Dockerfile --build-arg VERSION=$(TAG) -t $(IMAGE):$(TAG) .

.PHONY: chart-test
chart-test: tools ## Lint the Helm chart and render its values scenarios against the Kubernetes API types.
	$(GO) test -count=1 ./deploy/helm/...

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

# A real single-node Kubernetes on this machine, for the e2e suite where kind
# cannot run (no Docker): see docs/k8s-local.md. All but k8s-local-build need root.
K8S_LOCAL := hack/k8s-local

.PHONY: k8s-local-build
k8s-local-build: ## Build or reuse the pinned Kubernetes, CoreDNS and helm binaries (cold: ~15 min).
	$(K8S_LOCAL)/build.sh

.PHONY: k8s-local-up
k8s-local-up: ## Start a single-node cluster here (root, no Docker/systemd); kubeconfig: /var/run/drip-k8s/kubeconfig.
	$(K8S_LOCAL)/up.sh

.PHONY: k8s-local-smoke
k8s-local-smoke: ## Check the k8s-local cluster: pods, CoreDNS names, Services, API server from a pod.
	$(K8S_LOCAL)/smoke.sh

.PHONY: k8s-local-down
k8s-local-down: ## Tear the k8s-local cluster down and fail if anything is left behind.
	$(K8S_LOCAL)/down.sh
	$(K8S_LOCAL)/check-clean.sh

# The e2e suite on Kubernetes (test/e2e/README.md): a kind cluster it creates
# (needs Docker), or the cluster of E2E_KUBECONFIG; E2E_ARGS adds suite flags.
E2E_KUBECONFIG ?=
E2E_ARGS ?=

.PHONY: e2e
e2e: tools ## Install the chart in kind (or E2E_KUBECONFIG=file) and check it under load; E2E_ARGS=-keep etc. (~5 min).
	$(GO) test -count=1 -v -timeout 30m ./test/e2e/ -args -e2e -image=$(IMAGE):$(TAG) \
	  $(if $(E2E_KUBECONFIG),-kubeconfig=$(E2E_KUBECONFIG)) $(E2E_ARGS)
