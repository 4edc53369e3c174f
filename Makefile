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
HELM_VERSION ?= v3.22.0
# Prometheus and promtool for make test-prometheus (and make run
# PROMETHEUS=1), built from their module.
PROMETHEUS_VERSION ?= v0.316.0
# The Prometheus Operator, built from hack/prometheus-operator (its own
# module: its dependencies are not modelgate's), at the version that
# module's go.mod requires.
PROMETHEUS_OPERATOR_VERSION := $(shell awk '$$1 == "require" && $$2 == "github.com/prometheus-operator/prometheus-operator" {print $$3}' hack/prometheus-operator/go.mod)
# easyjson's generator is built from the main module, so at the version
# go.mod requires for its runtime: keep the two equal.
EASYJSON_VERSION ?= v0.9.2

CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
KUSTOMIZE ?= $(LOCALBIN)/kustomize-$(KUSTOMIZE_VERSION)
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
HELM ?= $(LOCALBIN)/helm-$(HELM_VERSION)
PROMETHEUS_BIN ?= $(LOCALBIN)/prometheus-$(PROMETHEUS_VERSION)
PROMTOOL ?= $(LOCALBIN)/promtool-$(PROMETHEUS_VERSION)
PROMETHEUS_OPERATOR ?= $(LOCALBIN)/prometheus-operator-$(PROMETHEUS_OPERATOR_VERSION)
EASYJSON ?= $(LOCALBIN)/easyjson-$(EASYJSON_VERSION)

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

## The simulated GPU cluster of `make run`, the e2e suite and bench-e2e:
## kube-scheduler and kube-controller-manager (hack/envtest, beside
## kube-apiserver) and kwok (hack/kwok), built from source, with kwok's
## stages (node and pod lifecycles) collected from its module.
KWOK_VERSION ?= v0.8.0
KWOK_DIR := $(LOCALBIN)/kwok/$(KWOK_VERSION)
CLUSTER_DEPS := $(ENVTEST_BUILT_DIR)/kube-scheduler $(ENVTEST_BUILT_DIR)/kube-controller-manager \
	$(KWOK_DIR)/kwok $(KWOK_DIR)/stages.yaml
## The stages kwok plays, from sigs.k8s.io/kwok's kustomize/stage: nodes
## become Ready and renew their leases; pods become Running, a Job's then
## Succeeded, and deleted pods go.
KWOK_STAGES := node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
	pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml

## The simulated cluster's real node (test/harnesses/cluster, as root): the kubelet
## (hack/envtest, beside kube-apiserver, its version stamped as a release's),
## containerd, its runc shim and the CNI plugins of the node's Pod network
## (loopback, bridge, host-local: hack/node), runc
## from Debian's package, and the images it runs, built without a container
## engine by hack/imagebuild into bin/node/images: modelgate's (as `make
## image` builds it, for this machine's platform), the pause image
## (test/standins/pause) and the stand-in engine (test/standins/engine).
CONTAINERD_VERSION ?= v2.4.2
NODE_DIR := $(LOCALBIN)/node/$(CONTAINERD_VERSION)
NODE_IMAGES := $(LOCALBIN)/node/images
CNI_PLUGINS := main/loopback main/bridge ipam/host-local
NODE_DEPS := $(ENVTEST_BUILT_DIR)/kubelet $(NODE_DIR)/containerd $(NODE_DIR)/containerd-shim-runc-v2 $(addprefix $(NODE_DIR)/cni/,$(notdir $(CNI_PLUGINS)))
KUBELET_LDFLAGS := -X k8s.io/component-base/version.gitVersion=v$(K8S_VERSION) \
	-X k8s.io/component-base/version.gitMajor=$(word 1,$(subst ., ,$(K8S_VERSION))) \
	-X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(K8S_VERSION))) \
	-X k8s.io/component-base/version.gitTreeState=clean
CONTAINERD_TAGS := no_btrfs,no_devmapper,no_zfs
## Only root can run the real node: others build nothing of it.
ifeq ($(shell id -u),0)
REAL_NODE_DEPS := $(NODE_DEPS) runc node-images
endif
HOST_PLATFORM := linux/$(shell $(GO) env GOARCH)

