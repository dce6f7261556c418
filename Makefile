# codeport — build, generate, test.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

BIN_DIR        := $(CURDIR)/bin
CONTROLLER_GEN := $(BIN_DIR)/controller-gen
GOLANGCI_LINT  := $(BIN_DIR)/golangci-lint
GOVULNCHECK    := $(BIN_DIR)/govulncheck
HELM_DOCS      := $(BIN_DIR)/helm-docs
DEADCODE       := $(BIN_DIR)/deadcode
VULNDB_INDEXDB := $(BIN_DIR)/vulndb-indexdb
PROMTOOL       := $(BIN_DIR)/promtool
PROMRULES      := $(BIN_DIR)/promrules

CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION    ?= v2.15.0
HELM_VERSION             ?= v3.22.0
GOVULNCHECK_VERSION      ?= v1.9.0
# golang.org/x/tools' deadcode: the functions no main package of the module reaches.
DEADCODE_VERSION         ?= v0.52.0
HELM_DOCS_VERSION        ?= v1.14.2
# promtool checks and unit-tests the chart's alerts; hack/promrules/go.mod requires the same
# Prometheus release for its parser.
PROMETHEUS_VERSION       ?= v0.316.0
# The tool that lays the vulnerability reports out for govulncheck; the reports themselves are
# the newest golang.org/x/vulndb (hack/vulndb.sh).
VULNDB_TOOLS_VERSION     ?= v0.0.0-20261105234957-e22db6528018
# A called vulnerability of the standard library is fixed by a Go release, which reaches the
# machines (GOTOOLCHAIN=local) and the image's base on their own schedule: warn, or fail.
VULNCHECK_STDLIB         ?= warn
# The generator of the partners' Go client (client/), run at this version with `go run pkg@version`,
# which keeps it and its dependencies out of go.mod: the client needs only its runtime.
OAPI_CODEGEN_VERSION     ?= v2.8.2

# The chart renders its CRDs from templates (so that helm upgrade updates them), generated from
# controller-gen's output in config/crd/bases by `make helm`.
CHART_CRDS := charts/codeport/templates/crds

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

# The build tags make lint sets, all in one golangci-lint run: a file behind a tag is linted only
# when the tag is set (faults: apiserver's fault tests; soak: hack/soak; e2e: hack/e2e; upgrade:
# hack/upgrade). One run with every tag covers every file because no file is behind a negated tag
# (//go:build !soak would need a run of its own); after an edit it takes a quarter of the time of
# one run per tag, which re-analysed the packages the edit touched once per run.
LINT_BUILD_TAGS ?= faults soak e2e upgrade
empty :=
comma := ,
LINT_TAG_LIST = $(subst $(empty) $(empty),$(comma),$(strip $(LINT_BUILD_TAGS)))

# Test servers: hack/testenv.sh finds or starts PostgreSQL and Redis and prints their URLs.
# go test runs one package more at once (-p) than there are CPUs: the packages wait on servers,
# child processes and polls for a fifth of their time, which a third package fills; -parallel
# stays at the CPU count. -vet=off: make test runs the whole of go vet before the tests.
TEST_PACKAGES_AT_ONCE ?= $(shell echo $$(( $$(nproc) + 1 )))
GO_TEST_FLAGS ?= -race -count=1 -timeout=30m -vet=off -p $(TEST_PACKAGES_AT_ONCE)
# The longest packages start first, so that the short ones fill the CPUs around them instead of
# leaving one package to run alone at the end; go test keeps the order it is given.
TEST_PACKAGES_FIRST := ./controllers ./apiserver . ./hack/fresh ./internal/devenv ./internal/catalog \
	./internal/store ./hack/drill ./internal/archtest
