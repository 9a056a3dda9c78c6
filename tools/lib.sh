# Sourced by tools/*/build.sh, which sets here (its folder) first; this
# sets root (the repo), and pin sets version and want.
#
# The machine's tool cache: a folder beside Go's build cache, holding each
# built binary under its stamp's checksum. A fresh clone on a machine that
# built the same pin before copies the binary instead of linking it again
# (kube-apiserver's link alone takes about a minute on 2 cores). It lives
# and goes with Go's cache: where that is empty (a new machine, `go clean
# -cache` aside, `ci-fresh --cold`), so is this, and the tools build.
# BATON_TOOLS_CACHE names another folder; "off" turns it off.

root=$(cd "$here/../.." && pwd)

# pin MODULE: sets version, what $here/go.mod requires of MODULE, and want,
# the stamp a build leaves in .bin: that version, a checksum of go.mod and
# go.sum, and Go's version. A binary whose stamp differs is built again.
pin() {
	version=$(sed -n "s#^\(require\)\{0,1\}[[:space:]]*$1 \(v[^ ]*\).*#\2#p" "$here/go.mod" | head -n 1)
	if [ -z "$version" ]; then
		echo "build.sh: cannot find the pinned $1 version in $here/go.mod" >&2
		exit 1
	fi
	want="$version $(cat "$here/go.mod" "$here/go.sum" | cksum | cut -d' ' -f1) $(go env GOVERSION)"
}

tools_cache() {
	if [ -n "${BATON_TOOLS_CACHE:-}" ]; then
		[ "$BATON_TOOLS_CACHE" = off ] && return 1
		echo "$BATON_TOOLS_CACHE/$(echo "$want" | cksum | cut -d' ' -f1)"
		return 0
	fi
	gocache=$(go env GOCACHE)
	case "$gocache" in off | "") return 1 ;; esac
	echo "$(dirname "$gocache")/baton-tools/$(echo "$want" | cksum | cut -d' ' -f1)"
}

# restore NAME...: copies each .bin/NAME from the cache; fails, copying
# nothing, unless the cache holds all of them.
restore() {
	dir=$(tools_cache) || return 1
	for name in "$@"; do [ -x "$dir/$name" ] || return 1; done
	mkdir -p "$root/.bin"
	for name in "$@"; do
		cp "$dir/$name" "$root/.bin/$name.tmp"
		mv "$root/.bin/$name.tmp" "$root/.bin/$name"
	done
	echo "build.sh: copied $* from the machine's tool cache ($dir)"
}

# keep NAME...: copies each .bin/NAME, built from the pin, into the cache
# unless it holds it already. A cache that cannot be written is passed
# over: it only saves time.
keep() {
	dir=$(tools_cache) || return 0
	mkdir -p "$dir" 2>/dev/null || return 0
	for name in "$@"; do
		[ -x "$dir/$name" ] && continue
		cp "$root/.bin/$name" "$dir/$name.tmp.$$" 2>/dev/null &&
			mv "$dir/$name.tmp.$$" "$dir/$name" || rm -f "$dir/$name.tmp.$$"
	done
}
