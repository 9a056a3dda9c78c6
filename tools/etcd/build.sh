#!/bin/sh
# Builds the etcdctl and the etcd server pinned in tools/etcd/go.mod into
# <repo>/.bin/etcdctl and <repo>/.bin/etcd: the etcdctl tests run the
# first, the e2e suite's clustered etcd runs three members of the second
# as separate processes. Idempotent: skips the build when both were built
# from the same go.mod/go.sum (stamp file .bin/etcd.stamp).
# Usage: tools/etcd/build.sh [-f]
set -eu

here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
stamp="$root/.bin/etcd.stamp"

pin go.etcd.io/etcd/etcdctl/v3

if [ "${1:-}" != "-f" ] && [ -x "$root/.bin/etcdctl" ] && [ -x "$root/.bin/etcd" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	echo "build.sh: $root/.bin/etcdctl and etcd are up to date ($version)"
	keep etcdctl etcd
	exit 0
fi

if restore etcdctl etcd; then
	echo "$want" > "$stamp"
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
keep etcdctl etcd
echo "build.sh: built etcdctl and etcd $version in $(( $(date +%s) - start ))s"