## cert-manager for make test-certmanager: its own controllers and
## cainjector, wired by test/certmanager (a module of its own: cert-manager's
## binaries cannot be installed from the module proxy, their modules replace
## the root one) and built from its module, and its CRDs, collected from the
## same module's deploy/crds. CERT_MANAGER_VERSION is test/certmanager/go.mod's.
CERT_MANAGER_VERSION ?= v1.21.2
CERT_MANAGER_DIR := $(LOCALBIN)/cert-manager/$(CERT_MANAGER_VERSION)
CERT_MANAGER_DEPS := $(CERT_MANAGER_DIR)/certmanager $(CERT_MANAGER_DIR)/crds

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
MARKER_PATHS := ./webhook/...;./controller/...;./audit/...
API_PATHS := ./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) configurations ## Generate the CRDs, webhook configuration and RBAC from the code's markers, and the installs' Configurations.
	$(CONTROLLER_GEN) rbac:roleName=modelgate webhook paths="$(MARKER_PATHS)" \
		output:webhook:artifacts:config=config/webhook output:rbac:artifacts:config=config/rbac
	@# Self-managed certificates need a few more permissions (the Secret, CA
	@# injection): only config/self-managed grants them.
	$(CONTROLLER_GEN) rbac:roleName=modelgate-certificates paths="./certs/..." \
		output:rbac:artifacts:config=config/self-managed/rbac
	@# controller-gen never deletes a CRD: start empty, so that a removed or
	@# renamed type leaves no stale file behind (make verify sees the change).
	rm -f config/crd/bases/*.yaml
	$(CONTROLLER_GEN) crd paths="$(API_PATHS)" output:crd:artifacts:config=config/crd/bases
	@# The Helm chart's objects that are config/'s own (hack/helmchart).
	$(GO) run ./hack/helmchart

## The installs in config/default and config/self-managed ship
## config/manager/configuration.yaml with their own certificates.mode
## (kustomize cannot change one field inside a ConfigMap's file), as
## generated copies: edit config/manager/configuration.yaml, then run
## `make manifests`; `make verify` fails when a copy is stale.
INSTALL_CONFIGURATIONS := config/default:cert-manager config/self-managed:self config/backstop:cert-manager
## ... and config/backstop's with policy.backstop: true.
BACKSTOP_INSTALLS := config/backstop

.PHONY: configurations
configurations: ## Write config/default's, config/self-managed's and config/backstop's configuration.yaml: config/manager's with their certificates.mode (and config/backstop's policy.backstop).
	@for install in $(INSTALL_CONFIGURATIONS); do \
		dir=$${install%%:*}; mode=$${install#*:}; \
		{ printf '# Generated by `make manifests` from config/manager/configuration.yaml\n# with certificates.mode: %s. Edit that file, not this one.\n#\n' "$$mode"; \
		  sed "s/^  mode: files$$/  mode: $$mode/" config/manager/configuration.yaml; } > $$dir/configuration.yaml; \
		grep -q "^  mode: $$mode$$" $$dir/configuration.yaml || { \
			echo "config/manager/configuration.yaml: no certificates line '  mode: files' to set to $$mode"; exit 1; }; \
	done
	@for dir in $(BACKSTOP_INSTALLS); do \
		sed -i -e "s/^  backstop: false$$/  backstop: true/" -e "s/^# with certificates.mode: \(.*\)\. Edit/# with certificates.mode: \1 and policy.backstop: true. Edit/" $$dir/configuration.yaml; \
		grep -q "^  backstop: true$$" $$dir/configuration.yaml || { \
			echo "config/manager/configuration.yaml: no policy line '  backstop: false' to set to true"; exit 1; }; \
	done

.PHONY: generate
generate: $(CONTROLLER_GEN) $(EASYJSON) ## Generate deepcopy code for the API types and the validating webhook's decoders (webhook/decode/viewtypes.go).
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="$(API_PATHS)"
	cd webhook/decode && $(EASYJSON) -no_std_marshalers viewtypes.go

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
verify: manifests generate $(KUSTOMIZE) ## Fail when generated files (CRDs, deepcopy, webhook, RBAC, Configurations) are stale, an install does not render, code is not gofmt'ed, or a go.mod (the root's or a tool module's) is not tidy.
	@test -z "$$(gofmt -s -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -s -l $$(git ls-files '*.go'); exit 1; }
	@for mod in $$(git ls-files 'go.mod' '*/go.mod'); do dir=$$(dirname $$mod); \
		(cd $$dir && $(GO) mod tidy -diff) || { echo "$$mod is not tidy: run 'go mod tidy' in $$dir and commit"; exit 1; }; done
	@git diff --exit-code -- config api charts webhook/decode/viewtypes_easyjson.go || { echo "generated files are stale: run 'make manifests generate' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- config api charts)" || { git status --porcelain -- config api charts; echo "untracked generated files: commit them"; exit 1; }
	@$(KUSTOMIZE) build config/default >/dev/null || { echo "config/default does not render: is every generated CRD listed in config/crd/kustomization.yaml?"; exit 1; }
	@$(KUSTOMIZE) build config/self-managed >/dev/null || { echo "config/self-managed does not render"; exit 1; }
	@$(KUSTOMIZE) build config/prometheus >/dev/null || { echo "config/prometheus does not render"; exit 1; }
	@$(KUSTOMIZE) build config/policyreport >/dev/null || { echo "config/policyreport does not render"; exit 1; }
	@$(KUSTOMIZE) build config/openreports >/dev/null || { echo "config/openreports does not render"; exit 1; }
	@$(KUSTOMIZE) build config/prometheus/kube-prometheus-stack >/dev/null || { echo "config/prometheus/kube-prometheus-stack does not render"; exit 1; }

##@ Test

.PHONY: test
test: test-unit test-policies helm-lint test-integration test-certmanager test-prometheus test-backstop test-installed test-e2e ## Run every test: unit, fuzz seeds, the policy library through modelgate test, the Helm chart, the envtest suite on a real API server, the monitoring objects under a real Prometheus, and the e2e suite on a simulated GPU cluster.

.PHONY: test-unit
test-unit: ## Run unit tests (with fuzz seed corpora) of the pure packages.
	$(GO) test $$($(GO) list $(GO_PACKAGES) | grep -v -e /test/suites/integration -e /test/suites/e2e -e /test/suites/makerun -e /test/suites/install -e /test/suites/prometheus -e /test/suites/backstop -e /test/suites/certmanager)

.PHONY: test-policies
test-policies: ## Run the policy library's Rego tests and declarative cases (policies/library/tests) through the webhook's code.
	$(GO) run ./cmd/modelgate test policies/library

## Values files helm-lint lints the chart with, beside its defaults.
HELM_LINT_VALUES := certificates.mode=self \
	certificates.mode=files,certificates.files.caBundle=Q0E= \
	metrics.service.enabled=true,metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true,metrics.dashboard.enabled=true,policyLibrary.enabled=true,policyReports.installCRD=true

.PHONY: helm-lint
helm-lint: $(HELM) $(ENVTEST_DEPS) ## Lint charts/modelgate with its defaults and representative values (pinned helm built into bin/), test that it renders config/'s installs, and helm install, upgrade and uninstall it on a real kube-apiserver (test/suites/install/helm*_test.go).
	$(HELM) lint --strict charts/modelgate
	@for set in $(HELM_LINT_VALUES); do echo "helm lint --set $$set"; $(HELM) lint --strict --quiet charts/modelgate --set "$$set" || exit 1; done
	MODELGATE_HELM=$(HELM) KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(GO) test ./test/suites/install/ -run 'TestHelm' -count=1 -v

## The Ginkgo suites (test-integration's and test-e2e's) run REPEAT times in
## a row, each run with GINKGO_ARGS: `make test-e2e REPEAT=3
## GINKGO_ARGS=-ginkgo.randomize-all` runs the e2e suite three times, each
## in a new random spec order (Ginkgo prints each run's seed;
## -ginkgo.seed=N runs one again). A run that fails stops the loop.
REPEAT ?= 1
GINKGO_ARGS ?=
## repeat runs the command that follows it REPEAT times, numbering the
## runs when there is more than one.
repeat = for i in $$(seq $(REPEAT)); do \
		if [ "$(REPEAT)" != 1 ]; then echo "== run $$i of $(REPEAT)"; fi;

.PHONY: test-integration
test-integration: $(ENVTEST_DEPS) $(ENVTEST_BUILT_DIR)/kube-controller-manager ## Run the Ginkgo suite on envtest (real kube-apiserver and etcd, real webhook server), and the install suite (test/suites/install: config/'s installs and the chart, some on a real API server); REPEAT and GINKGO_ARGS repeat and order the Ginkgo suites.
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(GO) test ./test/suites/install/... -count=1
	$(repeat) KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(GO) test ./test/suites/integration/... -count=1 -v -args -ginkgo.v $(GINKGO_ARGS) || exit 1; done

.PHONY: test-certmanager
test-certmanager: build $(HELM) $(ENVTEST_DEPS) $(CERT_MANAGER_DEPS) ## Install the chart with certificates.mode=cert-manager on a real kube-apiserver with cert-manager's own controllers and cainjector (built into bin/ from its module): the Certificates issued, the CA injected into the webhook configurations and the CRD conversion, bin/modelgate serving the issued certificate, and a rotation forced by renewBefore under a steady create load with no failed admission (test/suites/certmanager).
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(GO) test ./test/suites/certmanager/... -count=1 -timeout=10m -v -args \
		-modelgate=$(LOCALBIN)/modelgate -helm=$(HELM) -certmanager=$(CERT_MANAGER_DIR)

.PHONY: test-prometheus
test-prometheus: build $(ENVTEST_DEPS) $(CLUSTER_DEPS) $(PROMETHEUS_BIN) $(PROMTOOL) $(PROMETHEUS_OPERATOR) ## Run config/prometheus under a real Prometheus and Prometheus Operator (built into bin/): promtool check rules and promtool test rules (every alert quiet, then firing with its labels and annotations), then the Operator turns the ServiceMonitor and PrometheusRule into a Prometheus configuration that scrapes the simulated cluster's modelgate (two replicas, self-managed certificates) and API server with the shipped RBAC and scraper token; cause each event the alerts watch, and assert through Prometheus's API that every alert goes pending or firing and every dashboard query returns series (test/suites/prometheus, on the harness test/harnesses/prometheus).
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(GO) test ./test/suites/prometheus/... -count=1 -timeout=15m -v -args \
		-modelgate=$(LOCALBIN)/modelgate -prometheus=$(PROMETHEUS_BIN) -promtool=$(PROMTOOL) -prometheus-operator=$(PROMETHEUS_OPERATOR)

.PHONY: test-installed
test-installed: $(HELM) $(ENVTEST_DEPS) $(CLUSTER_DEPS) $(REAL_NODE_DEPS) $(CERT_MANAGER_DEPS) $(PROMETHEUS_BIN) $(PROMETHEUS_OPERATOR) ## Install modelgate as users do, into Pods on the simulated cluster's real node (as root), with cert-manager's own controllers: modelgate's image in the node's registry under the chart's reference, the chart installed by the pinned helm with its defaults, then config/default; two replicas in the node's Pod network answering every review (counted by their metrics), serving cert-manager's certificate; a rotation, a helm upgrade and a deleted replica under a steady load with no failed admission; the webhook unreachable once both are stopped; the node's services restarted and the node rebooted (test/suites/installed).
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(GO) test ./test/suites/installed/... -count=1 -timeout=20m -v -args -ginkgo.v -helm=$(HELM) -certmanager=$(CERT_MANAGER_DIR) \
		-prometheus=$(PROMETHEUS_BIN) -prometheus-operator=$(PROMETHEUS_OPERATOR)

.PHONY: test-backstop
test-backstop: build $(ENVTEST_DEPS) $(CLUSTER_DEPS) ## Prove the backstop (policy.backstop) on the simulated cluster: with every modelgate replica stopped, the API server refuses a GPU Pod over a library policy with its message and admits a compliant one uninjected; modelgate's audit then reports it (test/suites/backstop).
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(GO) test ./test/suites/backstop/... -count=1 -timeout=12m -v -args \
		-modelgate=$(LOCALBIN)/modelgate

## test/suites/makerun runs after test/suites/e2e, never beside it: each holds the
## machine's one real node while it runs.
.PHONY: test-e2e
test-e2e: build devcluster $(ENVTEST_DEPS) $(CLUSTER_DEPS) $(REAL_NODE_DEPS) $(PROMETHEUS_BIN) $(PROMTOOL) $(PROMETHEUS_OPERATOR) $(HELM) $(CERT_MANAGER_DEPS) ## Run the e2e suite: bin/modelgate in a simulated GPU cluster (scheduler, controller-manager, kwok nodes, the real node as root), and `make run`'s bin/devcluster; then `make run` with the real node, and `make run INSTALL=helm` (test/suites/makerun: root, as the real node specs); REPEAT and GINKGO_ARGS repeat and order the e2e suite.
	$(repeat) KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(GO) test ./test/suites/e2e/... -count=1 -timeout=20m -v -args -ginkgo.v $(GINKGO_ARGS) \
		-modelgate=$(LOCALBIN)/modelgate -devcluster=$(LOCALBIN)/devcluster -prometheus=$(PROMETHEUS_BIN) -prometheus-operator=$(PROMETHEUS_OPERATOR) || exit 1; done
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(GO) test ./test/suites/makerun/... -count=1 -timeout=20m -v -args -ginkgo.v \
		-modelgate=$(LOCALBIN)/modelgate -devcluster=$(LOCALBIN)/devcluster -helm=$(HELM) -certmanager=$(CERT_MANAGER_DIR)

.PHONY: bench-e2e
bench-e2e: build $(ENVTEST_DEPS) $(CLUSTER_DEPS) ## Measure admission latency and time to Running for BENCH_PODS (500) pods through Deployments, without and with modelgate's webhooks, then the replica storm (the policy library in force, a rollout restart, the decision cache off and on), then the backstop (the API server's admission latency with the generated ValidatingAdmissionPolicies bound against unbound, BENCH_BACKSTOP_ROUNDS rounds), in one run.
	$(GO) build -o $(LOCALBIN)/bench-e2e ./test/perf/benche2e
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(LOCALBIN)/bench-e2e --modelgate $(LOCALBIN)/modelgate --pods $${BENCH_PODS:-500} --rounds $${BENCH_ROUNDS:-2} --storm-rounds $${BENCH_STORM_ROUNDS:-$${BENCH_ROUNDS:-2}} \
		--backstop-rounds $${BENCH_BACKSTOP_ROUNDS:-$${BENCH_ROUNDS:-2}}

.PHONY: bench-loader
bench-loader: build ## Measure `modelgate load` (bin/modelgate) on a BENCH_LOADER_SIZE (2Gi) model against floors in the same run: from a fake Hub (until on disk, CPU s/GB, peak RSS, re-fetch per SIGKILL, cache hit) and from an S3 server in process (the same, at GOMAXPROCS 1 and 2); BENCH_LOADER_FLAGS, e.g. --baseline BIN (an earlier commit's loader, interleaved) --cpuprofile FILE.
	$(GO) run ./test/perf/benchloader --modelgate $(LOCALBIN)/modelgate --size $${BENCH_LOADER_SIZE:-2Gi} --rounds $${BENCH_ROUNDS:-3} $(BENCH_LOADER_FLAGS)

.PHONY: bench-node
bench-node: build $(ENVTEST_DEPS) $(CLUSTER_DEPS) $(REAL_NODE_DEPS) ## As root: time an injected vLLM Deployment (BENCH_NODE_SIZE, 1Gi, model) from create to Ready on the simulated cluster's real node, step by step, the loader in its container against the host in one run, and the kubelet's and containerd's memory.
	$(GO) build -o $(LOCALBIN)/bench-node ./test/perf/benchnode
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(LOCALBIN)/bench-node --modelgate $(LOCALBIN)/modelgate --size $${BENCH_NODE_SIZE:-1Gi} --rounds $${BENCH_ROUNDS:-3}

.PHONY: bench-http
bench-http: ## Measure modelgate's admission HTTP path (/mutate; /validate with the policy library) against a no-op TLS floor in one run, each server on one core and the load on another: rps, p50, p99 and the ratio to the floor (BENCH_HTTP_FLAGS, e.g. --duration 10s --profile DIR; docs/performance.md).
	$(GO) build -o $(LOCALBIN)/bench-http ./test/perf/benchhttp
	$(LOCALBIN)/bench-http --root . $(BENCH_HTTP_FLAGS)

.PHONY: soak
soak: build $(ENVTEST_DEPS) ## Soak bin/modelgate against a real kube-apiserver and etcd: SOAK_DURATION (10m) of mixed reviews at the highest rate one CPU sustains, a rolling restart of two replicas under API server traffic, and attacks replayed; prints the report (SOAK_OUT to keep it in a file).
	$(GO) build -o $(LOCALBIN)/soak ./test/perf/soak
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(LOCALBIN)/soak --modelgate $(LOCALBIN)/modelgate --duration $${SOAK_DURATION:-10m} \
		--phases $${SOAK_PHASES:-load,restart,attacks} $${SOAK_OUT:+--out $$SOAK_OUT}

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 30s).
	@for pkg in $$($(GO) list $(GO_PACKAGES)); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "== $$pkg $$f"; $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$${FUZZTIME:-30s} -fuzzminimizetime=2s $$pkg; \
		done; done

