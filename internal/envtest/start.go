package envtest

import (
	"errors"
	"testing"
)

// Start starts a throwaway server for t and returns it once it is up:
// start is given a temporary directory of t (removed when t ends) and
// blocks until the server answers or has failed. The server's Stop is
// registered with t.Cleanup. An error wrapping ErrUnavailable skips t
// (Unavailable: a failure under BATON_TEST_REQUIRE=1); any other fails
// t, prefixed with pkg, the helper package that runs such servers.
func Start[S interface{ Stop() }](t testing.TB, pkg string, start func(dir string) (S, error)) S {
	t.Helper()
	s, err := start(t.TempDir())
	if errors.Is(err, ErrUnavailable) {
		Unavailable(t, "%v", err)
	}
	if err != nil {
		t.Fatalf("%s: %v", pkg, err)
	}
	t.Cleanup(s.Stop)
	return s
}
