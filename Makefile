# modelgate Makefile. `make help` lists the targets.
#
# Every tool is pinned here and built from the Go module proxy into ./bin,
# keyed by version, so a fresh machine needs only Go and make.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMG ?= ghcr.io/modelgate/modelgate:$(VERSION)
CONTAINER_TOOL ?= docker

LOCALBIN := $(CURDIR)/bin
GO ?= go

## Pinned tool versions.
K8S_VERSION ?= 1.36.3
CONTROLLER_GEN_VERSION ?= v0.23.0
KUSTOMIZE_VERSION ?= v5.8.1
GOLANGCI_LINT_VERSION ?= v2.15.0

CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
KUSTOMIZE ?= $(LOCALBIN)/kustomize-$(KUSTOMIZE_VERSION)
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)

## kube-apiserver and etcd for envtest and `make run`, built from source by
## hack/envtest (no binary downloads). A KUBEBUILDER_ASSETS you set wins.
ENVTEST_BUILT_DIR := $(LOCALBIN)/k8s/$(K8S_VERSION)
ifeq ($(strip $(KUBEBUILDER_ASSETS)),)
ENVTEST_ASSETS := $(ENVTEST_BUILT_DIR)
ENVTEST_DEPS := $(ENVTEST_BUILT_DIR)/kube-apiserver $(ENVTEST_BUILT_DIR)/etcd
else
ENVTEST_ASSETS := $(KUBEBUILDER_ASSETS)
ENVTEST_DEPS :=
endif

## kubectl for `make run`: the one on PATH, else built from source.
KUBECTL ?= $(or $(shell command -v kubectl 2>/dev/null),$(ENVTEST_BUILT_DIR)/kubectl)

GO_PACKAGES := ./...

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} \
	/^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } \
	/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

