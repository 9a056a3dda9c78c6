package redis

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
)

var (
	_ election.Backend    = (*Backend)(nil)
	_ driver.LeaderReader = (*Backend)(nil)
	_ driver.Checker      = (*Backend)(nil)
)

// cleanupTimeout bounds the release of a lease that Acquire gives up on.
// If the server cannot be told in time, the key expires after its TTL.
const cleanupTimeout = 500 * time.Millisecond

// keys are the names of an election's keys and channel. Every one holds
// "{ELECTION}", so all hash to one slot.
type keys struct {
	lease  string // baton:{E}:lease   "<token> <nonce> <identity JSON>", PX TTL
	token  string // baton:{E}:token   counter, INCR per term, never reset
	events string // baton:{E}:events  pub/sub channel: "acquired <token>", "released <token>"
	last   string // baton:{E}:last    hash job -> newest claimed tick
	runs   string // baton:{E}:runs:   + job: list of run entries, newest first
	check  string // baton:{E}:check   probe key of Check, never left behind
	ctl    string // baton:{E}:ctl     hash key -> value: the control store
	ctlVer string // baton:{E}:ctlver  hash key -> version
	ctlIdx string // baton:{E}:ctlidx  sorted set of the keys (all scores 0), for listing by prefix
	ctlSeq string // baton:{E}:ctlseq  counter of versions, never reset
}

func keysOf(e string) keys {
	p := "baton:{" + e + "}:"
	return keys{lease: p + "lease", token: p + "token", events: p + "events", last: p + "last", runs: p + "runs:", check: p + "check",
		ctl: p + "ctl", ctlVer: p + "ctlver", ctlIdx: p + "ctlidx", ctlSeq: p + "ctlseq"}
}

// Backend is an election.Backend, LeaderReader and Checker on Redis: one
// election, under keys baton:{ELECTION}:*. Create it with New and Close
// it when done. It may be shared by goroutines; a process normally runs
// one candidate per election.
type Backend struct {
	cli      goredis.UniversalClient
	cluster  *goredis.ClusterClient // set in Cluster mode
	where    string                 // the servers, for messages
	user     string
	election string
	k        keys
	timing   election.Timing
	history  int
	batch    int
	waitN    int           // Config.WaitReplicas
	waitTO   time.Duration // Config.WaitTimeout
	log      *slog.Logger
}

// New copies cfg, applies defaults, validates it and returns a Backend
// with a client of its own: a plain client of Addr, a Sentinel failover
// client of MasterName, or a Cluster client. It does not touch the
// servers: call Check to fail fast on a wrong address, password or ACL.
func New(cfg Config) (*Backend, error) {
	cfg, err := cfg.resolved()
	if err != nil {
		return nil, err
	}
	var tc *tls.Config
	if cfg.TLS != nil {
		tc = cfg.TLS.Clone()
		if tc.ServerName == "" && cfg.Addr != "" {
			if host, _, err := net.SplitHostPort(cfg.Addr); err == nil {
				tc.ServerName = host
			}
		}
	}
	// A WAIT may keep a connection's answer for WaitTimeout.
	readTimeout := max(3*time.Second, cfg.WaitTimeout+time.Second)
	// The options of all three clients; each takes the fields it has.
	opts := &goredis.UniversalOptions{
		MasterName:            cfg.MasterName,
		SentinelUsername:      cfg.SentinelUsername,
		SentinelPassword:      cfg.SentinelPassword,
		Dialer:                cfg.Dialer,
		Username:              cfg.Username,
		Password:              cfg.Password,
		TLSConfig:             tc,
		DialTimeout:           cfg.DialTimeout,
		ReadTimeout:           readTimeout,
		ContextTimeoutEnabled: true,
		// No retries inside the client: a script retried after a lost
		// answer may have run already. Acquire, the renew loop and the
		// Host retry on their own terms.
		MaxRetries: -1,
		// Cluster only: MOVED and ASK must be followed; a command may then
		// be sent again after a network error too. Every script is safe
		// to send twice: acquire by its nonce, a claim refused as
		// ErrTickClaimed is found in History by the Host.
		MaxRedirects:    3,
		DisableIdentity: true,
		// Not for the Sentinel failover client, which has no such option.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	b := &Backend{
		user:     cfg.Username,
		election: cfg.Election,
		k:        keysOf(cfg.Election),
		timing:   cfg.Timing,
		history:  cfg.History,
		batch:    cfg.MaxBatch,
		waitN:    cfg.WaitReplicas,
		waitTO:   cfg.WaitTimeout,
		log:      cfg.Logger.With("election", cfg.Election),
	}
	switch {
	case len(cfg.SentinelAddrs) > 0:
		b.where = fmt.Sprintf("primary %s of Sentinels %s", cfg.MasterName, strings.Join(cfg.SentinelAddrs, ","))
		opts.Addrs = cfg.SentinelAddrs
		b.cli = goredis.NewFailoverClient(opts.Failover())
	case len(cfg.ClusterAddrs) > 0:
		b.where = "cluster " + strings.Join(cfg.ClusterAddrs, ",")
		opts.Addrs = cfg.ClusterAddrs
		b.cluster = goredis.NewClusterClient(opts.Cluster())
		b.cli = b.cluster
	default:
		b.where = cfg.Addr
		opts.Addrs = []string{cfg.Addr}
		b.cli = goredis.NewClient(opts.Simple())
	}
	return b, nil
}