# The chart's tests run without the race detector, beside the others: no codeport code runs in
# their binary (it renders the chart and drives helm and kube-apiserver, processes of their own),
# so the detector would watch only client libraries and the tests, for a fifth of the package's
# CPU. Every package that runs codeport's code in process keeps it.
TEST_PACKAGES_WITHOUT_RACE := ./charts
# A race-enabled binary sleeps a second before it exits (GORACE's atexit_sleep_ms) to catch a
# race in goroutines still running: a test binary has stopped its goroutines by then, and the
# second, once per package, is a tenth of the run.
export GORACE ?= atexit_sleep_ms=0
# The test binaries (race-enabled above all) and the processes they start spent a quarter of the
# CPU of make test collecting garbage at Go's default GOGC=100; at 400 they trade some hundreds
# of megabytes each for it. No test depends on it: the one that weighs memory reads allocation
# totals after runtime.GC(). Set for the tests and the fuzz pass only: make run, the benchmarks
# and the soak's latency bounds keep Go's default.
TEST_GOGC ?= 400

.PHONY: all
all: build

##@ Build
# A first build prints Go's "downloading" lines and then nothing for minutes while it compiles:
# it says so before it starts, so that the silence is not taken for a hang (make run, above all).
FIRST_BUILD_NOTICE := building bin/codeport for the first time: Go downloads about 450 MB of \
modules, then compiles them without a word (Kubernetes' client libraries are most of it): about \
12 CPU-minutes, so 7 to 12 minutes on 2 CPUs, as busy as the machine is. Later builds take seconds.

.PHONY: build
build: ## Build bin/codeport.
	@[ -x $(BIN_DIR)/codeport ] || echo "$(FIRST_BUILD_NOTICE)" >&2
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN_DIR)/codeport .

# kubectl finds a plugin by its name on PATH: kubectl-codeport becomes `kubectl codeport`.
.PHONY: plugin
plugin: ## Build bin/kubectl-codeport, the kubectl plugin (docs/kubectl-plugin.md).
	CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o $(BIN_DIR)/kubectl-codeport ./cmd/kubectl-codeport
	@echo 'put it on PATH: export PATH="$(BIN_DIR):$$PATH"; then run: kubectl codeport status'

# The binary is built, then run, rather than `go run`: go run exits 1 once interrupted, whatever
# its program does, so Ctrl-C would end every run in make's error line. DEV_FLAGS adds flags of
# codeport dev (e.g. --production-addr 127.0.0.1:0).
DEV_FLAGS ?=

.PHONY: run
run: build ## Run the whole data plane locally (embedded PostgreSQL, config/samples); Ctrl-C stops it.
	exec $(BIN_DIR)/codeport dev --manifests config/samples $(DEV_FLAGS)

##@ Generate
.PHONY: generate
generate: $(CONTROLLER_GEN) clients ## Generate deepcopy code, the currency types (from internal/money's list) and the clients.
	go run ./hack/currencies
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

# The partners' clients, generated from the v2 OpenAPI document (docs/clients.md): Go with
# oapi-codegen, TypeScript's types with openapi-typescript, which client/typescript/package-lock.json
# pins with openapi-fetch and tsc (installed as make openapi-lint installs Spectral).
TS_CLIENT := client/typescript

.PHONY: clients
clients: ## Generate the partners' Go (client/) and TypeScript (client/typescript/) clients.
	cd client && go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@$(OAPI_CODEGEN_VERSION) \
		-config oapi-codegen.yaml ../apiserver/openapi/v2.json
	cd $(TS_CLIENT) && { [ -x node_modules/.bin/openapi-typescript ] && npm ls --silent >/dev/null 2>&1 || npm ci --no-audit --no-fund --ignore-scripts; }
	cd $(TS_CLIENT) && npm run --silent generate

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC into config/.
	$(CONTROLLER_GEN) rbac:roleName=codeport-operator crd:allowDangerousTypes=false paths="./api/...;./controllers/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

