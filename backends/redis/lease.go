package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
)

// lease is one term: the lease key holding "<token> <nonce> ...".
// driver.ManagedLease owns the renew loop and the local deadline; lease
// supplies the Redis calls.
type lease struct {
	*driver.ManagedLease
	b     *Backend
	token string // decimal
	nonce string // the Acquire call's, unique per term
}

// Release implements election.Lease.
func (l *lease) Release(ctx context.Context) error {
	if err := l.ManagedLease.Release(ctx); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// renewScript sets the key's TTL again if it holds the token. Returns
// {1, ""}, {-1, ""} when the key is gone, {-2, value} when another term
// holds it.
var renewScript = newScript(`
local v = redis.call('GET', KEYS[1])
if not v then return {-1, ''} end
if string.sub(v, 1, #ARGV[1]) ~= ARGV[1] then return {-2, v} end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, ''}
`)

// releaseScript deletes the key if it holds the nonce (and the token,
// unless ARGV[2] is empty) and publishes "released <token>".
var releaseScript = newScript(`
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local tok, nonce = string.match(v, '^(%d+) (%S+) ')
if nonce ~= ARGV[1] or (ARGV[2] ~= '' and tok ~= ARGV[2]) then return 0 end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[3], 'released ' .. tok)
return 1
`)

// renew sends one renewal and returns the TTL granted.
func (l *lease) renew(ctx context.Context) (time.Duration, error) {
	ans, err := l.b.eval(ctx, renewScript, []string{l.b.k.lease}, l.token+" ", l.b.timing.TTL.Milliseconds())
	if err != nil && !errors.Is(err, ErrNotReplicated) {
		return 0, fmt.Errorf("redis: renew %s: %w", l.b.k.lease, l.b.explain(err))
	}
	notReplicated := err
	res, _ := ans.([]any)
	if len(res) != 2 {
		return 0, fmt.Errorf("redis: renew %s: unexpected answer %v", l.b.k.lease, res)
	}
	code, _ := res[0].(int64)
	holder, _ := res[1].(string)
	switch code {
	case 1:
		if notReplicated != nil {
			// Renewed on the primary only: not a renewal. The term ends
			// at its local deadline unless a later one is acknowledged.
			return 0, fmt.Errorf("redis: renew %s: %w", l.b.k.lease, notReplicated)
		}
		return l.b.timing.TTL, nil
	case -1:
		return 0, election.LostError(fmt.Errorf("%w: %s does not exist (expired or deleted)", ErrKeyGone, l.b.k.lease))
	case -2:
		return 0, election.LostError(fmt.Errorf("%w: %s now holds token %s (want %s)", ErrKeyGone, l.b.k.lease, tokenOf(holder), l.token))
	}
	return 0, fmt.Errorf("redis: renew %s: unexpected answer %v", l.b.k.lease, res)
}

// check reads the key and returns the reason it is no longer this term's,
// or nil; err is a failed read.
func (l *lease) check(ctx context.Context) (reason, err error) {
	v, err := l.b.cli.Get(ctx, l.b.k.lease).Result()
	if err == goredis.Nil {
		return fmt.Errorf("%w: %s does not exist (expired or deleted)", ErrKeyGone, l.b.k.lease), nil
	}
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(v, l.token+" "+l.nonce+" ") {
		return fmt.Errorf("%w: %s now holds token %s (want %s)", ErrKeyGone, l.b.k.lease, tokenOf(v), l.token), nil
	}
	return nil, nil
}

// watch blocks until the key is gone or holds another term, and returns
// the reason; or until ctx is done. It reads the key on every message of
// the election's channel (another term's "acquired", after an operator
// deleted the key) and every RenewInterval/2 between renewals. A failed
// subscription or read returns an error wrapping driver.ErrRetryWatch.
func (l *lease) watch(ctx context.Context) error {
	ps := l.b.cli.Subscribe(ctx, l.b.k.events)
	defer ps.Close()
	stop := context.AfterFunc(ctx, func() { ps.Close() })
	defer stop()
	if _, err := ps.Receive(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: subscribe %s: %w", driver.ErrRetryWatch, l.b.k.events, err)
	}
	poll := max(l.b.timing.RenewInterval/2, 50*time.Millisecond)
	for {
		cctx, cancel := context.WithTimeout(ctx, poll)
		reason, err := l.check(cctx)
		cancel()
		if reason != nil {
			return reason
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("%w: read %s: %w", driver.ErrRetryWatch, l.b.k.lease, err)
		}
		if _, err := ps.ReceiveTimeout(ctx, poll); err != nil && !isTimeout(err) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w: receive on %s: %w", driver.ErrRetryWatch, l.b.k.events, err)
		}
	}
}

// release deletes the key if it is still this term's and wakes the
// followers.
func (l *lease) release(ctx context.Context) error {
	if _, err := l.b.eval(ctx, releaseScript, []string{l.b.k.lease}, l.nonce, l.token, l.b.k.events); err != nil {
		if errors.Is(err, ErrNotReplicated) {
			return fmt.Errorf("delete %s: deleted on the primary, but a promotion may bring the lease back until it expires: %w", l.b.k.lease, err)
		}
		return fmt.Errorf("delete %s: %w", l.b.k.lease, l.b.explain(err))
	}
	return nil
}

// tokenOf returns the token at the start of a lease key's value.
func tokenOf(v string) string {
	tok, _, _ := strings.Cut(v, " ")
	return tok
}
