#!/bin/sh
# Builds the etcdctl pinned in tools/etcd/go.mod into <repo>/.bin/etcdctl.
# Idempotent: skips the build when .bin/etcdctl was built from the same
# go.mod/go.sum (stamp file .bin/etcdctl.stamp). Usage: tools/etcd/build.sh [-f]
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin="$root/.bin/etcdctl"
stamp="$root/.bin/etcdctl.stamp"

version=$(sed -n 's/^[[:space:]]*go.etcd.io\/etcd\/etcdctl\/v3 \(v[^ ]*\).*/\1/p' "$here/go.mod" | head -n 1)
if [ -z "$version" ]; then
	echo "build.sh: cannot find the pinned go.etcd.io/etcd/etcdctl/v3 version in $here/go.mod" >&2
	exit 1
fi
want="$version $(cat "$here/go.mod" "$here/go.sum" | cksum | cut -d' ' -f1) $(go env GOVERSION)"

if [ "${1:-}" != "-f" ] && [ -x "$bin" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	echo "build.sh: $bin is up to date (etcdctl $version)"
	exit 0
fi

mkdir -p "$root/.bin"
echo "build.sh: building etcdctl $version into $bin"
start=$(date +%s)
(cd "$here" && go build -mod=readonly -o "$bin.tmp" go.etcd.io/etcd/etcdctl/v3)
mv "$bin.tmp" "$bin"
echo "$want" > "$stamp"
echo "build.sh: built etcdctl $version in $(( $(date +%s) - start ))s"