.PHONY: helm
helm: manifests ## Sync the chart's CRD templates and operator RBAC rules from config/.
	rm -rf charts/codeport/crds
	rm -f $(CHART_CRDS)/*.yaml
	mkdir -p $(CHART_CRDS)
	for f in config/crd/bases/*.yaml; do \
	  name=$$(sed -n 's/^  name: //p' "$$f" | head -n 1); \
	  gen=$$(sed -n 's/^    controller-gen.kubebuilder.io\/version: //p' "$$f" | head -n 1); \
	  { sed -e "s|CRD_FILE|$$(basename "$$f")|" -e "s|CRD_NAME|$$name|" -e "s|CRD_GEN_VERSION|$$gen|" hack/helm-crd-header.yaml; \
	    sed -n '/^spec:/,$$p' "$$f"; echo '{{- end }}'; } > $(CHART_CRDS)/$$(basename "$$f"); \
	done
	{ echo "# Generated by 'make helm' from config/rbac/role.yaml; do not edit."; \
	  sed -n '/^rules:/,$$p' config/rbac/role.yaml | tail -n +2; } > charts/codeport/files/operator-rules.yaml

# The chart's README: README.md.gotmpl for the prose, the `# --` comments of values.yaml for the
# table of values.
CHART_DIR := charts/codeport

.PHONY: chart-docs
chart-docs: $(HELM_DOCS) ## Generate the chart's README.md from README.md.gotmpl and values.yaml.
	$(HELM_DOCS) --chart-search-root $(CHART_DIR) --sort-values-order file --skip-version-footer

.PHONY: verify-chart-docs
verify-chart-docs: chart-docs ## Fail when the chart's README.md is out of date.
	@if [ -n "$$(git status --porcelain -- $(CHART_DIR)/README.md)" ]; then \
		echo "$(CHART_DIR)/README.md is out of date; run 'make chart-docs' and commit:"; \
		git --no-pager diff -- $(CHART_DIR)/README.md | head -50; exit 1; fi

.PHONY: verify-generated
verify-generated: generate manifests helm ## Fail when generated files are out of date.
	@if [ -n "$$(git status --porcelain -- api config charts client)" ]; then \
		echo "generated files are out of date; run 'make manifests generate' and commit:"; \
		git status --porcelain -- api config charts client; git --no-pager diff -- api config charts client | head -50; exit 1; fi

# The flag tables of docs/configuration.md are generated from the commands' flags; the root
# package's test fails when they differ.
.PHONY: docs
docs: ## Regenerate the flag tables of docs/configuration.md from the commands.
	go test -count=1 -run '^TestConfigurationDocListsEveryFlag$$' . -args -update-docs

##@ Quality
.PHONY: fmt
fmt:
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet:
	go vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) commits deadcode ## golangci-lint (pinned, installed into ./bin), with every build tag; commit messages; dead code.
	$(GOLANGCI_LINT) run --build-tags "$(LINT_TAG_LIST)" ./...

# A function that no main package reaches, with every build tag, is deleted, or moves into its
# package's export_test.go when only its own tests use it; hack/deadcode-exceptions.txt lists the
# rest (test-support packages, the client library, helpers several packages' tests share).
.PHONY: deadcode
deadcode: $(DEADCODE) ## Fail when a function of the module is unreachable from every main package.
	@out="$$($(DEADCODE) -tags "$(LINT_TAG_LIST)" ./... | { grep -vEf <(grep -vE '^(#|$$)' hack/deadcode-exceptions.txt) || true; })"; \
	if [ -n "$$out" ]; then echo "$$out"; \
	  echo "unreachable from every main package: delete it, move it into a _test.go file, or list it in hack/deadcode-exceptions.txt with why"; exit 1; fi

# The messages of the commits not yet on the remote's default branch (only HEAD's without a
# remote; COMMITS_BASE=rev to compare with another base): hack/commits.sh says the rules.
.PHONY: commits
commits: ## Check the subjects and layout of the commits a change adds.
	@hack/commits.sh

.PHONY: tidy
tidy: ## Fail when go mod tidy would change go.mod or go.sum.
	@go mod tidy -diff || { echo "go.mod or go.sum is not tidy: run 'go mod tidy' and commit"; exit 1; }

# Every shell script in the repository, including the CI entry point, which has no .sh suffix.
SHELL_SCRIPTS = $$(git ls-files '*.sh' .ci/run)

.PHONY: shellcheck
shellcheck: deps ## shellcheck every shell script (installed by hack/deps.sh).
	shellcheck $(SHELL_SCRIPTS)

# The vulnerability database's own site is out of reach of the machines and CI; the module proxy
# is not, and serves the reports as golang.org/x/vulndb: hack/vulndb.sh builds the database from
# it once per new version, and keeps it for when the proxy is out of reach too. hack/vulncheck.sh
# reuses the scan of an identical tree, toolchain and database.
.PHONY: vulncheck
vulncheck: $(GOVULNCHECK) $(VULNDB_INDEXDB) ## govulncheck (pinned) against the newest vulnerability reports.
	@GOVULNCHECK=$(GOVULNCHECK) INDEXDB=$(VULNDB_INDEXDB) STDLIB=$(VULNCHECK_STDLIB) hack/vulncheck.sh

# The API reference page (/docs) is Scalar's renderer, embedded in the binary: verify checks the
# embedded bundle against the digest in apiserver/openapi/ui/scalar.lock (no network); update
# fetches SCALAR_VERSION (default: the locked one) from npm and rewrites both.
.PHONY: docs-ui-verify
docs-ui-verify: ## Check the embedded API reference renderer against its recorded sha256.
	hack/openapi/scalar.sh verify

.PHONY: docs-ui-update
docs-ui-update: ## Re-embed the API reference renderer from npm (SCALAR_VERSION=x.y.z to move).
	hack/openapi/scalar.sh update $(SCALAR_VERSION)

# Spectral and Redocly, pinned by hack/openapi/package-lock.json, lint both OpenAPI documents
# with the rulesets hack/openapi/spectral.yaml and hack/openapi/redocly.yaml; any warning fails.
# Redocly sends no telemetry and looks for no newer release.
.PHONY: openapi-lint
openapi-lint: deps ## Lint the OpenAPI documents with Spectral and Redocly (pinned, from npm).
	cd hack/openapi && { [ -x node_modules/.bin/spectral ] && [ -x node_modules/.bin/redocly ] && npm ls --silent >/dev/null 2>&1 || npm ci --no-audit --no-fund --ignore-scripts; }
	hack/openapi/node_modules/.bin/spectral lint --fail-severity=hint --ruleset hack/openapi/spectral.yaml \
		apiserver/openapi/v2.json apiserver/openapi/v1.json
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true hack/openapi/node_modules/.bin/redocly lint \
		--config hack/openapi/redocly.yaml apiserver/openapi/v2.json apiserver/openapi/v1.json

.PHONY: outdated
outdated: ## List the direct dependencies that have a newer release.
	@go list -m -u -f '{{if .Update}}{{.Path}} {{.Version}} -> {{.Update.Version}}{{end}}' \
		$$(go list -m -f '{{if not (or .Main .Indirect)}}{{.Path}}{{end}}' all)

##@ Test
.PHONY: deps
deps: ## Install the system packages the tests need (as root with apt-get), or name them.
	@hack/deps.sh

.PHONY: test
# The checks that regenerate files first, alone (seconds); then the tests, the fuzz pass, the
# vulnerability scan and the other static checks at once: each waits on something part of its
# time, and together they keep both CPUs busy. A static check that fails says so when it ends,
# while the tests go on. The test servers are started before, so that none race to start them.
test: deps verify-generated verify-chart-docs ## Everything CI checks.
	@eval "$$(hack/testenv.sh)" >/dev/null; \
	$(MAKE) --no-print-directory -j4 --output-sync=line vulncheck test-go fuzz-short static-checks

# The checks that read the tree without regenerating it, three at once.
.PHONY: static-checks
static-checks:
	@$(MAKE) --no-print-directory -j3 --output-sync=target vet lint tidy shellcheck docs-ui-verify openapi-lint

# FUZZTIME is a duration or an execution count (10000x). CI uses a count: with a duration, Go's
# fuzz coordinator can report "context deadline exceeded" as a failure when the time runs out
# mid-execution, though nothing failed.
FUZZTIME ?= 30s
# FuzzHTTP sends raw requests of every route to a real server over TCP (apiserver's database).
# CONTRACT_CASES is how many requests the schema-driven contract generator draws per document in
# make fuzz (docs/testing.md); make test-go draws its default few hundred, so fuzz-short none.
CONTRACT_CASES ?= 5000
FUZZ_TARGETS := ./internal/orders:FuzzPlaceOrder ./internal/catalog:FuzzCatalogQuery ./internal/auth:FuzzParseKey \
	./internal/strictjson:FuzzCheck ./apiserver:FuzzHTTP

.PHONY: bench
bench: deps ## Benchmarks against same-run baselines (not part of make test); BENCHTIME per measurement.
	@eval "$$(hack/testenv.sh)"; \
	go run ./hack/bench -duration $(or $(BENCHTIME),10s)

# The sizes of order history make bench-history measures at (a comma-separated list, so it
# cannot be a default inside $(or ...), which splits at commas).
HISTORY_POINTS ?= 0,1000000,10000000

.PHONY: bench-history
bench-history: deps ## The API and operator on 0, 1 M and 10 M orders of history, against the empty database (about 70 minutes, 55 GB free; HISTORY_POINTS).
	@eval "$$(hack/testenv.sh)"; \
	go run ./hack/bench -figures history -duration $(or $(BENCHTIME),10s) \
		-history-points $(HISTORY_POINTS)

.PHONY: test-faults
test-faults: deps ## Fault tests that kill processes (build tag faults): kill -9 of serve under load.
	@eval "$$(hack/testenv.sh)"; \
	go test -tags faults -count=1 -timeout 20m -run 'TestKillServeDuringLoad|TestPostgresRestartUnderLoad' -v ./apiserver/

# The soak test builds the codeport processes without -race, and its own binary is a load
# generator: on two CPUs the race detector would turn the 1 s latency bound into a measure of
# itself (make test-go runs the same code in process with -race). SOAK_DURATION (default 60s)
# sets the churn phase; the whole run takes about two minutes.
.PHONY: test-soak
test-soak: deps ## Soak test (build tag soak): operators, API replicas, Redis and PostgreSQL under load and churn.
	@assets="$$(hack/envtest.sh)"; \
	eval "$$(hack/testenv.sh)"; \
	export KUBEBUILDER_ASSETS="$$assets"; \
	go test -tags soak -count=1 -timeout 15m -run TestSoak -v ./hack/soak/

# The upgrade test builds the previous release pinned in hack/upgrade/previous-release from the
# repository's history (a clone without it fails, naming the commit) and this tree, then upgrades
# one to the other under order load as docs/operations.md says: migrate, API replicas, operator.
.PHONY: test-upgrade
test-upgrade: deps ## Rolling upgrade from the previous release under load (build tag upgrade).
	@assets="$$(hack/envtest.sh)"; \
	eval "$$(hack/testenv.sh)"; \
	export KUBEBUILDER_ASSETS="$$assets"; \
	go test -tags upgrade -count=1 -timeout 15m -run TestUpgradeUnderLoad -v ./hack/upgrade/

# The chart on a real single-node cluster built on this machine (root; hack/e2e/cluster.sh): the
# image built without a registry, helm install/test/upgrade/uninstall and the mission through the
# Services. A cold first run builds Kubernetes and CoreDNS from source; docs/operator.md
# ("End-to-end cluster") gives the times and how to run the test against another cluster.
.PHONY: test-e2e
test-e2e: deps ## End-to-end test on a single-node cluster of this machine (needs root).
	@hack/e2e/run.sh

.PHONY: fuzz
fuzz: deps ## Run every fuzz target for FUZZTIME each (default 30s).
	@eval "$$(hack/testenv.sh)"; \
	export GOGC="$(TEST_GOGC)"; \
	for t in $(FUZZ_TARGETS); do \
		pkg="$${t%%:*}"; fn="$${t##*:}"; echo "fuzz $$fn ($$pkg, $(FUZZTIME))"; \
		go test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) "$$pkg" || exit 1; \
	done; \
	if [ "$(CONTRACT_CASES)" != 0 ]; then echo "contract generator ($(CONTRACT_CASES) requests a document)"; \
		CONTRACT_CASES=$(CONTRACT_CASES) go test -count=1 -run '^TestContractGenerator$$' ./apiserver || exit 1; fi

.PHONY: fuzz-short
fuzz-short: ## A short fuzz pass of every target, as CI runs it.
	@$(MAKE) --no-print-directory fuzz FUZZTIME=10000x CONTRACT_CASES=0

# The chart's alerts alone (make test-go runs them too, with the test that their metrics are
# exported): promtool check rules and promtool's unit tests on the rules as the chart renders
# them, the runbooks they link, the values they take. Seconds, once bin/promtool is built.
.PHONY: test-rules
test-rules: deps $(PROMTOOL) ## promtool check and unit tests of the chart's alerts, and their runbooks.
	@helm="$$(HELM_VERSION=$(HELM_VERSION) hack/helm.sh)"; \
	HELM="$$helm" go test -count=1 -run '^TestPrometheusRules' ./charts/

.PHONY: test-go
test-go: deps $(PROMTOOL) $(PROMRULES) ## go test -race ./... against real kube-apiserver/etcd, PostgreSQL, Redis and helm.
	@assets="$$(hack/envtest.sh)"; \
	helm="$$(HELM_VERSION=$(HELM_VERSION) hack/helm.sh)"; \
	eval "$$(hack/testenv.sh)"; \
	export KUBEBUILDER_ASSETS="$$assets" HELM="$$helm" GOGC="$(TEST_GOGC)"; \
	go test $(filter-out -race,$(GO_TEST_FLAGS)) $(TEST_PACKAGES_WITHOUT_RACE) & plain=$$!; \
	go test $(GO_TEST_FLAGS) $(TEST_PACKAGES_FIRST) \
		$$(go list ./... | grep -vxF "$$(go list $(TEST_PACKAGES_WITHOUT_RACE))"); race=$$?; \
	wait $$plain; plain=$$?; \
	[ $$race -eq 0 ] && [ $$plain -eq 0 ]

##@ Tools
$(CONTROLLER_GEN):
	GOBIN=$(BIN_DIR) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)

$(GOLANGCI_LINT):
	GOBIN=$(BIN_DIR) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

$(DEADCODE):
	GOBIN=$(BIN_DIR) go install golang.org/x/tools/cmd/deadcode@$(DEADCODE_VERSION)

$(HELM_DOCS):
	GOBIN=$(BIN_DIR) go install github.com/norwoodj/helm-docs/cmd/helm-docs@$(HELM_DOCS_VERSION)

# remove_all_sd leaves out the cloud service discoveries (AWS, Azure, GCE, ...), which checking
# and unit-testing rules never use and which are most of a cold build.
$(PROMTOOL):
	GOBIN=$(BIN_DIR) go install -tags remove_all_sd github.com/prometheus/prometheus/cmd/promtool@$(PROMETHEUS_VERSION)

# A module of its own (Prometheus's parser stays out of go.mod), rebuilt when it changes.
$(PROMRULES): $(wildcard hack/promrules/*.go) hack/promrules/go.mod hack/promrules/go.sum
	cd hack/promrules && go build -o $(PROMRULES) .

.PHONY: promtool
promtool: $(PROMTOOL) $(PROMRULES) ## Install promtool and promrules (the alerts' tests) into ./bin.

$(GOVULNCHECK):
	GOBIN=$(BIN_DIR) go install golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION)

# The command is named indexdb, which would say nothing in ./bin.
$(VULNDB_INDEXDB):
	tmp="$$(mktemp -d)" && GOBIN="$$tmp" go install golang.org/x/vulndb/cmd/indexdb@$(VULNDB_TOOLS_VERSION) && \
		mkdir -p $(BIN_DIR) && mv "$$tmp/indexdb" $@ && rmdir "$$tmp"

.PHONY: docker-build
docker-build: ## Build the container image for this machine's platform (IMG=ghcr.io/codeport/codeport:dev).
	docker build --build-arg VERSION=$(VERSION) -t $(or $(IMG),ghcr.io/codeport/codeport:$(VERSION)) .

# The platforms of the published image; the chart tests check that the binary builds for each.
PLATFORMS ?= linux/amd64,linux/arm64

.PHONY: docker-buildx
docker-buildx: ## Build and push the multi-platform image (IMG, PLATFORMS) with docker buildx.
	docker buildx build --platform $(PLATFORMS) --build-arg VERSION=$(VERSION) \
		-t $(or $(IMG),ghcr.io/codeport/codeport:$(VERSION)) --push .

.PHONY: pin-images
pin-images: ## Re-pin the Dockerfile's base images to their current multi-platform digests.
	hack/pin-images.sh

.PHONY: help
help:
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ { printf "  %-18s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
