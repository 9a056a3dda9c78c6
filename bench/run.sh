#!/bin/sh
# Runs the benchmarks and writes docs/benchmarks.md. `make bench` calls it.
# Needs: the Consul agent binary (tools/consul/build.sh builds .bin/consul),
# PostgreSQL and MariaDB on 127.0.0.1 (or BATON_TEST_POSTGRES_DSN /
# BATON_TEST_MYSQL_DSN), redis-server in PATH (the bench starts its own on a
# free loopback port). Extra arguments go to the bench command
# (e.g. -quick, -only lateness,handover).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
if [ ! -x "$root/.bin/consul" ] && [ -z "${CONSUL_BIN:-}" ] && ! command -v consul >/dev/null 2>&1; then
	"$root/tools/consul/build.sh"
fi
cd "$here"
go build -o "$here/.bench" .
trap 'rm -f "$here/.bench"' EXIT
"$here/.bench" -out "$root/docs/benchmarks.md" "$@"
