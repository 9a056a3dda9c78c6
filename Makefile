# The commands the README and CI use. `make test` is the whole suite; it
# builds the pinned tools first (.bin/etcdctl, .bin/consul) because the
# etcdctl and Consul tests run them.
GO ?= go

.PHONY: test vet fmt-check tools demo

test: tools vet fmt-check
	$(GO) test -race -count=1 -timeout 20m ./...

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# Pinned tools, each from its own module so that their dependencies stay
# out of go.mod: etcdctl (tools/etcd, ~10 s) and Consul (tools/consul, a few
# minutes when cold). Both skip the build when up to date.
tools:
	sh tools/etcd/build.sh
	sh tools/consul/build.sh

demo:
	$(GO) run ./cmd/demo cluster
