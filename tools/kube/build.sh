#!/bin/sh
# Builds the kube-apiserver pinned in tools/kube/go.mod into
# <repo>/.bin/kube-apiserver: backends/kube's tests run it on the etcd
# server that tools/etcd builds. Idempotent: skips the build when it was
# built from the same go.mod/go.sum (stamp file .bin/kube-apiserver.stamp).
# The first build takes 4 to 6 minutes on 2 cores and about 2 GB of build
# cache; later ones, while the cache holds, a few seconds.
# Usage: tools/kube/build.sh [-f]
set -eu

here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
bin="$root/.bin/kube-apiserver"
stamp="$bin.stamp"

pin k8s.io/kubernetes

if [ "${1:-}" != "-f" ] && [ -x "$bin" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	echo "build.sh: $bin is up to date ($version)"
	keep kube-apiserver
	exit 0
fi

if restore kube-apiserver; then
	echo "$want" > "$stamp"
	exit 0
fi

# The version stamp: without it the server reports v0.0.0-master and
# kubectl cannot parse it.
minor=$(echo "$version" | cut -d. -f2)
v=k8s.io/component-base/version
flags="-X $v.gitVersion=$version -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean"

mkdir -p "$root/.bin"
start=$(date +%s)
echo "build.sh: building k8s.io/kubernetes/cmd/kube-apiserver $version into $bin"
(cd "$here" && go build -mod=readonly -ldflags "$flags" -o "$bin.tmp" k8s.io/kubernetes/cmd/kube-apiserver)
mv "$bin.tmp" "$bin"
echo "$want" > "$stamp"
keep kube-apiserver
echo "build.sh: built kube-apiserver $version in $(( $(date +%s) - start ))s"
