#!/usr/bin/env bash
# The whole suite, as `make test` runs it (BATON_TEST_REQUIRE as the caller
# set it). The suite waits more than it computes: `go test ./...` keeps
# under one of two cores busy, waiting on elections, TTLs and servers.
# So the stages overlap where one waits and another computes:
#
#   1. the pinned tools (.bin: etcd, Consul, kube-apiserver) build in the
#      background at the lowest priority, while gofmt and the packages
#      whose tests start none of them run;
#   2. then, side by side, the packages whose tests do (they import
#      internal/consultest or internal/kubetest, or name .bin), the
#      client-go interop module, the e2e fault suite, and go vet and the
#      fuzz targets at the lowest priority.
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

nice -n 19 sh -c 'sh tools/etcd/build.sh && sh tools/consul/build.sh && sh tools/kube/build.sh' >"$tmp/tools.log" 2>&1 &
tools=$!
bg="$bg $tools"

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

finish "$tools" tools

# go vet compiles every package again, without -race: CPU that the tool
# builds need more before this point, and the waiting stages leave idle.
nice -n 19 sh -c "$GO vet ./... && cd backends/kube/interop && $GO vet ./..." >"$tmp/vet.log" 2>&1 &
vet=$!
bg="$bg $vet"
nice -n 19 env GO="$GO" sh tools/fuzz.sh "$FUZZTIME" >"$tmp/fuzz.log" 2>&1 &
fuzz=$!
bg="$bg $fuzz"
(cd e2e && BATON_E2E=1 $GO test -race -count=1 -timeout 15m) >"$tmp/e2e.log" 2>&1 &
e2e=$!
bg="$bg $e2e"

(cd backends/kube/interop && $GO test -race -count=1 -timeout 10m ./...) >"$tmp/interop.log" 2>&1 &
interop=$!
bg="$bg $interop"

# shellcheck disable=SC2086
BATON_E2E= $GO test -race -count=1 -p "$P" -timeout 20m $late
say "packages that start a tool passed"
finish "$interop" interop

finish "$vet" vet
finish "$e2e" e2e
finish "$fuzz" fuzz
say "all passed"