// Close closes the Backend's connections. Release every lease first.
func (b *Backend) Close() error { return b.cli.Close() }

// Timing returns the lease timing in use, defaults applied.
func (b *Backend) Timing() election.Timing { return b.timing }

// Servers describes where the election lives, for messages: Addr, the
// Sentinels' primary, or the Cluster's seed nodes.
func (b *Backend) Servers() string { return b.where }

// LeaseKey is the key holding the election's lease, for operators:
// redis-cli GET 'baton:{ELECTION}:lease'.
func (b *Backend) LeaseKey() string { return b.k.lease }

// acquireScript takes the lease if it is free: the token is INCRed only
// then, so tokens grow by one per term. A key holding this attempt's
// nonce (an earlier call whose answer was lost) is this attempt's: its
// TTL is set again. Returns {1, token} or {0, PTTL of the holder's key}.
var acquireScript = newScript(`
local v = redis.call('GET', KEYS[1])
if v then
  local tok, nonce = string.match(v, '^(%d+) (%S+) ')
  if nonce == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return {1, tok}
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
local tok = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], tok .. ' ' .. ARGV[1] .. ' ' .. ARGV[2], 'PX', ARGV[3])
redis.call('PUBLISH', ARGV[4], 'acquired ' .. tok)
return {1, tostring(tok)}
`)

// Acquire implements election.Backend. It subscribes to the election's
// channel first, then runs the acquire script; while another term holds
// the key it waits for a "released" message, the key's PTTL or
// RenewInterval, whichever comes first, and tries again. Failed
// attempts are retried until ctx is done; then a lease an attempt may
// have set is released (bounded by a fresh short timeout) and the error
// wraps ctx.Err().
func (b *Backend) Acquire(ctx context.Context, id election.Identity) (election.Lease, error) {
	val, err := json.Marshal(id)
	if err != nil {
		return nil, fmt.Errorf("redis: acquire: encode identity: %w", err)
	}
	var nb [12]byte
	_, _ = rand.Read(nb[:])
	nonce := hex.EncodeToString(nb[:])
	log := b.log.With("nonce", nonce)

	// Subscribe before the first attempt: a release between a refused
	// attempt and the wait is not missed. Subscribing is given
	// RenewInterval at most: a subscription connection that hangs (dialed
	// to a server a partition has cut off, as a Sentinel client's can be
	// around a promotion) must not hold up the first attempt, which goes
	// through the pool; later waits resubscribe.
	sctx, scancel := context.WithTimeout(ctx, b.timing.RenewInterval)
	ps := b.cli.Subscribe(sctx, b.k.events)
	defer ps.Close()
	stop := context.AfterFunc(ctx, func() { ps.Close() }) // ends a wait at once
	defer stop()
	if _, err := ps.Receive(sctx); err != nil && ctx.Err() == nil {
		log.Debug("subscribe failed or slow, polling", "err", err)
	}
	scancel()

	ttlms := b.timing.TTL.Milliseconds()
	retry := max(min(b.timing.RenewInterval/4, time.Second), 10*time.Millisecond)
	for {
		sent := time.Now()
		actx, cancel := context.WithDeadline(ctx, sent.Add(b.timing.TTL-b.timing.SafetyMargin))
		stall := driver.WatchAttempt(ctx, driver.StallBound(b.timing), "redis: acquire "+b.election, nil)
		ans, err := b.eval(actx, acquireScript, []string{b.k.lease, b.k.token}, nonce, val, ttlms, b.k.events)
		stall()
		cancel()
		res, _ := ans.([]any)
		wait := b.timing.RenewInterval
		switch {
		case ctx.Err() != nil:
			b.abandon(nonce, log)
			return nil, fmt.Errorf("redis: acquire %s: %w", b.election, ctx.Err())
		case err != nil && !errors.Is(err, ErrNotReplicated):
			// The Elector logs it (at Warn, at a bounded rate) and counts it.
			driver.ReportAttempt(ctx, fmt.Errorf("redis: acquire %s: %w", b.election, b.explain(err)))
			wait = retry
		default:
			won, n, perr := parsePair(res)
			if perr != nil {
				return nil, fmt.Errorf("redis: acquire %s: %w", b.election, perr)
			}
			if won && err != nil {
				// Set on the primary only: a promotion may lose it, so it
				// is not a term. Give it up; try again later.
				driver.ReportAttempt(ctx, fmt.Errorf("redis: acquire %s: acquired on the primary but not replicated, given up: %w", b.election, err))
				b.abandon(nonce, log)
				wait = retry
				break
			}
			driver.ReportAttempt(ctx, nil)
			if won {
				if l := b.newLease(uint64(n), nonce, sent, log); l != nil {
					return l, nil
				}
				continue // the answer came too late: the term has no time left
			}
			if n > 0 {
				wait = min(wait, time.Duration(n)*time.Millisecond+time.Millisecond)
			}
		}
		b.wake(ctx, ps, wait, retry)
		if ctx.Err() != nil {
			b.abandon(nonce, log)
			return nil, fmt.Errorf("redis: acquire %s: %w", b.election, ctx.Err())
		}
	}
}

