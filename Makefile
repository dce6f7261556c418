# codeport — build, generate, test.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

BIN_DIR        := $(CURDIR)/bin
CONTROLLER_GEN := $(BIN_DIR)/controller-gen
GOLANGCI_LINT  := $(BIN_DIR)/golangci-lint
HELM           := $(BIN_DIR)/helm

CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION    ?= v2.15.0
HELM_VERSION             ?= v3.22.0

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

# Test servers: hack/testenv.sh finds or starts PostgreSQL and Redis and prints their URLs.
GO_TEST_FLAGS ?= -race -count=1 -timeout=30m

.PHONY: all
all: build

##@ Build
.PHONY: build
build: ## Build bin/codeport.
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN_DIR)/codeport .

.PHONY: run
run: ## Run the whole data plane locally (embedded PostgreSQL, config/samples).
	go run . dev --manifests config/samples

##@ Generate
.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC into config/.
	$(CONTROLLER_GEN) rbac:roleName=codeport-operator crd:allowDangerousTypes=false paths="./api/...;./controllers/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

.PHONY: verify-generated
verify-generated: generate manifests ## Fail when generated files are out of date.
	@if [ -n "$$(git status --porcelain -- api config charts)" ]; then \
		echo "generated files are out of date; run 'make manifests generate' and commit:"; \
		git status --porcelain -- api config charts; git --no-pager diff -- api config charts | head -50; exit 1; fi

##@ Quality
.PHONY: fmt
fmt:
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet:
	go vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) ## golangci-lint (pinned, installed into ./bin).
	$(GOLANGCI_LINT) run ./...

##@ Test
.PHONY: test
test: verify-generated vet lint test-go ## Everything CI checks.

.PHONY: test-go
test-go: ## go test -race ./... against real kube-apiserver/etcd, PostgreSQL and Redis.
	@assets="$$(hack/envtest.sh)"; \
	eval "$$(hack/testenv.sh)"; \
	export KUBEBUILDER_ASSETS="$$assets"; \
	go test $(GO_TEST_FLAGS) ./...

##@ Tools
$(CONTROLLER_GEN):
	GOBIN=$(BIN_DIR) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)

$(GOLANGCI_LINT):
	GOBIN=$(BIN_DIR) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

$(HELM):
	GOBIN=$(BIN_DIR) go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

.PHONY: help
help:
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ { printf "  %-18s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