.PHONY: profile-policies
profile-policies: ## Profile the policy library rule by rule: each policy's time per evaluation on the typical injected Deployment, and its costliest expressions under OPA's profiler (docs/performance.md).
	$(GO) run ./test/perf/policyprofile --root . $(PROFILE_POLICIES_FLAGS)

.PHONY: bench
bench: ## Run the benchmarks with allocation counts.
	$(GO) test -run='^$$' -bench=. -benchmem $(GO_PACKAGES)

##@ Build

.PHONY: build
build: ## Build bin/modelgate.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(GO_LDFLAGS)" -o $(LOCALBIN)/modelgate ./cmd/modelgate

## The fake nodes `make run` registers: v1 Node documents (see the file).
NODES ?= config/dev/nodes.yaml

.PHONY: run
## PROMETHEUS=1 also runs Prometheus (built into bin/ once) with
## config/prometheus's objects and alerts, scraping modelgate.
RUN_PROMETHEUS_DEPS := $(if $(filter 1,$(PROMETHEUS)),$(PROMETHEUS_BIN) $(PROMTOOL) $(PROMETHEUS_OPERATOR))
RUN_PROMETHEUS_FLAG := $(if $(filter 1,$(PROMETHEUS)),--prometheus $(PROMETHEUS_BIN) --prometheus-operator $(PROMETHEUS_OPERATOR))
## INSTALL=helm installs modelgate as the README does instead of running
## bin/modelgate on the host: the chart, by the pinned helm, with
## cert-manager (both built into bin/ once), into Pods on the real node
## (as root).
INSTALL ?= host
RUN_HELM_DEPS := $(if $(filter helm,$(INSTALL)),$(HELM) $(CERT_MANAGER_DEPS))
RUN_HELM_FLAG := $(if $(filter helm,$(INSTALL)),--helm $(HELM) --cert-manager $(CERT_MANAGER_DIR))
run: build devcluster $(ENVTEST_DEPS) $(CLUSTER_DEPS) $(REAL_NODE_DEPS) kubectl $(RUN_PROMETHEUS_DEPS) $(RUN_HELM_DEPS) ## Start a simulated GPU cluster (fake nodes from NODES, default config/dev/nodes.yaml) with modelgate in it (Ctrl-C stops everything); PROMETHEUS=1 adds a Prometheus scraping it with config/prometheus's objects and alerts; INSTALL=helm installs modelgate with the chart and cert-manager into Pods on the real node (as root).
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" KUBECTL="$(KUBECTL)" exec $(LOCALBIN)/devcluster --modelgate $(LOCALBIN)/modelgate --nodes $(NODES) --install $(INSTALL) $(RUN_PROMETHEUS_FLAG) $(RUN_HELM_FLAG)

