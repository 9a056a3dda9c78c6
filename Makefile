# The commands the README and CI use. `make test` is the whole suite; it
# builds the pinned tools (.bin/etcdctl, .bin/etcd, .bin/consul,
# .bin/otelcol, .bin/kube-apiserver) because the etcdctl, Consul, tracing
# and Kubernetes tests and the clustered e2e runs use them.
GO ?= go

.PHONY: test vet fmt-check tools demo soak bench fuzz mutate dist

# Two tiers. The fast tier is `go test ./...`: the e2e fault suite skips
# there unless BATON_E2E=1. `make test` runs both, and gofmt, go vet and
# the fuzz targets' short runs, through tools/test.sh: it builds the
# pinned tools, runs go vet and the fuzz runs at lower priorities
# beside the tests, which run in three stages (docs/testing.md).
# TEST_P: how many packages go test runs at once (the tests wait on
# servers and TTLs more than they compute).
TEST_P ?= 4
test:
	GO=$(GO) TEST_P=$(TEST_P) bash tools/test.sh $(FUZZ_SHORT)

# Every fuzz target (tools/fuzz.sh finds them: func FuzzXxx in a _test.go
# file), one after another: FUZZTIME each in `make fuzz`, FUZZ_SHORT each
# in `make test`. Their seeds and committed corpus
# (testdata/fuzz) also run as plain tests in `go test ./...`.
FUZZTIME ?= 10m
FUZZ_SHORT ?= 10s
fuzz:
	GO=$(GO) sh tools/fuzz.sh $(FUZZTIME)

# The e2e fault suite's long profile: random faults until DURATION has
# passed, on each of BATON_E2E_BACKENDS at once (etcd, etcd-cluster,
# postgres, postgres-ha, mysql, consul, consul-cluster, redis), then the
# same checks and summary as the short profile, and each backend's section
# of docs/reliability.md rewritten (SOAK_REPORT; empty: none). Each
# backend carries SOAK_LANES groups of nodes, each with an election of its
# own, faulted at the same time (e2e/doc.go: BATON_E2E_LANES). Two cores
# carry two or three backends at a time: soak the others in turns.
# BATON_E2E_SEED replays the fault choices of an earlier run. Raise
# SOAK_TIMEOUT for long runs.
DURATION ?= 30m
BATON_E2E_BACKENDS ?= etcd,postgres
SOAK_LANES ?= 3
SOAK_TIMEOUT ?= 3h
SOAK_REPORT ?= $(CURDIR)/docs/reliability.md
soak: tools
	cd e2e && BATON_E2E=1 BATON_E2E_PROFILE=long BATON_E2E_DURATION=$(DURATION) BATON_E2E_BACKENDS=$(BATON_E2E_BACKENDS) \
		BATON_E2E_LANES=$(SOAK_LANES) BATON_E2E_REPORT=$(SOAK_REPORT) \
		$(GO) test -race -count=1 -parallel 8 -timeout $(SOAK_TIMEOUT) -run 'TestFaults$$'

# The history checker's mutation score (tools/mutate): each small change
# to a condition of e2e/internal/history's rules, one at a time, against the
# package's own tests; it lists the changes no test notices. About 10
# minutes on 2 cores.
MUTATE_FILES ?= e2e/internal/history/check.go e2e/internal/history/ticks.go e2e/internal/history/excuses.go e2e/internal/history/loop.go e2e/internal/history/records.go
mutate:
	$(GO) run ./tools/mutate e2e/internal/history $(MUTATE_FILES)

vet:
	$(GO) vet ./...
	cd backends/kube/interop && $(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# Pinned tools, each from its own module so that their dependencies stay
# out of go.mod: etcdctl and the etcd server (tools/etcd, about 90 s when
# cold), Consul (tools/consul, a few minutes when cold), the OpenTelemetry
# Collector the tracing tests export to (tools/otelcol: the OTLP receiver
# and the file exporter; about 140 s when cold on 2 cores, 0.04 s when
# up to date) and kube-apiserver (tools/kube, 6 to 11 minutes when cold
# on 2 cores). Each skips the build when up to date, and copies the
# binary from the machine's tool cache (tools/lib.sh: beside Go's build
# cache) when it holds the pin.
tools:
	sh tools/etcd/build.sh
	sh tools/consul/build.sh
	sh tools/otelcol/build.sh
	sh tools/kube/build.sh

demo:
	$(GO) run ./cmd/demo cluster

# The release's artifacts in dist/ (tools/release, its own module): a
# tar.gz per target (linux and darwin, amd64 and arm64) with the version
# (VERSION), commit and date stamped in, a CycloneDX SBOM each, a .deb and
# an .rpm per Linux architecture, the image (an OCI layout in dist/oci and
# a `docker load` tarball per architecture) and SHA256SUMS. Not part of
# `make test`, which builds and checks the linux/amd64 archive, .deb and
# image on the same path (tools/release/release_test.go).
dist:
	cd tools/release && $(GO) run . -out $(CURDIR)/dist

# Benchmarks beside the tools users would otherwise pick (bench/, its own
# module): writes docs/benchmarks.md. About 10 minutes on 2 cores.
bench: tools
	sh bench/run.sh
