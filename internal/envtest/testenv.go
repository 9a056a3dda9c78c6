// Package envtest holds helpers shared by the tests that need real servers.
package envtest

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// ErrUnavailable marks an error that means a server a test needs cannot be
// reached (or a tool it needs is missing). A caller that gets one calls
// Unavailable instead of failing.
var ErrUnavailable = errors.New("server unavailable")

// Required reports whether tests must fail rather than skip when a server
// they need is unreachable (BATON_TEST_REQUIRE=1, set by CI).
func Required() bool { return os.Getenv("BATON_TEST_REQUIRE") == "1" }

// Unavailable skips t with a loud reason, or fails it when servers are
// required.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if Required() {
		t.Fatalf("required server unavailable (BATON_TEST_REQUIRE=1): "+format, args...)
	}
	t.Skipf("SKIP: server unavailable (set BATON_TEST_REQUIRE=1 to fail instead): "+format, args...)
}

// Getenv returns the environment variable key, or def when it is empty.
func Getenv(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// WantErrors checks the error of a call that validates (what carries
// every problem at once) against want, substrings it must contain. With
// want empty err must be nil; otherwise err must not be nil and must
// contain each of want. A nil or unwanted error stops t (t.Fatalf); each
// missing substring is reported with t.Errorf.
func WantErrors(t testing.TB, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("error = %v, want nil", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("error = nil, want one containing %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error = %q\nwant it to contain %q", err, w)
		}
	}
}