.PHONY: devcluster
devcluster: ## Build bin/devcluster, the program behind `make run`.
	$(GO) build -o $(LOCALBIN)/devcluster ./test/harnesses/devcluster

## The commit, for the images' org.opencontainers.image.revision label.
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
## go build's -ldflags, for make build (above) and both ways of building the image.
GO_LDFLAGS = -s -w -X main.version=$(VERSION)

## The image without a container engine: hack/imagebuild compiles
## modelgate for IMAGE_PLATFORMS and assembles each image FROM SCRATCH with
## the Dockerfile's layout (/modelgate, CA bundle, nonroot 65532, /tmp),
## reproducibly: every time is SOURCE_DATE_EPOCH, else the commit's. It
## writes IMAGE_DIR/oci, an OCI image layout of the whole index, and
## IMAGE_DIR/modelgate.tar, the host platform's image for `docker load` or
## `kind load image-archive`.
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
IMAGE_DIR ?= $(LOCALBIN)/image
IMAGEBUILD = $(GO) run ./hack/imagebuild/cmd/imagebuild --version="$(VERSION)" --revision="$(REVISION)" \
	--ldflags="$(GO_LDFLAGS)" --platforms="$(IMAGE_PLATFORMS)" --image="$(IMG)" \
	--oci-layout="$(IMAGE_DIR)/oci" --tarball="$(IMAGE_DIR)/modelgate.tar"

