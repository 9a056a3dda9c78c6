#!/usr/bin/env bash
# The whole suite, as `make test` runs it (BATON_TEST_REQUIRE as the caller
# set it). The suite waits more than it computes: `go test ./...` keeps
# under one of two cores busy, waiting on elections, TTLs and servers.
# So the stages overlap where one waits and another computes:
#
#   1. the pinned tools (.bin: etcd, Consul, otelcol, kube-apiserver)
#      build in the background at a low priority (nice 10), while gofmt
#      and the packages whose tests start none of them run;
#   2. once etcd, Consul and otelcol are built, the e2e fault suite (its
#      short profile starts no kube-apiserver) and, beside it, the
#      packages that need Consul or the collector only; the late
#      packages' test binaries, go vet and the fuzz targets build and run
#      beside them at lower priorities;
#   3. once all tools are, the packages whose tests start kube-apiserver
#      or name .bin, and the client-go interop module; then the e2e
#      fault scenario on Kubernetes.
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

# Each tool marks itself built: the e2e suite needs etcd, Consul and the
# collector (otelcol) only; kube-apiserver, the longest, builds last.
nice -n 10 sh -c "sh tools/etcd/build.sh && sh tools/consul/build.sh && touch '$tmp/consul.built' &&
	sh tools/otelcol/build.sh && touch '$tmp/otelcol.built' && sh tools/kube/build.sh" >"$tmp/tools.log" 2>&1 &
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
		if (p ~ "/internal/(consultest|kubetest|oteltest)$" || (" " $2 " ") ~ (" " m "/internal/(consultest|kubetest|oteltest) ")) print p
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

# Stage 2: the e2e suite once etcd, Consul and otelcol are built, and
# beside it the packages that need Consul or the collector only (mid:
# backends/consul's suite is the longest of the late ones). Both wait on
# TTLs more than they compute. The CPU-bound work beside them takes what
# they leave, in order of need: the kube-apiserver build (nice 10), the
# late packages' race test binaries and go vet (nice 15), the fuzz
# targets (nice 19).
built consul
built otelcol
mid=""
for p in $late; do
	if [ "$p" = "$mod/internal/kubetest" ] || grep -q "^$p\(\.test\)\?\( \[.*\]\)\?|.* $mod/internal/kubetest\( \|$\)" "$tmp/deps" ||
		grep -qs '"\.bin"' "$($GO list -f '{{.Dir}}' "$p")"/*_test.go; then
		continue
	fi
	mid="$mid $p"
done
late=$(echo "$late" | grep -vxF "$(echo "$mid" | tr ' ' '\n' | sed '/^$/d')")
say "beside e2e: $(echo "$mid" | sed "s#$mod/##g")"
# shellcheck disable=SC2086
BATON_E2E= $GO test -race -count=1 -p "$P" -timeout 20m $mid >"$tmp/mid.log" 2>&1 &
midpid=$!
bg="$bg $midpid"
# go test -c compiles and links the test binaries without running them
# (their TestMain starts the tools), so that stage 3 finds them built.
# shellcheck disable=SC2086
nice -n 15 sh -c "$GO test -race -c -o '$tmp/bin/' $(echo "$late" | tr '\n' ' ') && (cd backends/kube/interop && $GO test -race -c -o '$tmp/bin/interop/' ./...) && touch '$tmp/late.built' && $GO vet ./... && cd backends/kube/interop && $GO vet ./..." >"$tmp/vet.log" 2>&1 &
vet=$!
bg="$bg $vet"
nice -n 19 env GO="$GO" sh tools/fuzz.sh "$FUZZTIME" >"$tmp/fuzz.log" 2>&1 &
fuzz=$!
bg="$bg $fuzz"
# The release's single-target build (tools/release, its own module): the
# linux/amd64 archive, .deb and image, each run and checked.
nice -n 15 sh -c "cd tools/release && $GO vet ./... && $GO test -race -count=1 -timeout 30m ./..." >"$tmp/release.log" 2>&1 &
release=$!
bg="$bg $release"
(cd e2e && BATON_E2E=1 $GO test -race -count=1 -timeout 15m)
say "e2e passed"
finish "$midpid" mid

finish "$tools" tools
while [ ! -f "$tmp/late.built" ] && kill -0 "$vet" 2>/dev/null; do sleep 1; done
[ -f "$tmp/late.built" ] || finish "$vet" vet

# Stage 3: the packages that start kube-apiserver or name .bin, and the
# client-go interop module; then the e2e fault scenario on Kubernetes
# (its kube-apiserver is built only now), run-now requests and all. It
# runs after them, not beside: the lock tests' kills are timed against
# the lease's margin.
# shellcheck disable=SC2086
BATON_E2E= $GO test -race -count=1 -p "$P" -timeout 20m $late
(cd backends/kube/interop && $GO test -race -count=1 -timeout 10m ./...)
say "packages that start a tool passed"
(cd e2e && BATON_E2E=1 BATON_E2E_BACKENDS=kube $GO test -race -count=1 -timeout 15m -run 'TestFaults$')
say "e2e on kube passed"

finish "$vet" vet
finish "$release" release
finish "$fuzz" fuzz
say "all passed"
