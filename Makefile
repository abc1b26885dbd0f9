# Virtstation. `make demo` runs the product on a local control plane;
# `make test` runs every test. Both build what they need on a fresh machine.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go
BIN := $(CURDIR)/bin
CONTROLLER_GEN := $(BIN)/controller-gen
CERT_MANAGER_VERSION := v1.21.2
# KYVERNO_VERSION: the module whose config/crds holds the wgpolicyk8s.io PolicyReport CRD.
KYVERNO_VERSION := v1.19.1
# Test packages run one at a time by default: each envtest package starts its
# own kube-apiserver and etcd, and the machines have 2 cores.
TEST_FLAGS ?= -count=1 -p 1 -timeout 15m

export CERT_MANAGER_VERSION
export KYVERNO_VERSION

.PHONY: all build images docker-build docker-push bench cross test test-deps demo-deps demo-test ui ui-test chart-lint policy-test unit envtest-bins kubecli-peer kubevirt-admission guest-image manifests crds generate verify-generated verify-ui lint fmt check-format vet demo fuzz property clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

## images: print the image references docker-build builds and the chart
## and config/ pull by default: $(REGISTRY)/virtstation-<component>:$(VERSION).
## REGISTRY and VERSION are the chart's image.registry and image.tag.
REGISTRY ?= ghcr.io/virtstation
# VERSION defaults to the chart's appVersion, the tag it pulls by default.
VERSION ?= $(shell sed -n 's/^appVersion: *"*\([^"]*\)"*$$/\1/p' charts/virtstation/Chart.yaml)
# IMAGES: the components, each built from Dockerfile.<component>.
IMAGES := webhook bridge
image-ref = $(REGISTRY)/virtstation-$(1):$(VERSION)

images:
	@$(foreach c,$(IMAGES),echo $(call image-ref,$(c));)

## docker-build: build both images from Dockerfile.webhook and Dockerfile.bridge.
docker-build:
	$(foreach c,$(IMAGES),docker build -f Dockerfile.$(c) -t $(call image-ref,$(c)) .;)

## docker-push: push both images.
docker-push:
	$(foreach c,$(IMAGES),docker push $(call image-ref,$(c));)

OPA := $(BIN)/opa
HELM := $(BIN)/helm

$(HELM): hack/tools/go.mod hack/tools/go.sum hack/build-helm.sh
	hack/build-helm.sh $@

## chart-lint: helm lint --strict and helm template, with and without
## cert-manager, with policy reports off and with openreports.io Reports on.
chart-lint: $(HELM)
	$(HELM) lint --strict charts/virtstation
	$(HELM) lint --strict charts/virtstation --set certManager.enabled=false
	$(HELM) template virtstation charts/virtstation -n virtstation-system >/dev/null
	$(HELM) template virtstation charts/virtstation -n virtstation-system --set certManager.enabled=false >/dev/null
	$(HELM) template virtstation charts/virtstation -n virtstation-system --set audit.policyReports.enabled=false >/dev/null
	$(HELM) template virtstation charts/virtstation -n virtstation-system --set audit.openReports.enabled=true >/dev/null

$(OPA): hack/tools/go.mod hack/tools/go.sum
	$(GO) build -modfile=hack/tools/go.mod -o $@ github.com/open-policy-agent/opa

## policy-test: the shipped Rego policies' own tests, with the opa CLI.
policy-test: $(OPA)
	$(OPA) test policies/

$(CONTROLLER_GEN): hack/tools/go.mod hack/tools/go.sum
	$(GO) build -modfile=hack/tools/go.mod -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

## envtest-bins: build kube-apiserver and etcd into the per-machine cache (once).
envtest-bins:
	@hack/envtest-bins.sh >/dev/null

## kubevirt-admission: build test/kvadmission (KubeVirt v1.9.0's own VM and
## VMI admission code) once per machine into the cache. Every envtest API
## server registers it as a validating webhook; tests reach it through
## $KUBEVIRT_ADMISSION.
kubevirt-admission:
	@hack/kubevirt-admission.sh >/dev/null