.PHONY: image
image: ## Build the image IMG for IMAGE_PLATFORMS without Docker into bin/image (OCI layout oci/, docker load tarball modelgate.tar); print its digest.
	$(IMAGEBUILD)

.PHONY: image-push
image-push: ## Build the image as make image does and push it to IMG, with docker login's credentials; print its digest.
	$(IMAGEBUILD) --push="$(IMG)"

.PHONY: docker-build
docker-build: ## Build the container image IMG with CONTAINER_TOOL and the Dockerfile.
	$(CONTAINER_TOOL) build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the container image IMG.
	$(CONTAINER_TOOL) push $(IMG)

.PHONY: build-installer
build-installer: manifests $(KUSTOMIZE) ## Write dist/install.yaml: DEPLOY_CONFIG (config/default) with image IMG, every manifest in one file.
	$(render-install)
	mkdir -p dist
	$(KUSTOMIZE) build $(DEPLOY_DIR) > dist/install.yaml

##@ Deployment

## The install deploy, undeploy and build-installer render, relative to the
## repository root: config/default (serving certificate from cert-manager,
## which must already run in the cluster) or config/self-managed
## (modelgate's own certificates), or an overlay of yours.
DEPLOY_CONFIG ?= config/default
## The Deployment's image (ghcr.io/modelgate/modelgate in config/manager) is
## set to IMG by a throwaway overlay in bin/deploy (kustomize takes no
## absolute path, hence ../../), so config/ is never edited. The model
## loader's image is the Configuration's injection.loader.image: pin it in
## config/manager/configuration.yaml.
DEPLOY_DIR := $(LOCALBIN)/deploy
define render-install
rm -rf $(DEPLOY_DIR) && mkdir -p $(DEPLOY_DIR)
cd $(DEPLOY_DIR) && $(KUSTOMIZE) create --resources ../../$(DEPLOY_CONFIG) && \
	$(KUSTOMIZE) edit set image ghcr.io/modelgate/modelgate=$(IMG)