// newLease starts the term of token, or gives it up and returns nil if
// its local deadline has passed already.
func (b *Backend) newLease(token uint64, nonce string, sent time.Time, log *slog.Logger) *lease {
	tok := strconv.FormatUint(token, 10)
	l := &lease{b: b, token: tok, nonce: nonce}
	log = log.With("token", token)
	l.ManagedLease = driver.NewManagedLease(driver.ManagedLeaseConfig{
		Timing:  b.timing,
		Sent:    sent,
		Renew:   l.renew,
		Watch:   l.watch,
		Release: l.release,
		Logger:  log,
	})
	l.SetToken(token)
	if !time.Now().Before(l.Deadline()) {
		log.Warn("acquired lease past its local deadline, giving it up")
		rctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		_ = l.Release(rctx)
		cancel()
		return nil
	}
	log.Debug("won election")
	return l
}

// wake blocks until a message on the election's channel, d has passed,
// or ctx is done. After a pub/sub error (the subscription is made again
// by the next call) it waits for retry at most.
func (b *Backend) wake(ctx context.Context, ps *goredis.PubSub, d, retry time.Duration) {
	start := time.Now()
	_, err := ps.ReceiveTimeout(ctx, d)
	if err == nil || ctx.Err() != nil || isTimeout(err) {
		return
	}
	if left := min(d, retry) - time.Since(start); left > 0 {
		t := time.NewTimer(left)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

// abandon releases a lease an attempt of Acquire may have set, with a
// fresh short timeout.
func (b *Backend) abandon(nonce string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if err := releaseScript.Run(ctx, b.cli, []string{b.k.lease}, nonce, "", b.k.events).Err(); err != nil { // not waited for: the key expires anyway
		log.Warn("releasing the lease of an abandoned campaign", "err", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// parsePair parses a script's {flag, number} answer (the number may come
// as a string).
func parsePair(res []any) (bool, int64, error) {
	if len(res) != 2 {
		return false, 0, fmt.Errorf("unexpected script answer %v", res)
	}
	flag, ok := res[0].(int64)
	if !ok {
		return false, 0, fmt.Errorf("unexpected script answer %v", res)
	}
	switch n := res[1].(type) {
	case int64:
		return flag == 1, n, nil
	case string:
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			return false, 0, fmt.Errorf("unexpected script answer %v", res)
		}
		return flag == 1, v, nil
	}
	return false, 0, fmt.Errorf("unexpected script answer %v", res)
}
