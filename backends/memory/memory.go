package memory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// Server is an in-memory leadership store: the "server" of an election
// that lives in one process. It keeps one lease with a TTL on the process
// clock (the fake clock under testing/synctest), and hands out candidates
// (Backends) whose path to it can be cut, like a network.
//
// The zero value is not usable; create it with New.
type Server struct {
	timing election.Timing

	mu      sync.Mutex
	holder  *memHolder // nil when free
	token   uint64
	changed chan struct{} // closed and replaced on every change

	// ledger state, guarded by mu
	last       map[string]time.Time
	runs       map[string][]ledger.Run // newest last
	claimCalls int                     // claim batches served (ClaimCalls)

	// control state, guarded by mu
	ctl        map[string]memEntry
	ctlVersion int64 // the newest version handed out
}

type memHolder struct {
	id      election.Identity
	token   uint64
	expiry  time.Time
	since   time.Time
	revoked chan struct{}
}

// New returns an empty store whose leases use timing (defaults: TTL
// 5 s, see election.Timing). It panics if timing is invalid.
func New(timing election.Timing) *Server {
	timing = timing.WithDefaults(5 * time.Second)
	if err := timing.Validate(time.Millisecond, 0); err != nil {
		panic(err)
	}
	return &Server{timing: timing, changed: make(chan struct{})}
}

// Timing returns the store's lease timing.
func (m *Server) Timing() election.Timing { return m.timing }

func (m *Server) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// holderLocked returns the live holder, expiring a stale one.
func (m *Server) holderLocked() *memHolder {
	if m.holder != nil && !time.Now().Before(m.holder.expiry) {
		close(m.holder.revoked)
		m.holder = nil
		m.notifyLocked()
	}
	return m.holder
}

// Revoke deletes the current lease on the store side, as an operator or an
// expiry would; its holder learns of it through its watch. It reports
// whether a lease was held.
func (m *Server) Revoke() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.holderLocked()
	if h == nil {
		return false
	}
	close(h.revoked)
	m.holder = nil
	m.notifyLocked()
	return true
}

// RevokeToken is Revoke for the lease with token only; it reports
// whether that lease was the live one.
func (m *Server) RevokeToken(token uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.holderLocked()
	if h == nil || h.token != token {
		return false
	}
	close(h.revoked)
	m.holder = nil
	m.notifyLocked()
	return true
}

// Leader implements driver.LeaderReader on the store.
func (m *Server) Leader(ctx context.Context) (election.LeaderInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.holderLocked()
	if h == nil {
		return election.LeaderInfo{}, election.ErrNoLeader
	}
	return election.LeaderInfo{Identity: h.id, Token: h.token, Since: h.since}, nil
}

// Candidate returns a Backend connected to the store through a path of its
// own, which Cut and Heal affect alone.
func (m *Server) Candidate() *Backend {
	return &Backend{m: m, healed: make(chan struct{})}
}

// Backend is one candidate's connection to a Server. It
// implements election.Backend and driver.LeaderReader.
type Backend struct {
	m *Server

	mu     sync.Mutex
	cut    bool
	healed chan struct{} // closed when the path is healed
}

var (
	_ election.Backend    = (*Backend)(nil)
	_ driver.LeaderReader = (*Backend)(nil)
)

// Cut makes every request on this path hang until Heal (or its context
// ends), like a blackholed network.
func (b *Backend) Cut() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.cut {
		b.cut = true
		b.healed = make(chan struct{})
	}
}

// Heal undoes Cut.
func (b *Backend) Heal() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cut {
		b.cut = false
		close(b.healed)
	}
}

// pass blocks while the path is cut.
func (b *Backend) pass(ctx context.Context) error {
	for {
		b.mu.Lock()
		cut, healed := b.cut, b.healed
		b.mu.Unlock()
		if !cut {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-healed:
		}
	}
}

// Leader implements driver.LeaderReader.
func (b *Backend) Leader(ctx context.Context) (election.LeaderInfo, error) {
	if err := b.pass(ctx); err != nil {
		return election.LeaderInfo{}, err
	}
	return b.m.Leader(ctx)
}

// Acquire implements election.Backend.
func (b *Backend) Acquire(ctx context.Context, id election.Identity) (election.Lease, error) {
	m := b.m
	for {
		// A cut path holds the attempt: say so each StallBound.
		stall := driver.WatchAttempt(ctx, driver.StallBound(m.timing), "memory: acquire", nil)
		err := b.pass(ctx)
		stall()
		if err != nil {
			return nil, fmt.Errorf("memory: acquire: %w", err)
		}
		driver.ReportAttempt(ctx, nil)
		sent := time.Now()
		m.mu.Lock()
		h := m.holderLocked()
		if h == nil {
			m.token++
			h = &memHolder{id: id, token: m.token, expiry: sent.Add(m.timing.TTL), since: sent, revoked: make(chan struct{})}
			m.holder = h
			m.notifyLocked()
			m.mu.Unlock()
			return b.newLease(h, sent), nil
		}
		changed, expiry := m.changed, h.expiry
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("memory: acquire: %w", ctx.Err())
		case <-changed:
		case <-time.After(time.Until(expiry)):
		}
	}
}

var errRevoked = errors.New("memory: lease revoked")

func (b *Backend) newLease(h *memHolder, sent time.Time) *driver.ManagedLease {
	m := b.m
	l := driver.NewManagedLease(driver.ManagedLeaseConfig{
		Timing: m.timing,
		Sent:   sent,
		Renew: func(ctx context.Context) (time.Duration, error) {
			if err := b.pass(ctx); err != nil {
				return 0, err
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.holderLocked() != h {
				return 0, election.LostError(errRevoked)
			}
			h.expiry = time.Now().Add(m.timing.TTL)
			return 0, nil
		},
		Watch: func(ctx context.Context) error {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-h.revoked:
				// A cut path does not deliver the news.
				if err := b.pass(ctx); err != nil {
					return err
				}
				return errRevoked
			}
		},
		Release: func(ctx context.Context) error {
			if err := b.pass(ctx); err != nil {
				return err
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.holder == h {
				close(h.revoked)
				m.holder = nil
				m.notifyLocked()
			}
			return nil
		},
	})
	l.SetToken(h.token)
	return l
}
