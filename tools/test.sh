#!/usr/bin/env bash
# The whole suite, as `make test` runs it (BATON_TEST_REQUIRE as the caller
# set it). The suite waits more than it computes: `go test ./...` keeps
# under one of two cores busy, waiting on elections, TTLs and servers.
# So the stages overlap where one waits and another computes:
#
#   1. the pinned tools (.bin: etcd, Consul, kube-apiserver) build in the
#      background at the lowest priority, while gofmt and the packages
#      whose tests start none of them run;
#   2. once etcd and Consul are built, the e2e fault suite (its short
#      profile starts no kube-apiserver);
#   3. once all are, the packages whose tests start one (they import
#      internal/consultest or internal/kubetest, or name .bin) and the
#      client-go interop module, with go vet and the fuzz targets beside
#      them at the lowest priority.
#
# A background stage's output is printed whole when it is waited for. The
# first failing stage ends the run, and stops the background ones.
#
#   bash tools/test.sh [FUZZTIME]     (default 10s; TEST_P: packages at once)
set -euo pipefail
set -m # each background stage in a process group of its own, to stop whole
GO=${GO:-go}
P=${TEST_P:-4}
FUZZTIME=${1:-10s}
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
bg=""
stop() {
	for pid in $bg; do kill -TERM -- "-$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap stop EXIT
trap 'exit 130' INT TERM
t0=$(date +%s)
say() { printf 'test.sh: %s (%d s)\n' "$*" "$(($(date +%s) - t0))"; }
# finish PID NAME: waits for a background stage and prints its output.
finish() {
	local rc=0
	wait "$1" || rc=$?
	bg=$(echo "$bg" | sed "s/\b$1\b//")
	cat "$tmp/$2.log"
	if [ "$rc" -ne 0 ]; then
		say "$2 failed (exit $rc)"
		exit "$rc"
	fi
	say "$2 done"
}

# Each tool marks itself built: the e2e suite needs etcd and Consul only.
nice -n 19 sh -c "sh tools/etcd/build.sh && sh tools/consul/build.sh && touch '$tmp/consul.built' && sh tools/kube/build.sh" >"$tmp/tools.log" 2>&1 &
tools=$!
bg="$bg $tools"
# built NAME: waits until the tool build has marked NAME built, or ended.
built() {
	while [ ! -f "$tmp/$1.built" ] && kill -0 "$tools" 2>/dev/null; do sleep 1; done
	[ -f "$tmp/$1.built" ] || finish "$tools" tools
}

# Which packages' tests start a tool's binary: a test variant that links
# the helpers that find them, or a test file that names .bin.
mod=$($GO list -m)
$GO list -test -f '{{.ImportPath}}|{{join .Deps " "}}' ./... >"$tmp/deps"
late=$(awk -F'|' -v m="$mod" '
	{
		p = $1; sub(/ \[.*/, "", p); sub(/(\.test|_test)$/, "", p)
		if (p ~ "/internal/(consultest|kubetest)$" || (" " $2 " ") ~ (" " m "/internal/(consultest|kubetest) ")) print p
	}' "$tmp/deps" | sort -u)
for d in $($GO list -f '{{.ImportPath}}:{{.Dir}}' ./...); do
	if grep -qs '"\.bin"' "${d#*:}"/*_test.go; then late="$late ${d%%:*}"; fi
done
late=$(echo "$late" | tr ' ' '\n' | sed '/^$/d' | sort -u)
early=$($GO list ./... | grep -vxF "$late")
say "$(echo "$early" | wc -l) packages need no tool; after the tools: $(echo "$late" | sed "s#^$mod/##" | tr '\n' ' ')"

out=$(gofmt -l .)
if [ -n "$out" ]; then
	echo "gofmt would change:"
	echo "$out"
	exit 1
fi
say "gofmt clean"

# shellcheck disable=SC2086 # the package lists split on white space
BATON_E2E= $GO test -race -count=1 -p "$P" -timeout 20m $early
say "packages that need no tool passed"

# One stage that leans on timing at a time (the e2e suite's bounds, the
# packages' failover and fencing trials): side by side on a machine whose
# other core is busy, they missed their margins (ci-loaded: a kube
# network-cut trial saw the next leader start 3.26 s after the cut while
# the old term's context was still live). The CPU-bound work beside
# them runs at the lowest priority.
built consul
(cd e2e && BATON_E2E=1 $GO test -race -count=1 -timeout 15m)
say "e2e passed"

finish "$tools" tools

# go vet compiles every package again, without -race: CPU that the tool
# builds need more before this point, and the waiting stages leave idle.
nice -n 19 sh -c "$GO vet ./... && cd backends/kube/interop && $GO vet ./..." >"$tmp/vet.log" 2>&1 &
vet=$!
bg="$bg $vet"
nice -n 19 env GO="$GO" sh tools/fuzz.sh "$FUZZTIME" >"$tmp/fuzz.log" 2>&1 &
fuzz=$!
bg="$bg $fuzz"

# shellcheck disable=SC2086
BATON_E2E= $GO test -race -count=1 -p "$P" -timeout 20m $late
(cd backends/kube/interop && $GO test -race -count=1 -timeout 10m ./...)
say "packages that start a tool passed"

finish "$vet" vet
finish "$fuzz" fuzz
say "all passed"