endef

.PHONY: deploy
deploy: $(KUSTOMIZE) kubectl ## Install DEPLOY_CONFIG (default config/default, or config/self-managed) with image IMG in the current kubectl context.
	$(render-install)
	$(KUSTOMIZE) build $(DEPLOY_DIR) | $(KUBECTL) apply -f -

.PHONY: undeploy
undeploy: $(KUSTOMIZE) kubectl ## Delete what deploy installed, CRDs included: every AIInference and WorkloadPolicy goes with them.
	$(render-install)
	$(KUSTOMIZE) build $(DEPLOY_DIR) | $(KUBECTL) delete --ignore-not-found -f -

##@ Dependencies

.PHONY: envtest
envtest: $(ENVTEST_BUILT_DIR)/kube-apiserver $(ENVTEST_BUILT_DIR)/etcd ## Build kube-apiserver and etcd into bin/k8s/<version>.

$(ENVTEST_BUILT_DIR)/kube-apiserver: hack/envtest/go.mod hack/envtest/go.sum
	@echo "building kube-apiserver $(K8S_VERSION) from source (about 4 minutes on 2 cores, once)"
	cd hack/envtest && $(GO) build -o $@ k8s.io/kubernetes/cmd/kube-apiserver

$(ENVTEST_BUILT_DIR)/etcd: hack/envtest/go.mod hack/envtest/go.sum
	@echo "building etcd from source (about 30 seconds, once)"
	cd hack/envtest && $(GO) build -o $@ go.etcd.io/etcd/server/v3

