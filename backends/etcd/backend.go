package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
)

var (
	_ election.Backend    = (*Backend)(nil)
	_ driver.LeaderReader = (*Backend)(nil)
	_ driver.Checker      = (*Backend)(nil)
)

// cleanupTimeout bounds the revoke of a lease that Acquire gives up on. If
// the server cannot be told in time, the lease (and its key) expires after
// its TTL.
const cleanupTimeout = 500 * time.Millisecond

// Backend is an election.Backend, LeaderReader and Checker on etcd: one
// election under one key prefix. Create it with New. It may be shared by
// goroutines; a process normally runs one candidate per election.
type Backend struct {
	cli     *clientv3.Client
	owned   bool   // cli was dialed by New from Config.Endpoints: Close closes it
	prefix  string // Config.Prefix
	keys    string // prefix + "/": the candidates' keys
	timing  election.Timing
	history int // runs per job the Ledger keeps
	txnOps  int // the server's --max-txn-ops (Config.MaxTxnOps)
	log     *slog.Logger
}

// New copies cfg, applies defaults, validates it and returns a Backend. It
// does not touch the server: a client dialed from Endpoints connects in
// the background.
func New(cfg Config) (*Backend, error) {
	cfg, err := cfg.resolved()
	if err != nil {
		return nil, err
	}
	owned := false
	if cfg.Client == nil {
		cfg.Client, err = clientv3.New(clientv3.Config{
			Endpoints:            cfg.Endpoints,
			DialTimeout:          5 * time.Second,
			DialKeepAliveTime:    5 * time.Second,
			DialKeepAliveTimeout: 2 * time.Second,
			Logger:               zap.NewNop(), // the client's own logger stays silent
		})
		if err != nil {
			return nil, fmt.Errorf("etcd: Endpoints %q: %w", cfg.Endpoints, err)
		}
		owned = true
	}
	return &Backend{
		cli:     cfg.Client,
		owned:   owned,
		prefix:  cfg.Prefix,
		keys:    cfg.Prefix + "/",
		timing:  cfg.Timing,
		history: cfg.History,
		txnOps:  cfg.MaxTxnOps,
		log:     cfg.Logger.With("election", cfg.Prefix),
	}, nil
}

// Close closes the client New dialed from Config.Endpoints; a
// Config.Client stays open, the caller's to close. Release every lease
// first.
func (b *Backend) Close() error {
	if !b.owned {
		return nil
	}
	return b.cli.Close()
}

// Timing returns the lease timing in use, defaults applied.
func (b *Backend) Timing() election.Timing { return b.timing }

// Acquire implements election.Backend. It opens the keepalive stream of a
// new lease (with a password, the server checks it then), grants a fresh
// etcd lease, puts the key PREFIX/<lease id in hex> with the JSON of id
// under it, and waits until every key of the election created before it
// is gone. The lease is kept alive from the start; if it ends while
// campaigning, Acquire revokes what is left and returns an error wrapping
// ErrCampaignLost. When ctx is done it revokes the lease (bounded by a
// fresh short timeout) and returns an error wrapping ctx.Err().
//
// Before returning a lease it checks that its key still exists under its
// lease and that the local deadline has not passed (etcd#19597).
func (b *Backend) Acquire(ctx context.Context, id election.Identity) (election.Lease, error) {
	val, err := json.Marshal(id)
	if err != nil {
		return nil, fmt.Errorf("etcd: acquire: encode identity: %w", err)
	}
	// The keepalive stream is opened first: with a user and password,
	// opening it waits for the server to check the password, which must
	// not count against the lease's TTL.
	//
	// The client waits for a connection to come up for as long as ctx
	// lasts: while it does, the watch reports each StallBound why the
	// server does not answer.
	stall := driver.WatchAttempt(ctx, driver.StallBound(b.timing), "etcd: acquire "+b.prefix, b.probe)
	defer stall()
	ka := newKeeper(b.cli)
	if err := ka.open(ctx); err != nil {
		ka.close()
		return nil, b.acquireErr(ctx, "open keepalive stream", err)
	}
	sent := time.Now()
	g, err := b.cli.Grant(ctx, int64(b.timing.TTL/time.Second))
	if err != nil {
		ka.close()
		return nil, b.acquireErr(ctx, "grant lease", err)
	}
	l := &lease{b: b, ka: ka, id: g.ID, key: fmt.Sprintf("%s%x", b.keys, g.ID)}
	log := b.log.With("key", l.key)
	ka.log = log // before the renew loop starts, which alone reads it

	// The put is bounded by the lease's TTL: past it the server has let
	// the lease expire, and an answer lost on the way (a cut network)
	// would otherwise hold the campaign until gRPC gives up on the
	// connection.
	pctx, pcancel := context.WithDeadline(ctx, sent.Add(b.timing.TTL))
	put, err := b.cli.Txn(pctx).
		If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", 0)).
		Then(clientv3.OpPut(l.key, string(val), clientv3.WithLease(g.ID))).
		Commit()
	expired := pctx.Err() != nil && ctx.Err() == nil
	pcancel()
	if err == nil && !put.Succeeded {
		err = fmt.Errorf("key %s exists already", l.key)
	}
	if err != nil {
		b.revoke(g.ID, log)
		ka.close()
		if expired {
			return nil, fmt.Errorf("etcd: acquire %s: %w: %w", b.prefix, ErrCampaignLost,
				election.LostError(fmt.Errorf("no answer to the put of %s within the TTL %v: %w", l.key, b.timing.TTL, err)))
		}
		return nil, b.acquireErr(ctx, "put key", err)
	}
	stall()
	driver.ReportAttempt(ctx, nil) // a candidate now, in the queue
	l.rev = put.Header.Revision
	l.ManagedLease = driver.NewManagedLease(driver.ManagedLeaseConfig{
		Timing:  b.timing,
		Sent:    sent,
		Renew:   l.renew,
		Watch:   l.watch,
		Release: l.release,
		Logger:  log,
	})
	l.SetToken(uint64(l.rev))
	log.Debug("campaigning", "token", l.rev)

	if err := b.campaign(ctx, l); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		if rerr := l.Release(rctx); rerr != nil {
			log.Warn("revoking lease after failed campaign", "err", rerr)
		}
		cancel()
		return nil, err
	}
	log.Debug("won election", "token", l.rev)
	return l, nil
}