## Packages whose markers controller-gen reads. MARKER_PATHS holds the
## +kubebuilder:webhook and +kubebuilder:rbac markers; separate packages with
## ";" (e.g. ./webhook/...;./validators/...) when another package gains some.
## API_PATHS holds the CRD types (CRDs and deepcopy).
MARKER_PATHS := ./webhook/...;./certs/...
API_PATHS := ./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRDs, webhook configuration and RBAC from the code's markers.
	$(CONTROLLER_GEN) rbac:roleName=modelgate webhook paths="$(MARKER_PATHS)" \
		output:webhook:artifacts:config=config/webhook output:rbac:artifacts:config=config/rbac
	@# controller-gen never deletes a CRD: start empty, so that a removed or
	@# renamed type leaves no stale file behind (make verify sees the change).
	rm -f config/crd/bases/*.yaml
	$(CONTROLLER_GEN) crd paths="$(API_PATHS)" output:crd:artifacts:config=config/crd/bases

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code for the API types.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="$(API_PATHS)"

.PHONY: fmt
fmt: ## Run gofmt on the code.
	gofmt -s -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet.
	$(GO) vet $(GO_PACKAGES)

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (config: .golangci.yml).
	$(GOLANGCI_LINT) run $(GO_PACKAGES)

.PHONY: verify
verify: manifests generate $(KUSTOMIZE) ## Fail when generated files (CRDs, deepcopy, webhook, RBAC) are stale, the install does not render, or code is not gofmt'ed.
	@test -z "$$(gofmt -s -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -s -l $$(git ls-files '*.go'); exit 1; }
	@git diff --exit-code -- config api || { echo "generated files are stale: run 'make manifests generate' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- config api)" || { git status --porcelain -- config api; echo "untracked generated files: commit them"; exit 1; }
	@$(KUSTOMIZE) build config/default >/dev/null || { echo "config/default does not render: is every generated CRD listed in config/crd/kustomization.yaml?"; exit 1; }

##@ Test

.PHONY: test
test: test-unit test-policies test-integration ## Run every test: unit, fuzz seeds, the policy library through modelgate test, and the envtest suite on a real API server.

.PHONY: test-unit
test-unit: ## Run unit tests (with fuzz seed corpora) of the pure packages.
	$(GO) test $$($(GO) list $(GO_PACKAGES) | grep -v /test/integration)

.PHONY: test-policies
test-policies: ## Run the policy library's Rego tests and declarative cases (policies/library/tests) through the webhook's code.
	$(GO) run ./cmd/modelgate test policies/library

.PHONY: test-integration
test-integration: $(ENVTEST_DEPS) ## Run the Ginkgo suite on envtest (real kube-apiserver and etcd, real webhook server).
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(GO) test ./test/integration/... -count=1 -v -args -ginkgo.v

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 30s).
	@for pkg in $$($(GO) list $(GO_PACKAGES)); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "== $$pkg $$f"; $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$${FUZZTIME:-30s} -fuzzminimizetime=2s $$pkg; \
		done; done

.PHONY: bench
bench: ## Run the benchmarks with allocation counts.
	$(GO) test -run='^$$' -bench=. -benchmem $(GO_PACKAGES)

##@ Build

.PHONY: build
build: ## Build bin/modelgate.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o $(LOCALBIN)/modelgate ./cmd/modelgate

.PHONY: run
run: build $(ENVTEST_DEPS) kubectl ## Start a local control plane with modelgate in it (Ctrl-C stops everything).
	$(GO) build -o $(LOCALBIN)/devcluster ./hack/devcluster
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" KUBECTL="$(KUBECTL)" exec $(LOCALBIN)/devcluster --modelgate $(LOCALBIN)/modelgate

.PHONY: docker-build
docker-build: ## Build the container image IMG.
	$(CONTAINER_TOOL) build --build-arg VERSION=$(VERSION) -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the container image IMG.
	$(CONTAINER_TOOL) push $(IMG)

.PHONY: build-installer
build-installer: manifests $(KUSTOMIZE) ## Write dist/install.yaml, every manifest in one file.
	mkdir -p dist
	$(KUSTOMIZE) build config/default > dist/install.yaml

##@ Dependencies

.PHONY: envtest
envtest: $(ENVTEST_BUILT_DIR)/kube-apiserver $(ENVTEST_BUILT_DIR)/etcd ## Build kube-apiserver and etcd into bin/k8s/<version>.

$(ENVTEST_BUILT_DIR)/kube-apiserver: hack/envtest/go.mod hack/envtest/go.sum
	@echo "building kube-apiserver $(K8S_VERSION) from source (about 4 minutes on 2 cores, once)"
	cd hack/envtest && $(GO) build -o $@ k8s.io/kubernetes/cmd/kube-apiserver

$(ENVTEST_BUILT_DIR)/etcd: hack/envtest/go.mod hack/envtest/go.sum
	@echo "building etcd from source (about 30 seconds, once)"
	cd hack/envtest && $(GO) build -o $@ go.etcd.io/etcd/server/v3

.PHONY: kubectl
kubectl: $(KUBECTL) ## Make sure a kubectl is available (built from source when none is on PATH).

$(ENVTEST_BUILT_DIR)/kubectl: hack/envtest/go.mod hack/envtest/go.sum
	@echo "no kubectl on PATH: building kubectl $(K8S_VERSION) from source (about 1 minute, once)"
	cd hack/envtest && $(GO) build -o $@ k8s.io/kubernetes/cmd/kubectl

$(CONTROLLER_GEN):
	GOBIN=$(LOCALBIN)/.tmp $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(LOCALBIN)/.tmp/controller-gen $@

$(KUSTOMIZE):
	GOBIN=$(LOCALBIN)/.tmp $(GO) install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	mv $(LOCALBIN)/.tmp/kustomize $@

$(GOLANGCI_LINT):
	GOBIN=$(LOCALBIN)/.tmp $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(LOCALBIN)/.tmp/golangci-lint $@

.PHONY: clean
clean: ## Remove build outputs (keeps the built tools and control plane).
	rm -rf dist $(LOCALBIN)/modelgate $(LOCALBIN)/dev
