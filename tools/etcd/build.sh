#!/bin/sh
# Builds the etcdctl and the etcd server pinned in tools/etcd/go.mod into
# <repo>/.bin/etcdctl and <repo>/.bin/etcd: the etcdctl tests run the
# first, the e2e suite's clustered etcd runs three members of the second
# as separate processes. Idempotent: skips the build when both were built
# from the same go.mod/go.sum (stamp file .bin/etcd.stamp).
# Usage: tools/etcd/build.sh [-f]
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
stamp="$root/.bin/etcd.stamp"

version=$(sed -n 's/^[[:space:]]*go.etcd.io\/etcd\/etcdctl\/v3 \(v[^ ]*\).*/\1/p' "$here/go.mod" | head -n 1)
if [ -z "$version" ]; then
	echo "build.sh: cannot find the pinned go.etcd.io/etcd/etcdctl/v3 version in $here/go.mod" >&2
	exit 1
fi
want="$version $(cat "$here/go.mod" "$here/go.sum" | cksum | cut -d' ' -f1) $(go env GOVERSION)"

if [ "${1:-}" != "-f" ] && [ -x "$root/.bin/etcdctl" ] && [ -x "$root/.bin/etcd" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	echo "build.sh: $root/.bin/etcdctl and etcd are up to date ($version)"
	exit 0
fi

mkdir -p "$root/.bin"
start=$(date +%s)
for pkg in etcdctl/v3:etcdctl server/v3:etcd; do
	bin="$root/.bin/${pkg#*:}"
	echo "build.sh: building go.etcd.io/etcd/${pkg%:*} $version into $bin"
	(cd "$here" && go build -mod=readonly -o "$bin.tmp" "go.etcd.io/etcd/${pkg%:*}")
	mv "$bin.tmp" "$bin"
done
echo "$want" > "$stamp"
echo "build.sh: built etcdctl and etcd $version in $(( $(date +%s) - start ))s"