// campaign waits until l's key has the lowest create revision of the
// election's candidates, then checks that l still holds (etcd#19597).
func (b *Backend) campaign(ctx context.Context, l *lease) error {
	cctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-l.Done():
			cancel()
		case <-stop:
		}
	})
	defer func() {
		close(stop)
		wg.Wait()
		cancel()
	}()
	fail := func(what string, err error) error {
		select {
		case <-l.Done():
			return fmt.Errorf("%w: %w", ErrCampaignLost, l.Err())
		default:
		}
		return b.acquireErr(ctx, what, err)
	}

	for {
		cands, err := b.candidates(cctx, false)
		if err != nil {
			return fail("list earlier candidates", err)
		}
		var prev *candidate // created last before l
		for i, c := range cands {
			if c.kv.CreateRevision < l.rev && (prev == nil || c.kv.CreateRevision > prev.kv.CreateRevision) {
				prev = &cands[i]
			}
		}
		if prev == nil {
			break
		}
		if err := waitDelete(cctx, b.cli, string(prev.kv.Key), prev.seen+1); err != nil {
			return fail("wait for earlier candidate", err)
		}
	}

	resp, err := b.cli.Get(cctx, l.key)
	if err != nil {
		return fail("check own key", err)
	}
	if reason := l.check(resp.Kvs); reason != nil {
		l.Lose(reason)
		return fail("check own key", reason)
	}
	select {
	case <-l.Done():
		return fail("check lease", l.Err())
	default:
	}
	if !time.Now().Before(l.Deadline()) {
		l.Lose(errors.New("local deadline passed while campaigning"))
		return fail("check lease", l.Err())
	}
	return nil
}

// candidatePage is how many keys one read of the candidates returns.
const candidatePage = 128

// candidate is a key of the election and the revision it was read at.
type candidate struct {
	kv   *mvccpb.KeyValue
	seen int64
}

// candidates reads the election's candidates: the keys directly under
// PREFIX/, whose name after it has no slash (PREFIX/<lease id>), in key
// order, with their values if values is set. Keys further down belong to
// nested elections (PREFIX/eu/<lease id>) and to their ledgers
// (PREFIX/eu-ledger/...): each such subtree is skipped with one read, so
// that neither takes part in this election. Reads are not pinned to one
// revision: a key missing from the result was deleted, and no key created
// later can have a lower create revision than one read.
func (b *Backend) candidates(ctx context.Context, values bool) ([]candidate, error) {
	end := clientv3.GetPrefixRangeEnd(b.keys)
	opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(candidatePage)}
	if !values {
		opts = append(opts, clientv3.WithKeysOnly())
	}
	var cands []candidate
	for start := b.keys; ; {
		resp, err := b.cli.Get(ctx, start, opts...)
		if err != nil {
			return nil, err
		}
		more := resp.More
		for _, kv := range resp.Kvs {
			name := string(kv.Key[len(b.keys):])
			if i := strings.IndexByte(name, '/'); i >= 0 {
				start = b.keys + name[:i] + "0" // '0' follows '/': past the subtree
				more = true
				break
			}
			cands = append(cands, candidate{kv: kv, seen: resp.Header.Revision})
			start = string(kv.Key) + "\x00"
		}
		if !more {
			return cands, nil
		}
	}
}

// waitDelete blocks until key is deleted at or after revision rev. It
// returns nil also when the watch was interrupted (compaction, leader
// change), so that the caller looks again.
func waitDelete(ctx context.Context, cli *clientv3.Client, key string, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range cli.Watch(wctx, key, clientv3.WithRev(rev)) {
		if wr.Err() != nil {
			break
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return nil
			}
		}
	}
	return ctx.Err()
}

// probe says why the server does not answer an attempt to acquire: the
// connection's error, at once, when no endpoint can be connected to.
func (b *Backend) probe(ctx context.Context) error {
	if err := b.reach(ctx); err != nil {
		return fmt.Errorf("etcd: acquire %s: %w", b.prefix, err)
	}
	return nil
}

// acquireErr wraps err from Acquire, as ctx's error when ctx is done.
func (b *Backend) acquireErr(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("etcd: acquire %s: %w", b.prefix, ctx.Err())
	}
	return fmt.Errorf("etcd: acquire %s: %s: %w", b.prefix, what, err)
}

// revoke revokes a lease Acquire gives up on, with a fresh short context.
func (b *Backend) revoke(id clientv3.LeaseID, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if err := revokeLease(ctx, b.cli, id); err != nil {
		log.Warn("revoking lease after failed campaign", "err", err)
	}
}
