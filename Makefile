# tugboat — build, generate, test, bench, lint and the local dev environment.
# Every tool is pinned and installed into ./bin; nothing is expected on the
# machine beyond Go (see go.mod for the version) and git.

SHELL := /usr/bin/env bash -o pipefail -o errexit
.DEFAULT_GOAL := build

LOCALBIN := $(CURDIR)/bin
## The Go toolchain every build, test and tool runs with: go1.26.10 fixes the
## standard-library vulnerabilities govulncheck reports as reached in go1.26.8
## (the machines' own Go); the go command fetches it from the module proxy once.
## go.mod pins the same (toolchain line); GOTOOLCHAIN=local overrides for a
## quick local build with the machine's Go.
GO_TOOLCHAIN ?= go1.26.10
export GOTOOLCHAIN := $(GO_TOOLCHAIN)

## Tool versions
CONTROLLER_GEN_VERSION ?= v0.21.0
GOLANGCI_LINT_VERSION ?= v2.15.0
GOVULNCHECK_VERSION ?= v1.9.0
## crd-ref-docs writes docs/api-reference.md from the API types (v0.3.0 builds with Go 1.26).
CRD_REF_DOCS_VERSION ?= v0.3.0
## The Go vulnerability database, as the golang.org/x/vulndb module publishes it
## (its OSV entries, data/osv) through the Go module proxy: vuln.go.dev itself is
## not always reachable (it is not from the development machines). Bump it like a
## tool: go list -m -f '{{.Version}}' golang.org/x/vulndb@latest
VULNDB_VERSION ?= v0.0.0-20261105234957-e22db6528018
## A Go version whose standard-library vulnerabilities `make vulncheck` reports as
## warnings only. Empty: with the pinned toolchain (GO_TOOLCHAIN) a reached
## vulnerability fails the target, in the standard library as in every module.
VULNCHECK_ACCEPT_STDLIB ?=

CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
GOVULNCHECK ?= $(LOCALBIN)/govulncheck-$(GOVULNCHECK_VERSION)
CRD_REF_DOCS ?= $(LOCALBIN)/crd-ref-docs-$(CRD_REF_DOCS_VERSION)
INDEXDB ?= $(LOCALBIN)/indexdb-$(VULNDB_VERSION)
VULNDB ?= $(LOCALBIN)/vulndb-$(VULNDB_VERSION)

## Version: what `tugboat version` prints and the agent reports to the hub,
## set at link time (cmd/tugboat/app.Version); also the images' tag.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS ?= -X tugboat.dev/tugboat/cmd/tugboat/app.Version=$(VERSION)

## Images (make image): OCI layouts in IMAGE_DIR/tugboat and IMAGE_DIR/tugboat-agent,
## built over IMAGE_BASE (an OCI layout directory or a tarball; empty: the
## offline default base, see docs/install.md), dated by SOURCE_DATE_EPOCH.
IMAGE_DIR ?= $(LOCALBIN)/image
IMAGE_BASE ?=
IMAGE_ARCH ?= $(shell go env GOARCH)
IMAGE_TARBALL ?= false
IMAGE_REPOSITORY ?= ghcr.io/tugboat-dev
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)

## The Helm charts (config/charts): make generate writes their generated files.
HUB_CHART := config/charts/tugboat-hub
AGENT_CHART := config/charts/tugboat-agent

GO_TEST_FLAGS ?= -count=1 -timeout=40m
PKGS ?= ./...

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ { printf "  %-12s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/tugboat (every subcommand) and bin/tugboat-agent (the agent's image: only agent and version).
	go build -ldflags "$(LDFLAGS)" -o $(LOCALBIN)/tugboat ./cmd/tugboat
	go build -ldflags "$(LDFLAGS)" -tags agentonly -o $(LOCALBIN)/tugboat-agent ./cmd/tugboat

.PHONY: image
image: ## Build the tugboat and tugboat-agent images without Docker: OCI layouts in bin/image (IMAGE_BASE, IMAGE_TARBALL=true, ...).
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) go run ./e2e/image/build-image --version "$(VERSION)" --revision "$(REVISION)" \
		--out "$(IMAGE_DIR)" --base "$(IMAGE_BASE)" --arch "$(IMAGE_ARCH)" --repository "$(IMAGE_REPOSITORY)" --tarball=$(IMAGE_TARBALL)

.PHONY: generate
generate: $(CONTROLLER_GEN) $(CRD_REF_DOCS) ## Generate deepcopy, and into the Helm charts the CRDs and RBAC (controller-gen) and the agent's webhook configurations; the test CRDs of Flux (HelmRelease; notification-controller's Provider and Alert v1beta3) from their api modules; the API reference docs/api-reference.md (crd-ref-docs).
	$(CONTROLLER_GEN) object:headerFile=config/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=$(HUB_CHART)/files/crds
	$(CONTROLLER_GEN) rbac:roleName=tugboat-hub paths="{./controllers/...,./cmd/tugboat/app/hub/...}" output:rbac:artifacts:config=$(HUB_CHART)/files/rbac
	$(CONTROLLER_GEN) rbac:roleName=tugboat-agent paths=./agent/... output:rbac:artifacts:config=$(AGENT_CHART)/files/rbac
	# Flux's HelmRelease CRD for the tests, from the pinned helm-controller/api module.
	$(CONTROLLER_GEN) crd paths=github.com/fluxcd/helm-controller/api/v2 output:crd:artifacts:config=e2e/testdata/crds/flux
	go run ./agent/admission/genmanifests -o $(AGENT_CHART)/files/webhook/manifests.yaml
	$(CONTROLLER_GEN) crd paths=github.com/fluxcd/notification-controller/api/v1beta3 output:crd:artifacts:config=e2e/testdata/crds/notification-controller
	# The API reference, from the same types and markers the CRDs are generated from.
	$(CRD_REF_DOCS) --log-level=WARN --config=config/crd-ref-docs.yaml --source-path=./api/v1alpha1 --renderer=markdown --output-path=docs/api-reference.md