.PHONY: cluster-tools
cluster-tools: $(CLUSTER_DEPS) $(NODE_DEPS) runc ## Build kube-scheduler, kube-controller-manager, kwok (with its stages) and the real node's kubelet, containerd and CNI plugins for the simulated cluster; install runc (as root).

$(ENVTEST_BUILT_DIR)/kubelet: hack/envtest/go.mod hack/envtest/go.sum
	@echo "building kubelet $(K8S_VERSION) from source (about 2 minutes on 2 cores, once)"
	cd hack/envtest && $(GO) build -ldflags "$(KUBELET_LDFLAGS)" -o $@ k8s.io/kubernetes/cmd/kubelet

$(NODE_DIR)/containerd: hack/node/go.mod hack/node/go.sum
	@echo "building containerd $(CONTAINERD_VERSION) from source (about 2 minutes on 2 cores, once)"
	cd hack/node && CGO_ENABLED=0 $(GO) build -tags $(CONTAINERD_TAGS) -ldflags "-X github.com/containerd/containerd/v2/version.Version=$(CONTAINERD_VERSION)" -o $@ github.com/containerd/containerd/v2/cmd/containerd

$(NODE_DIR)/containerd-shim-runc-v2: hack/node/go.mod hack/node/go.sum
	cd hack/node && CGO_ENABLED=0 $(GO) build -tags $(CONTAINERD_TAGS) -o $@ github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2

$(addprefix $(NODE_DIR)/cni/,$(notdir $(CNI_PLUGINS))): hack/node/go.mod hack/node/go.sum
	cd hack/node && CGO_ENABLED=0 $(GO) build -o $@ github.com/containernetworking/plugins/plugins/$(filter %/$(notdir $@),$(CNI_PLUGINS))

## runc is the one program of the real node that is not built here: Debian's
## package, installed when missing and root (the node needs root anyway).
.PHONY: runc
runc: ## Install runc from Debian's package when it is missing and make runs as root (the real node's runtime).
	@if command -v runc >/dev/null 2>&1 || test -x /usr/sbin/runc; then :; \
	elif [ "$$(id -u)" != 0 ]; then echo "runc is missing and make is not root: the simulated cluster runs kwok's nodes only"; \
	else echo "installing runc from Debian's package"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends runc >/dev/null; fi

## The node's images are rebuilt every time (the Go build cache makes an
## unchanged one quick): modelgate's must be this tree's.
IMAGEBUILD_NODE = $(GO) run ./hack/imagebuild/cmd/imagebuild --version="$(VERSION)" --revision="$(REVISION)" \
	--platforms="$(HOST_PLATFORM)"

.PHONY: node-images
node-images: ## Build the real node's images into bin/node/images: modelgate's (as make image, this platform only), pause and the stand-in engine (every program of internal/enginefacts/engines.yaml's images linked to it).
	$(IMAGEBUILD_NODE) --ldflags="$(GO_LDFLAGS)" --image=$(IMG) --oci-layout=$(NODE_IMAGES)/modelgate
	$(IMAGEBUILD_NODE) --package=./test/standins/pause --image=registry.k8s.io/pause:3.10 --oci-layout=$(NODE_IMAGES)/pause \
		--program='{"path": "/pause", "entrypoint": ["/pause"], "user": "65535:65535", "description": "pause (the simulated cluster'"'"'s sandbox)"}'
	$(IMAGEBUILD_NODE) --package=./test/standins/engine --image=modelgate/test-engine:latest --oci-layout=$(NODE_IMAGES)/engine \
		--program='{"path": "/usr/local/bin/engine", "links": ["/bin/sh", "/bin/bash", "/usr/bin/python3", "/usr/bin/python", "/usr/local/bin/vllm", "/usr/local/bin/text-generation-launcher", "/usr/local/bin/sglang", "/usr/local/bin/tritonserver", "/app/pd-sidecar", "/usr/local/bin/proxy"], "user": "65532:65532", "description": "the simulated cluster'"'"'s stand-in serving engine"}'

$(ENVTEST_BUILT_DIR)/kube-scheduler: hack/envtest/go.mod hack/envtest/go.sum
	@echo "building kube-scheduler $(K8S_VERSION) from source (about 1 minute on 2 cores, once)"
	cd hack/envtest && $(GO) build -o $@ k8s.io/kubernetes/cmd/kube-scheduler

$(ENVTEST_BUILT_DIR)/kube-controller-manager: hack/envtest/go.mod hack/envtest/go.sum
	@echo "building kube-controller-manager $(K8S_VERSION) from source (about 2 minutes on 2 cores, once)"
	cd hack/envtest && $(GO) build -o $@ k8s.io/kubernetes/cmd/kube-controller-manager

$(KWOK_DIR)/kwok: hack/kwok/go.mod hack/kwok/go.sum
	@echo "building kwok $(KWOK_VERSION) from source (about 2 minutes on 2 cores, once)"
	cd hack/kwok && $(GO) build -o $@ sigs.k8s.io/kwok/cmd/kwok

