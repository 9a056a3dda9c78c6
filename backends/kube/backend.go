package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
)

// Backend is one candidate's view of an election held on a Lease object.
// It implements election.Backend, driver.LeaderReader and driver.Checker.
type Backend struct {
	c      *Client
	ns     string
	name   string
	terms  string // the ConfigMap keeping the highest token handed out
	timing election.Timing
	log    *slog.Logger
	// history is how many runs per job the ledger keeps.
	history int
	// locks serialize this process's writes of each ConfigMap of the
	// ledger and the control store (fenced.go).
	locks sync.Map
}

var (
	_ election.Backend    = (*Backend)(nil)
	_ driver.LeaderReader = (*Backend)(nil)
	_ driver.Checker      = (*Backend)(nil)
	_ driver.Ledgerer     = (*Backend)(nil)
)

// New returns a Backend for cfg. It does not contact the server; Check
// does.
func New(cfg Config) (*Backend, error) {
	cfg, err := cfg.resolved()
	if err != nil {
		return nil, err
	}
	return &Backend{c: cfg.Client.forElection(cfg.Name), ns: cfg.Namespace, name: cfg.Name, terms: cfg.Name + "-terms",
		timing: cfg.Timing, history: cfg.History, log: cfg.Logger.With("backend", "kube", "lease", cfg.Namespace+"/"+cfg.Name)}, nil
}

// Timing returns the lease timing in use.
func (b *Backend) Timing() election.Timing { return b.timing }

// LeaseName returns namespace/name of the election's Lease.
func (b *Backend) LeaseName() string { return b.ns + "/" + b.name }

// Check reads the election's Lease and its terms ConfigMap and starts a
// watch of the Lease, so that a wrong server, token or missing permission
// fails at start. A missing object is fine: the first candidate creates
// it.
func (b *Backend) Check(ctx context.Context) error {
	if _, err := b.c.get(ctx, leases, b.ns, b.name); err != nil && !isNotFound(err) {
		return fmt.Errorf("kube: check: %w", err)
	}
	if _, err := b.c.get(ctx, configMaps, b.ns, b.terms); err != nil && !isNotFound(err) {
		return fmt.Errorf("kube: check: %w", err)
	}
	// Without watch the backend still works, by polling: a handover
	// would wait for it. Fail at start instead.
	if err := b.c.checkWatch(ctx, leases.collection(b.ns), b.name); err != nil {
		return fmt.Errorf("kube: check: %w", err)
	}
	return nil
}

// observation is what a candidate saw of the Lease: nothing on the
// server expires it, so the candidate judges expiry on its own clock, as
// client-go does: a holder that has not changed the Lease for its
// leaseDurationSeconds since the candidate first saw that version is gone.
type observation struct {
	rv string
	at time.Time // local clock, monotonic
}

// expiry is when the Lease o, as observed, may be taken; the zero time if
// it may be taken now (no holder).
func (ob *observation) expiry(o *object, now time.Time) time.Time {
	if o.resourceVersion() != ob.rv {
		ob.rv, ob.at = o.resourceVersion(), now
	}
	if o.holder() == "" {
		return time.Time{}
	}
	return ob.at.Add(time.Duration(max(o.durationSeconds(), 1)) * time.Second)
}

// Acquire implements election.Backend. It takes the Lease when it has no
// holder or its holder let it expire, and otherwise watches it, so that a
// release is seen at once.
func (b *Backend) Acquire(ctx context.Context, id election.Identity) (election.Lease, error) {
	if id.ID == "" {
		return nil, errors.New("kube: Acquire: empty identity")
	}
	identity, err := json.Marshal(id)
	if err != nil {
		return nil, err
	}
	log := b.log.With("id", id.ID)
	retry := min(b.timing.RenewInterval, time.Second)
	var ob observation
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("kube: acquire: %w", context.Cause(ctx))
		}
		// A request hangs until the client's timeout on a network
		// that drops it: say so each StallBound meanwhile.
		stall := driver.WatchAttempt(ctx, driver.StallBound(b.timing), "kube: acquire "+b.ns+"/"+b.name, nil)
		l, wait, err := b.try(ctx, id.ID, identity, &ob, log)
		stall()
		if l != nil {
			return l, nil
		}
		if isDenied(err) {
			return nil, fmt.Errorf("kube: acquire: %w", err)
		}
		if err != nil && ctx.Err() == nil {
			// The Elector logs it (at Warn, at a bounded rate) and counts it.
			driver.ReportAttempt(ctx, fmt.Errorf("kube: acquire %s/%s: %w", b.ns, b.name, err))
			wait = retry
		} else if err == nil {
			driver.ReportAttempt(ctx, nil)
		}
		b.waitChange(ctx, ob.rv, wait)
	}
}

