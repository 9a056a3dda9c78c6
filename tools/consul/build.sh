#!/bin/sh
# Builds the Consul agent pinned in tools/consul/go.mod into <repo>/.bin/consul.
# Idempotent: skips the build when .bin/consul was built from the same
# go.mod/go.sum (stamp file .bin/consul.stamp) and still reports the pinned
# version. Usage: tools/consul/build.sh [-f]   (-f forces a rebuild)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
bin="$root/.bin/consul"
stamp="$root/.bin/consul.stamp"

pin github.com/hashicorp/consul

if [ "${1:-}" != "-f" ] && [ -x "$bin" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
	"$bin" version 2>/dev/null | head -n 1 | grep -qx "Consul ${version}"; then
	echo "build.sh: $bin is up to date (Consul $version)"
	keep consul
	exit 0
fi

if restore consul; then
	echo "$want" > "$stamp"
	exit 0
fi

mkdir -p "$root/.bin"
echo "build.sh: building Consul $version into $bin (a few minutes when cold)"
start=$(date +%s)
# -mod=readonly: go.mod and go.sum must already say everything (no GONOSUMDB
# or GOFLAGS=-mod=mod needed). GOFLAGS from the caller are kept otherwise.
(cd "$here" && go build -mod=readonly -o "$bin.tmp" github.com/hashicorp/consul)
mv "$bin.tmp" "$bin"
echo "$want" > "$stamp"
keep consul
echo "build.sh: built $("$bin" version | head -n 1) in $(( $(date +%s) - start ))s"