$(KWOK_DIR)/stages.yaml: hack/kwok/go.mod hack/kwok/go.sum
	@mkdir -p $(KWOK_DIR)
	cd hack/kwok && $(GO) mod download sigs.k8s.io/kwok
	@dir=$$(cd hack/kwok && $(GO) list -m -f '{{.Dir}}' sigs.k8s.io/kwok); \
	{ echo "# kwok $(KWOK_VERSION)'s stages, collected by the Makefile from $$dir/kustomize/stage."; \
	  for f in $(KWOK_STAGES); do echo "---"; cat "$$dir/kustomize/stage/$$f"; done; } > $@.tmp && mv $@.tmp $@

.PHONY: cert-manager
cert-manager: $(CERT_MANAGER_DEPS) ## Build cert-manager's controllers and cainjector (test/certmanager) and collect its CRDs into bin/cert-manager/<version>.

$(CERT_MANAGER_DIR)/certmanager: test/certmanager/go.mod test/certmanager/go.sum $(wildcard test/certmanager/*.go)
	@echo "building cert-manager $(CERT_MANAGER_VERSION)'s controllers from its module (about 8 minutes on 2 cores with an empty Go build cache, once)"
	cd test/certmanager && CGO_ENABLED=0 $(GO) build -o $@ .

$(CERT_MANAGER_DIR)/crds: test/certmanager/go.mod test/certmanager/go.sum
	cd test/certmanager && $(GO) mod download github.com/cert-manager/cert-manager
	@got=$$(cd test/certmanager && $(GO) list -m -f '{{.Version}}' github.com/cert-manager/cert-manager); \
	test "$$got" = "$(CERT_MANAGER_VERSION)" || { echo "test/certmanager/go.mod requires cert-manager $$got, CERT_MANAGER_VERSION is $(CERT_MANAGER_VERSION): keep them equal"; exit 1; }
	@dir=$$(cd test/certmanager && $(GO) list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager); \
	rm -rf $@.tmp && mkdir -p $@.tmp && cp $$dir/deploy/crds/*.yaml $@.tmp/ && chmod u+w $@.tmp/*.yaml && rm -rf $@ && mv $@.tmp $@

.PHONY: kubectl
kubectl: $(KUBECTL) ## Make sure a kubectl is available (built from source when none is on PATH).

$(ENVTEST_BUILT_DIR)/kubectl: hack/envtest/go.mod hack/envtest/go.sum
	@echo "no kubectl on PATH: building kubectl $(K8S_VERSION) from source (about 1 minute, once)"
	cd hack/envtest && $(GO) build -o $@ k8s.io/kubernetes/cmd/kubectl

$(CONTROLLER_GEN):
	GOBIN=$(LOCALBIN)/.tmp $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(LOCALBIN)/.tmp/controller-gen $@

$(EASYJSON):
	$(GO) build -o $@ github.com/mailru/easyjson/easyjson

$(KUSTOMIZE):
	GOBIN=$(LOCALBIN)/.tmp $(GO) install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	mv $(LOCALBIN)/.tmp/kustomize $@

$(GOLANGCI_LINT):
	GOBIN=$(LOCALBIN)/.tmp $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(LOCALBIN)/.tmp/golangci-lint $@

$(HELM):
	GOBIN=$(LOCALBIN)/.tmp $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(LOCALBIN)/.tmp/helm $@

## Both from one go install: they share most of their packages. Of the
## service discoveries, only Kubernetes' is compiled in (Prometheus's
## plugin build tags): the others' cloud SDKs double the build time.
$(PROMETHEUS_BIN) $(PROMTOOL) &:
	GOBIN=$(LOCALBIN)/.tmp $(GO) install -tags remove_all_sd,enable_kubernetes_sd github.com/prometheus/prometheus/cmd/prometheus@$(PROMETHEUS_VERSION) github.com/prometheus/prometheus/cmd/promtool@$(PROMETHEUS_VERSION)
	mv $(LOCALBIN)/.tmp/prometheus $(PROMETHEUS_BIN)
	mv $(LOCALBIN)/.tmp/promtool $(PROMTOOL)

## The Operator's go.mod has replace directives (go install @version refuses
## it): built in hack/prometheus-operator, with its version stamped as its
## release build does (its config-reloader image tag is derived from it).
$(PROMETHEUS_OPERATOR): hack/prometheus-operator/go.mod hack/prometheus-operator/go.sum
	@echo "building the Prometheus Operator $(PROMETHEUS_OPERATOR_VERSION) from source (9 CPU-minutes with an empty Go build cache, once)"
	cd hack/prometheus-operator && CGO_ENABLED=0 $(GO) build -ldflags "-X github.com/prometheus/common/version.Version=$(PROMETHEUS_OPERATOR_VERSION:v%=%)" -o $@ github.com/prometheus-operator/prometheus-operator/cmd/operator

.PHONY: clean
clean: ## Remove build outputs (keeps the built tools and control plane).
	rm -rf dist $(LOCALBIN)/modelgate $(LOCALBIN)/dev