## guest-image: build the Debian guest (debootstrap from the machine's
## Debian mirror, about 3 minutes, about 850 MB) once per machine into the
## cache; test/guest and `make demo` boot it from $VIRTSTATION_GUEST_IMAGE.
guest-image: test-deps
	@hack/guest-image.sh >/dev/null

## kubecli-peer: build test/kubecli (KubeVirt's kubecli, as virtctl calls it,
## in a module of its own) into the per-machine cache (once per source hash).
## The bridge tests run it from $KUBECLI_PEER.
kubecli-peer:
	@hack/kubecli-peer.sh >/dev/null

## manifests: webhook configurations from the +kubebuilder:webhook markers.
manifests: $(CONTROLLER_GEN)
	$(CONTROLLER_GEN) webhook paths="./webhooks/...;./claims/..." output:webhook:artifacts:config=config/webhook

## crds: KubeVirt, CDI and cert-manager CRDs for the envtest control plane.
crds: $(CONTROLLER_GEN)
	CONTROLLER_GEN=$(CONTROLLER_GEN) hack/gen-crds.sh internal/testenv/crds

generate: manifests crds

## verify-generated: fail when regenerating manifests, CRDs or the browser
## client gives a diff.
verify-generated: $(CONTROLLER_GEN) verify-ui
	hack/verify-generated.sh

## verify-ui: fail when `make ui` would change the committed bridge/ui/dist
## (it builds into a scratch copy; the tree stays as it is).
verify-ui:
	hack/verify-ui.sh

## test-deps: the Debian packages the tests use for real (cloud-init, fdisk,
## qemu-system-x86, openssh-server, chromium, websockify, nginx) and the
## browser test's npm packages (playwright-core).
test-deps:
	@hack/install-test-deps.sh

## test: unit tests, envtest integration tests, and generated-file drift.
test: test-deps envtest-bins kubecli-peer kubevirt-admission guest-image verify-generated lint policy-test ui-test chart-lint
	KUBEBUILDER_ASSETS="$$(hack/envtest-bins.sh)" KUBECLI_PEER="$$(hack/kubecli-peer.sh)" KUBEVIRT_ADMISSION="$$(hack/kubevirt-admission.sh)" VIRTSTATION_GUEST_IMAGE="$$(hack/guest-image.sh)" VIRTSTATION_DEMO_TEST_GUESTS=echo $(GO) test $(TEST_FLAGS) ./...

## demo-test: `make demo` as a newcomer runs it, with the Debian guest (about
## 2 minutes; make test runs the demo with the echo guest and boots the
## Debian guest in test/guest). CI runs it after make test.
demo-test: test-deps envtest-bins kubecli-peer kubevirt-admission guest-image
	KUBEBUILDER_ASSETS="$$(hack/envtest-bins.sh)" KUBECLI_PEER="$$(hack/kubecli-peer.sh)" KUBEVIRT_ADMISSION="$$(hack/kubevirt-admission.sh)" VIRTSTATION_GUEST_IMAGE="$$(hack/guest-image.sh)" VIRTSTATION_DEMO_TEST_GUESTS=debian $(GO) test $(TEST_FLAGS) ./cmd/virtstation-demo -run '^TestDemo$$'

## ui: rebuild the browser client (bridge/ui/dist) from web/ with npm. The
## built files are committed, so `go build` never needs npm; verify-ui (part
## of make test) fails when they differ from what this target builds.
ui:
	cd web && npm ci --no-audit --no-fund --loglevel=error && npm run build

## ui-test: the browser client's own unit tests (node only, no install).
ui-test:
	cd web && npm test

## unit: the package tests, without the integration suites in test/ (the
## bridge packages start a bare control plane for their API tests).
unit:
	$(GO) test -count=1 $$($(GO) list ./... | grep -v -e /test/)

