# otelgateway: build, run and test the otelcol-gateway distribution.
#
#   make run    build the distribution (if needed) and start it on testdata/config.yaml
#   make test   unit tests with -race, then the end-to-end test against a real Prometheus
#               (Debian's 2.42, and 3.16 built once into ~/.cache/otelgateway: make prometheus3)
#   make bench  benchmarks (figures for issue notes)
#   make bench-scale  receiver → processor → promstream at 10k, 100k and 1M tuples (~35 min, ~12 GiB at 1M)
#   make bench-cores  the receiver's ingest under GOMAXPROCS=1 and 2, with mutex and block profiles
#   make lint   gofmt, go vet and staticcheck; the deploy/ files: promtool on the alert rules and their
#               unit tests, the Kubernetes manifests, the Dockerfile and the dashboard (deploy module)
#   make soak   mixed good and hostile traffic for SOAK_MINUTES (default 10) against the built collector

GO          ?= go
OCB_VERSION := v0.165.0
DIST        := dist/otelcol-gateway
CONFIG      ?= testdata/config.yaml
# Every Go source of the main module: the distribution is rebuilt when one changes.
SOURCES     := $(shell find . -name '*.go' -not -path './dist/*' -not -path './e2e/*' -not -path './bench/*') go.mod go.sum builder-config.yaml

.PHONY: all build run test unit e2e soak bench bench-scale bench-cores lint lint-deploy prometheus prometheus3 clean

all: build

build: $(DIST)

$(DIST): $(SOURCES)
	$(GO) run go.opentelemetry.io/collector/cmd/builder@$(OCB_VERSION) --config builder-config.yaml

run: $(DIST)
	./$(DIST) --config $(CONFIG)

test: lint unit e2e

unit:
	$(GO) test -race -count=1 ./...

# The end-to-end test starts the ocb-built collector and a real Prometheus
# (Debian's 2.42, and Prometheus 3 for the tests of how its users run it).
e2e: $(DIST) prometheus prometheus3
	cd e2e && OTELCOL_BIN=$(CURDIR)/$(DIST) PROMETHEUS3_BIN=$(PROM3) $(GO) test -race -count=1 -timeout 25m -v ./...

# The soak test (e2e/soak_test.go, build tag soak, never part of `make test`):
# sustained good and hostile traffic, a table per minute, exact good counts
# and RSS within ±10 % after warm-up. Without -race: it measures a rate.
SOAK_MINUTES ?= 10
soak: $(DIST)
	cd e2e && $(GO) vet -tags soak ./...
	cd e2e && SOAK_MINUTES=$(SOAK_MINUTES) OTELCOL_BIN=$(CURDIR)/$(DIST) \
		$(GO) test -tags soak -run '^TestSoak$$' -count=1 -timeout $$(( $(SOAK_MINUTES) + 10 ))m -v .

# Debian's prometheus package provides prometheus and promtool.
prometheus:
	@if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then \
		echo "installing Debian's prometheus package"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; \
	fi

# Prometheus 3 (e2e/prometheus3_test.go), built once from its Go module into
# a cache outside the repository, only when missing. No Debian package has
# it. Built without the service-discovery plugins (remove_all_sd: the tests
# use static targets), which halves the build: about 8 CPU-minutes cold
# instead of 15, plus the module downloads; a full build placed at $(PROM3)
# serves as well.
PROM3_VERSION := v0.316.0
PROM3_DIR     ?= $(HOME)/.cache/otelgateway/prometheus-$(PROM3_VERSION)
PROM3         := $(PROM3_DIR)/prometheus

prometheus3: $(PROM3)

$(PROM3):
	mkdir -p $(PROM3_DIR)
	GOBIN=$(PROM3_DIR) $(GO) install -tags remove_all_sd github.com/prometheus/prometheus/cmd/prometheus@$(PROM3_VERSION)

# Micro-benchmarks beside the code, then the peer comparisons (own modules,
# so peers never enter the main module): each prints its table with ratios.
# bench/distribution runs both ocb-built distributions as processes at stepped
# rates, DIST_STEP per rate (20s: ~10 min; it builds what is missing).
DIST_STEP ?= 20s
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
	cd bench/cumulative && $(GO) test -run TestCompare -v -timeout 30m .
	cd bench/promstream && $(GO) test -run TestReport -v -count 1 -timeout 30m .
	cd bench/health && $(GO) test -run TestReport -v -count 1 -timeout 10m .
	cd bench/receiver && $(GO) test -run TestReport -v -count 1 -timeout 10m .
	cd bench/distribution && $(GO) test -run TestReport -v -count 1 -timeout 30m . -step $(DIST_STEP)

# The scale curve (bench/scale, issue 28): not part of `make bench` (about
# 35 minutes, and the 1M-tuple otel case holds ~12 GiB). SCALE_SIZES picks
# the sizes; SCALE_PROFILES the directory for the child's heap and mutex
# profiles (none if empty).
SCALE_SIZES    ?= 10000,100000,1000000
SCALE_PROFILES ?=
bench-scale:
	cd bench/scale && $(GO) test -run TestReport -v -count 1 -timeout 90m . -sizes $(SCALE_SIZES) -profiles-dir "$(SCALE_PROFILES)"

# Ingest on 1 and 2 cores (bench/scale TestCores): mutex and block profiles in
# $(CORES_PROFILES) (dist/ is not tracked).
CORES_PROFILES ?= $(CURDIR)/dist/bench-profiles
bench-cores:
	cd bench/scale && $(GO) test -run TestCores -v -count 1 -timeout 20m . -cores-profiles "$(CORES_PROFILES)"

lint:
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './dist/*' -not -path './bench/*/dist/*')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.6.1 ./...
	cd e2e && $(GO) vet ./...
	for d in bench/*/; do (cd $$d && $(GO) vet ./...) || exit 1; done
	$(MAKE) lint-deploy

# deploy/: the alert rules (syntax, then promtool's unit tests of every alert), the Prometheus
# config for Kubernetes, and the deploy module's checks (Kubernetes manifests decoded strictly into
# k8s.io/api types, BuildKit's Dockerfile linter, the dashboard's shape). Offline: no schema or
# image is downloaded.
lint-deploy: prometheus
	promtool check rules deploy/prometheus/alerts.yml
	promtool test rules deploy/prometheus/alerts_test.yml
	promtool check config deploy/prometheus/scrape-kubernetes.yml
	cd deploy && $(GO) vet ./... && $(GO) test -count=1 ./...

clean:
	rm -rf dist bench/distribution/dist
