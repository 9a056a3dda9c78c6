// Package etcdtest runs a single-member etcd server in the test process,
// on loopback ports, in a temporary directory, stopped when the test ends.
//
// The server itself is internal/embedetcd (which `demo cluster` runs
// too); this package adds what tests need: Start and StartWith take a
// testing.TB, fail it if the server does not start, and register Stop
// with its Cleanup. StartDir and StartDirWith start one in a directory
// of the caller's, stopped by the caller.
package etcdtest

import (
	"testing"

	"github.com/batonhq/baton/internal/embedetcd"
)

// ReadyTimeout bounds how long a start or Restart waits for the server to
// elect itself and serve.
const ReadyTimeout = embedetcd.ReadyTimeout

type (
	// Server is an embedded single-member etcd server listening on
	// loopback. Its methods are safe for concurrent use.
	Server = embedetcd.Server
	// Options tune StartWith and StartDirWith; the zero value is a plain
	// server without TLS or authentication.
	Options = embedetcd.Options
	// TLS is the client-side TLS of the server.
	TLS = embedetcd.TLS
)

// Start starts a server in a temporary directory of t and registers its
// Stop with t.Cleanup. It fails t if the server does not start.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith is Start with opts.
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := embedetcd.StartDirWith(t.TempDir(), opts)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartDir starts a server keeping its data in dir; see
// embedetcd.StartDir. The caller must call Stop.
func StartDir(dir string) (*Server, error) { return embedetcd.StartDir(dir) }

// StartDirWith is StartDir with opts.
func StartDirWith(dir string, opts Options) (*Server, error) {
	return embedetcd.StartDirWith(dir, opts)
}