## bench: benchmarks with their peers, side by side (see docs/benchmarks.md).
bench: envtest-bins test-deps
	$(GO) test ./webhooks/validate -run '^$$' -bench BenchmarkEvaluateVsCEL -benchmem -count 5
	$(GO) test ./test/bench/admission -run '^$$' -bench BenchmarkAdmissionStages -benchmem -count 5
	$(GO) test ./webhooks/mutate -run '^$$' -bench BenchmarkMutatingWebhookLimits -benchmem -count 5
	$(GO) test ./webhooks/mutate -run '^$$' -bench BenchmarkMutateShortcuts -benchmem -count 5
	$(GO) test ./cmd/virtstation -run '^$$' -bench BenchmarkRenderScaling -benchtime 1x -count 3
	$(GO) test ./test/bench/admission -run '^$$' -bench BenchmarkWebhookCalls -benchmem -benchtime 1000x -count 5
	$(GO) test ./test/bench/admission -run '^$$' -bench BenchmarkAdmissionPeakHeap -benchtime 5x -count 3
	KUBEBUILDER_ASSETS="$$(hack/envtest-bins.sh)" $(GO) test ./test/bench/lifecycle -run '^$$' -bench BenchmarkLifecycleScale -benchtime 1x -timeout 30m
	KUBEBUILDER_ASSETS="$$(hack/envtest-bins.sh)" $(GO) test ./test/bench/admission -run '^$$' -bench '^BenchmarkAdmission$$' -benchtime 1x
	KUBEBUILDER_ASSETS="$$(hack/envtest-bins.sh)" KUBEVIRT_ADMISSION="$$(hack/kubevirt-admission.sh)" $(GO) test ./test/bench/audit -run '^$$' -bench BenchmarkPolicyAudit -benchtime 1x -timeout 30m
	$(GO) test ./test/bench/admission -run '^$$' -bench BenchmarkWebhookServer -benchtime 1x -rates 100,200,300,400,600,800,1000
	$(GO) test ./bridge/vnc -run '^$$' -bench BenchmarkAdaptiveVNC -count 3
	$(GO) test ./test/bench/relay -run '^$$' -bench BenchmarkVNCRelay -benchtime 1x
	KUBEBUILDER_ASSETS="$$(hack/envtest-bins.sh)" $(GO) test ./test/bench/idle -run '^$$' -bench BenchmarkIdleSessions -benchtime 1x -sessions 2000 -websockify-sessions 100 -settle 10s
	KUBEBUILDER_ASSETS="$$(hack/envtest-bins.sh)" $(GO) test ./test/bench/idle -run '^$$' -bench BenchmarkIdleSessions -benchtime 1x -sessions 2000 -websockify-sessions 10 -settle 10s -client-tls

## property: the property test (test/property) at the issue's count of
## PROPERTY_VMS generated VMs; make test runs it at 200. See docs/property-test.md.
PROPERTY_VMS ?= 2000
PROPERTY_SEED ?= 16
property:
	KUBEVIRT_ADMISSION="$$(hack/kubevirt-admission.sh)" $(GO) test -count=1 -timeout 30m ./test/property -run '^TestProperty$$' -v -args -vms $(PROPERTY_VMS) -seed $(PROPERTY_SEED)

