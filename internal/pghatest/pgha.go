// Package pghatest runs a PostgreSQL primary and a streaming standby of a
// test's own, and fails over between them as often as a test asks: kill
// the primary, promote the standby, rebuild the dead server as the new
// standby, and again.
//
// The servers are the installed PostgreSQL's programs (the newest of
// /usr/lib/postgresql/*/bin), run as the postgres user (through runuser
// when the test runs as root: the server refuses to run as root), each on
// a free loopback port and a data directory under the directory the caller
// gives. They never touch a shared server (such as the one on 5432). They
// listen on 127.0.0.1 only, with no Unix socket, trust authentication, and
// fsync off: a crash of the machine loses them, a crash of a server does
// not.
//
// When the server programs are missing, Start returns an error wrapping
// envtest.ErrUnavailable; StartT skips the test loudly then (a failure
// under BATON_TEST_REQUIRE=1).
//
// A Pair's methods that change it (KillPrimary, Promote, Rebuild,
// Failover, Close) are meant to be called from one goroutine; the
// accessors (Primary, Standby, Servers, Server.Role) are safe to call
// from any goroutine at any time.
package pghatest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// DefaultDatabase is the database Start creates when Options.Database is
// empty.
const DefaultDatabase = "test"

// WaitLimit bounds each wait of this package (a server to stream, to
// accept writes, to catch up) when ctx allows longer; pg_ctl's own waits
// are bounded by the same time.
const WaitLimit = 60 * time.Second

// pollEvery is the period of the waits' checks.
const pollEvery = 20 * time.Millisecond

// Options tune Start. The zero value is an asynchronous pair with a
// database "test".
type Options struct {
	// Sync makes replication synchronous: synchronous_standby_names =
	// '*' and synchronous_commit = remote_apply are in both servers'
	// configuration, so that it holds whichever is primary. A commit is
	// then acknowledged only once the standby has applied it, and waits
	// (without end) while no standby is streaming: after a promotion,
	// until Rebuild has brought the other server back.
	Sync bool
	// Database is created on the first primary before the standby is
	// copied from it, so that it exists on both servers. Default
	// DefaultDatabase.
	Database string
}

// Role is what a server of a Pair is.
type Role int

// The roles.
const (
	// RolePrimary: the server that accepts writes (when running; after
	// KillPrimary, until Promote, the primary is a stopped one).
	RolePrimary Role = iota + 1
	// RoleStandby: a server in recovery that streams from the primary.
	RoleStandby
	// RoleDemoted: the former primary after its standby was promoted. It
	// may hold writes the new primary lacks and has the old timeline: it
	// rejoins only through Rebuild.
	RoleDemoted
)

// String returns "primary", "standby" or "demoted".
func (r Role) String() string {
	switch r {
	case RolePrimary:
		return "primary"
	case RoleStandby:
		return "standby"
	case RoleDemoted:
		return "demoted"
	}
	return "Role(" + strconv.Itoa(int(r)) + ")"
}

// StopMode is pg_ctl stop's shutdown mode.
type StopMode string

// The shutdown modes.
const (
	// Immediate is a crash: no shutdown checkpoint, nothing more sent to
	// a standby, clients cut off.
	Immediate StopMode = "immediate"
	// Fast is a clean stop: clients cut off, a shutdown checkpoint.
	Fast StopMode = "fast"
)

// Pair is a primary and a standby, as Start made them and failovers have
// swapped them.
type Pair struct {
	bin  string // the PostgreSQL programs' directory
	opts Options
	// uid and gid of the postgres user, when running as root (-1 else).
	uid, gid int

	mu      sync.Mutex
	servers [2]*Server
	closed  bool
}

// FailoverTimes is how long the steps of a Failover took.
type FailoverTimes struct {
	// Away is the time from the primary's kill to the promoted standby
	// answering as a primary (pg_is_in_recovery() false): how long no
	// server took writes.
	Away time.Duration
	// Rebuild is the time Rebuild took, until the rebuilt standby
	// streamed with the expected sync_state. With Options.Sync, commits
	// on the new primary wait during it.
	Rebuild time.Duration
}

// Options returns the options the pair was started with (Database filled
// in).
func (p *Pair) Options() Options { return p.opts }

// Servers returns both servers in a fixed order: index 0 is pg0 (the
// first primary), index 1 pg1, whatever their roles are now.
func (p *Pair) Servers() [2]*Server { return p.servers }

// Primary returns the server in the primary role: after KillPrimary it is
// the stopped one, until Promote makes the standby the primary. It is nil
// only after Close.
func (p *Pair) Primary() *Server { return p.withRole(RolePrimary) }

// Standby returns the server in the standby role, or nil between Promote
// and the end of Rebuild (and after Close).
func (p *Pair) Standby() *Server { return p.withRole(RoleStandby) }

func (p *Pair) withRole(r Role) *Server {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.servers {
		if s != nil && s.role == r && !p.closed {
			return s
		}
	}
	return nil
}

func (p *Pair) setRole(s *Server, r Role) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.role = r
}

// Close stops both servers (immediate) and removes their directories
// (pg0 and pg1 under Start's dir). Calling it again does nothing.
func (p *Pair) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
	defer cancel()
	var errs []error
	for _, s := range p.servers {
		if s == nil {
			continue
		}
		if running, err := s.Running(ctx); err != nil || running {
			if err := s.Stop(ctx, Immediate); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := p.removeRoots(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (p *Pair) removeRoots() error {
	var errs []error
	for _, s := range p.servers {
		if s != nil {
			if err := os.RemoveAll(s.root); err != nil {
				errs = append(errs, fmt.Errorf("pghatest: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}
