package envtest

import (
	"os"
	"sync"
	"testing"
)

// Shared is a server (or a built binary) that the tests of one package
// share: started on the first Get, in a temporary directory of its own,
// and stopped by Close, which the package's TestMain calls after m.Run.
type Shared[S any] struct {
	What  string                      // the server, as a skip or failure names it
	Dir   string                      // the prefix of its directory's name
	Start func(dir string) (S, error) // starts it in dir
	Stop  func(S)                     // stops it; nil: nothing to stop
	Fail  bool                        // a Start error fails t, never skips it

	once    sync.Once
	srv     S
	err     error
	dir     string
	started bool
}

// Get returns the server, starting it on first use. When it cannot start
// it skips t loudly (fails it under BATON_TEST_REQUIRE=1): Unavailable;
// with Fail set, it fails t.
func (s *Shared[S]) Get(t testing.TB) S {
	t.Helper()
	s.once.Do(func() {
		s.dir, s.err = os.MkdirTemp("", s.Dir)
		if s.err == nil {
			s.srv, s.err = s.Start(s.dir)
			s.started = s.err == nil
		}
	})
	if s.err != nil && s.Fail {
		t.Fatalf("%s: %v", s.What, s.err)
	}
	if s.err != nil {
		Unavailable(t, "%s: %v", s.What, s.err)
	}
	return s.srv
}

// Close stops the server if it started and removes its directory.
func (s *Shared[S]) Close() {
	if s.started && s.Stop != nil {
		s.Stop(s.srv)
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}