## fuzz: run every fuzz target for FUZZTIME each.
FUZZTIME ?= 20s
fuzz:
	$(GO) test ./mac -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./api -run '^$$' -fuzz FuzzParseMACAnnotation -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./webhooks/mutate -run '^$$' -fuzz FuzzMutate -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./webhooks/mutate -run '^$$' -fuzz FuzzGPUCount -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./api -run '^$$' -fuzz FuzzParseDataDisks -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./api -run '^$$' -fuzz FuzzParseGPUs -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./cloudinit -run '^$$' -fuzz FuzzMerge -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./cloudinit -run '^$$' -fuzz FuzzSplit -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./internal/virtlauncher -run '^$$' -fuzz FuzzAuthorizedKeys -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./cloudinit -run '^$$' -fuzz FuzzCheckCloudConfig -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./sshkeys -run '^$$' -fuzz FuzzCollect -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./claims -run '^$$' -fuzz FuzzRead -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./webhooks/validate -run '^$$' -fuzz FuzzBuildInput -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./webhooks -run '^$$' -fuzz FuzzCheckAdmissionReview -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./webhooks/validate -run '^$$' -fuzz FuzzParseSample -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./webhooks/validate -run '^$$' -fuzz FuzzParseVolumeDisks -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./bridge/auth -run '^$$' -fuzz FuzzTokenFrom -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./bridge/auth -run '^$$' -fuzz FuzzOriginPolicy -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./bridge -run '^$$' -fuzz FuzzInvalidName -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./bridge -run '^$$' -fuzz FuzzTakeOverAsked -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./bridge/session -run '^$$' -fuzz FuzzParseHolder -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./bridge/session -run '^$$' -fuzz FuzzLeaseName -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./bridge/sshbridge -run '^$$' -fuzz FuzzParseHello -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./bridge/sshbridge -run '^$$' -fuzz FuzzParseControl -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./internal/virthandler -run '^$$' -fuzz FuzzDecodeRestartOptions -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./internal/qemu -run '^$$' -fuzz FuzzQMPExecute -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./rfb -run '^$$' -fuzz FuzzClientParser -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./rfb -run '^$$' -fuzz FuzzServerHandshake -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./rfb -run '^$$' -fuzz FuzzServerTracker -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./certs -run '^$$' -fuzz FuzzParseMaterial -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./bridge/vnc -run '^$$' -fuzz FuzzRewrite -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	KUBEVIRT_ADMISSION="$$(hack/kubevirt-admission.sh)" $(GO) test ./test/property -run '^$$' -fuzz FuzzProperty -fuzztime $(FUZZTIME) -fuzzminimizetime 5s

check-format:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

fmt:
	gofmt -w $$(git ls-files '*.go')

# test/kubecli and test/kvadmission are modules of their own, which ./... of
# this one skips; they are vetted with the flags their hack/ scripts build
# them with, to share the build cache.
vet:
	$(GO) vet ./...
	cd test/kubecli && GOWORK=off CGO_ENABLED=0 GOFLAGS=-trimpath $(GO) vet ./...
	cd test/kvadmission && GOWORK=off CGO_ENABLED=0 GOFLAGS=-trimpath $(GO) vet ./...

## lint: gofmt, go vet, and golangci-lint when it installs from the module proxy.
GOLANGCI_LINT_VERSION := v2.15.0
# golangci-lint is built once per machine, outside the clone, keyed by version.
GOLANGCI_LINT := $(HOME)/.cache/virtstation/tools/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint
$(GOLANGCI_LINT):
	GOBIN=$(dir $(GOLANGCI_LINT)) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

lint: vet check-format $(GOLANGCI_LINT)
	@$(GOLANGCI_LINT) run ./...

## cross: the virtstation CLI builds for every platform its users run it on (CI
## runs it after make test: a first build per platform takes minutes).
CROSS_PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64
cross:
	@for p in $(CROSS_PLATFORMS); do \
	  echo "go build ./cmd/virtstation for $$p"; \
	  GOOS=$${p%/*} GOARCH=$${p#*/} CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/virtstation || exit 1; \
	done

## demo: a local control plane with the webhooks and KubeVirt's admission; applies
## examples/, prints the admitted VMs and boots dev-alice's Debian guest behind
## the bridge (DEMO_GUEST=echo: the 512-byte echo guest instead).
## A first run builds each cache in turn; every step prints how long it
## takes and took.
demo: demo-deps envtest-bins kubevirt-admission
	@echo "demo: building the demo (a first build takes a few minutes)" >&2
	$(GO) build -o $(BIN)/virtstation-demo ./cmd/virtstation-demo
	KUBEBUILDER_ASSETS="$$(hack/envtest-bins.sh)" KUBEVIRT_ADMISSION="$$(hack/kubevirt-admission.sh)" \
	  VIRTSTATION_GUEST_IMAGE="$$(if [ "$${DEMO_GUEST:-}" != echo ]; then hack/guest-image.sh; fi)" \
	  $(BIN)/virtstation-demo -f examples/

## demo-deps: the Debian packages the demo's guest needs when missing: QEMU,
## debootstrap and e2fsprogs (the guest image), xorriso (its NoCloud ISO).
demo-deps:
	@hack/install-test-deps.sh --demo

clean:
	rm -rf $(BIN)
