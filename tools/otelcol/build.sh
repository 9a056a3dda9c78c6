#!/bin/sh
# Builds the OpenTelemetry Collector that internal/oteltest runs into
# <repo>/.bin/otelcol: main.go here, on the collector's own modules at the
# release pinned in tools/otelcol/go.mod (go.opentelemetry.io/collector/otelcol,
# the OTLP receiver and the contrib file exporter, all at one release).
# Idempotent: skips the build when .bin/otelcol was built from the same
# go.mod/go.sum/main.go (stamp file .bin/otelcol.stamp) and still reports
# the pinned version. The first build takes 2 to 3 minutes on 2 cores and
# about 540 MB of build cache (and about 140 MB of module downloads).
# Usage: tools/otelcol/build.sh [-f]   (-f forces a rebuild)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
bin="$root/.bin/otelcol"
stamp="$bin.stamp"

pin go.opentelemetry.io/collector/otelcol
# main.go is built too: a change to it is a new binary.
want="$want $(cksum < "$here/main.go" | cut -d' ' -f1)"

if [ "${1:-}" != "-f" ] && [ -x "$bin" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
	"$bin" --version 2>/dev/null | head -n 1 | grep -qx "otelcol version ${version}"; then
	echo "build.sh: $bin is up to date (collector $version)"
	keep otelcol
	exit 0
fi

if restore otelcol; then
	echo "$want" > "$stamp"
	exit 0
fi

mkdir -p "$root/.bin"
echo "build.sh: building the collector $version into $bin (2 to 3 minutes when cold)"
start=$(date +%s)
(cd "$here" && go build -mod=readonly -ldflags "-X main.version=$version" -o "$bin.tmp" .)
mv "$bin.tmp" "$bin"
echo "$want" > "$stamp"
keep otelcol
echo "build.sh: built $("$bin" --version | head -n 1) in $(( $(date +%s) - start ))s"