// try makes one attempt to take the Lease. It returns the term, or how
// long to wait for a change before the next attempt.
func (b *Backend) try(ctx context.Context, id string, identity []byte, ob *observation, log *slog.Logger) (*lease, time.Duration, error) {
	cur, err := b.c.get(ctx, leases, b.ns, b.name)
	now := time.Now()
	if err != nil && !isNotFound(err) {
		return nil, 0, err
	}
	if cur != nil {
		if exp := ob.expiry(cur, now); now.Before(exp) {
			return nil, exp.Sub(now), nil
		}
	}
	floor, err := b.floor(ctx)
	if err != nil {
		return nil, 0, err
	}
	var prev uint64
	var prevHolder string
	if cur != nil {
		prev, prevHolder = cur.token(), cur.holder()
	}
	token := max(prev, floor) + 1
	sent := time.Now()
	var took *object
	if cur == nil {
		o := leases.newObject(b.ns, b.name)
		o.take(id, b.timing.TTL, token, identity, sent)
		took, err = b.c.create(ctx, leases, b.ns, o)
	} else {
		cur.take(id, b.timing.TTL, token, identity, sent)
		took, err = b.c.update(ctx, leases, b.ns, cur)
	}
	if isConflict(err) {
		// An update's Conflict or a create's AlreadyExists (both 409):
		// another candidate was faster. Look again.
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	l := b.newLease(id, token, took, sent, log)
	// The token must stay above every token handed out, also once the
	// Lease is deleted: raise the floor before the term is handed out,
	// then check the Lease is still ours (a term whose Lease was deleted
	// meanwhile is never handed out, so its token may be given again).
	if err := b.raiseFloor(ctx, token); err != nil {
		l.abandon()
		return nil, 0, err
	}
	now2, err := b.c.get(ctx, leases, b.ns, b.name)
	if err != nil || now2.uid() != took.uid() || now2.holder() != id || now2.token() != token {
		l.abandon()
		if err == nil {
			err = errors.New("lease changed hands while the term started")
		}
		return nil, 0, err
	}
	log.Debug("lease acquired", "token", token, "resource_version", took.resourceVersion())
	l.announce(b, took, id, prevHolder, token)
	return l, 0, nil
}

// waitChange returns when the Lease changes after resourceVersion rv,
// after d, or when ctx is done.
func (b *Backend) waitChange(ctx context.Context, rv string, d time.Duration) {
	if d <= 0 {
		return
	}
	start := time.Now()
	_, err := b.c.watchOne(ctx, leases.collection(b.ns), b.name, rv, d)
	if err != nil && !errors.Is(err, errWatchEnded) && ctx.Err() == nil {
		// A watch that could not start (410 Gone, a refusal, a broken
		// connection) must not turn the wait into a busy loop.
		rest := d - time.Since(start)
		select {
		case <-ctx.Done():
		case <-time.After(min(rest, min(b.timing.RenewInterval, time.Second))):
		}
	}
}

// Leader implements driver.LeaderReader. Without a local observation it
// judges expiry from the Lease's renewTime on this host's clock, which is
// good enough to report, never to take the Lease.
func (b *Backend) Leader(ctx context.Context) (election.LeaderInfo, error) {
	o, err := b.c.get(ctx, leases, b.ns, b.name)
	if isNotFound(err) {
		return election.LeaderInfo{}, election.ErrNoLeader
	}
	if err != nil {
		return election.LeaderInfo{}, fmt.Errorf("kube: leader: %w", err)
	}
	holder := o.holder()
	if holder == "" || time.Since(o.timeField("renewTime")) > time.Duration(o.durationSeconds())*time.Second {
		return election.LeaderInfo{}, election.ErrNoLeader
	}
	info := election.LeaderInfo{Identity: election.Identity{ID: holder}, Since: o.timeField("acquireTime")}
	var id election.Identity
	if json.Unmarshal([]byte(o.annotation(annoIdentity)), &id) == nil && id.ID == holder {
		info.Identity, info.Token, info.Note = id, o.token(), o.annotation(annoNote)
	}
	return info, nil
}