.PHONY: verify
verify: generate ## Regenerate and fail if the tree changed (also checks go.mod tidiness and gofmt).
	go mod tidy
	cd e2e/tools/kube && go mod tidy
	cd e2e/tools/etcd && go mod tidy
	cd e2e/tools/gitea && go mod tidy
	cd e2e/tools/prometheus && go mod tidy
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	@if [ -n "$$(git status --porcelain)" ]; then \
		echo "generated files or go.mod are out of date; run 'make generate' and 'go mod tidy' and commit:"; \
		git status --porcelain; git --no-pager diff --stat; exit 1; fi

.PHONY: k8s-bins
k8s-bins: ## Build the pinned etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok into bin/k8s, helm and prometheus into bin/ (cached).
	go run ./e2e/bins/k8s-bins

.PHONY: test
test: k8s-bins ## Run every test, including the multi-cluster e2e suites against real control planes.
	go test $(GO_TEST_FLAGS) $(PKGS)

.PHONY: mutate
mutate: k8s-bins ## Mutation test: apply deliberate bugs to the pipeline, recorder, receiver and reporter rules one at a time and count those the tests catch (score in docs/reliability.md; not part of test).
	go run ./e2e/mutate

STRESS_COUNT ?= 10
STRESS_PKGS ?= ./agent/tracker ./agent/actions ./agent/reporter ./controllers/promotion ./controllers/releasehistory ./webhook/receiver ./e2e/chaos
STRESS_RUN ?= .
.PHONY: stress
stress: k8s-bins ## Hunt flakes: run STRESS_PKGS (tests matching STRESS_RUN) STRESS_COUNT times with -race, e.g. make stress STRESS_PKGS=./agent/tracker STRESS_RUN=TestTracker_announces STRESS_COUNT=50; docs/development.md lists the flakes found and their causes.
	go test -race -count=$(STRESS_COUNT) -run '$(STRESS_RUN)' -timeout=60m $(STRESS_PKGS)

CHAOS_SEED ?=
CHAOS_SCALE ?= 3
CHAOS_TIME_SCALE ?= 10
.PHONY: chaos
chaos: k8s-bins ## The chaos suite, longer than in test: CHAOS_SCALE (releases and faults per scenario, 1-3), CHAOS_TIME_SCALE (10: a 5-minute outage lasts 30s); CHAOS_SEED reproduces a run.
	CHAOS_SEED=$(CHAOS_SEED) CHAOS_SCALE=$(CHAOS_SCALE) CHAOS_TIME_SCALE=$(CHAOS_TIME_SCALE) \
		go test -count=1 -timeout=90m -run '^TestChaos$$' -v ./e2e/

.PHONY: bench
bench: k8s-bins ## Run the benchmarks (figures go to docs/benchmarks.md).
	go test -count=1 -timeout=60m -run='^$$' -bench=. -benchmem $(PKGS)

FUZZTIME ?= 10s
.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each.
	@for pkg in $$(go list ./...); do \
		for f in $$(go test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "fuzz $$pkg $$f"; go test $$pkg -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME); \
		done; done

.PHONY: lint
lint: $(GOLANGCI_LINT) vulncheck ## Run golangci-lint (config in .golangci.yml) and govulncheck (make vulncheck).
	$(GOLANGCI_LINT) run ./...

.PHONY: vulncheck
vulncheck: $(GOVULNCHECK) $(VULNDB) ## Run govulncheck (pinned) against the pinned vulnerability database; fails when the code calls a vulnerable symbol.
	$(GOVULNCHECK) -db file://$(VULNDB) -format json ./... | go run ./e2e/vulncheck -accept-stdlib "$(VULNCHECK_ACCEPT_STDLIB)"

.PHONY: dev
dev: ## Start the local hub and three spokes, production behind an approval gate (tugboat dev up --spokes 3); Ctrl-C stops them.
	go run ./cmd/tugboat dev up --spokes 3

.PHONY: demo
demo: ## The guided demo (tugboat dev demo): promote, approve, a failing upgrade, a failing smoke test that stops a version, a rollback and its hold on local clusters, with a timeline; exits 0 and cleans up.
	go run ./cmd/tugboat dev demo

.PHONY: clean
clean: ## Remove build output (keeps the cached control-plane binaries in bin/k8s).
	rm -f $(LOCALBIN)/tugboat $(LOCALBIN)/tugboat-agent
	rm -rf $(IMAGE_DIR)

$(CONTROLLER_GEN):
	@mkdir -p $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(LOCALBIN)/controller-gen $@

$(CRD_REF_DOCS):
	@mkdir -p $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install github.com/elastic/crd-ref-docs@$(CRD_REF_DOCS_VERSION)
	mv $(LOCALBIN)/crd-ref-docs $@

$(GOVULNCHECK):
	@mkdir -p $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION)
	mv $(LOCALBIN)/govulncheck $@

$(INDEXDB):
	@mkdir -p $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install golang.org/x/vulndb/cmd/indexdb@$(VULNDB_VERSION)
	mv $(LOCALBIN)/indexdb $@

## The v1 database govulncheck reads (-db file://...), indexed from the module's OSV files.
$(VULNDB): $(INDEXDB)
	rm -rf $@.tmp
	$(INDEXDB) -vulns "$$(go env GOMODCACHE)/golang.org/x/vulndb@$(VULNDB_VERSION)/data/osv" -out $@.tmp
	mv $@.tmp $@

$(GOLANGCI_LINT):
	@mkdir -p $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(LOCALBIN)/golangci-lint $@
