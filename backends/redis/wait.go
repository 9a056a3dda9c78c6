package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// ErrNotReplicated is wrapped by the error of a write that fewer than
// Config.WaitReplicas replicas acknowledged within WaitTimeout. The write
// was made on the primary, but a promotion may lose it: the operation
// failed (no lease, no renewal, no claim).
var ErrNotReplicated = errors.New("redis: write not acknowledged by enough replicas")

// script is a Lua script and its source (EVAL after NOSCRIPT).
type script struct {
	*goredis.Script
	src string
}

func newScript(src string) *script { return &script{Script: goredis.NewScript(src), src: src} }

// eval runs script s. Without WaitReplicas it is s.Run. With it, the
// script and a WAIT are sent together on one connection (a pipeline of
// the primary's client: WAIT counts the replicas that acknowledged that
// connection's writes), and a short count returns the script's answer
// with an error wrapping ErrNotReplicated: the caller decides what the
// answer still means. Any other error comes with a nil answer.
//
// Every script that writes, writes on each call that matters (a claim
// refused as already claimed rewrites the job's field in WAIT mode), so
// the connection's replication offset covers the earlier attempts of the
// same operation that wrote on other connections: replication is one
// stream.
func (b *Backend) eval(ctx context.Context, s *script, keys []string, args ...any) (any, error) {
	if b.waitN <= 0 {
		return s.Run(ctx, b.cli, keys, args...).Result()
	}
	var c *goredis.Client
	switch {
	case b.cluster != nil:
		var err error
		if c, err = b.cluster.MasterForKey(ctx, b.k.lease); err != nil {
			return nil, err
		}
	default:
		c = b.cli.(*goredis.Client)
	}
	run := func(sha bool) (*goredis.Cmd, *goredis.Cmd, error) {
		var sc *goredis.Cmd
		var wc *goredis.Cmd
		_, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			if sha {
				sc = p.EvalSha(ctx, s.Hash(), keys, args...)
			} else {
				sc = p.Eval(ctx, s.src, keys, args...)
			}
			wc = p.Do(ctx, "wait", b.waitN, b.waitTO.Milliseconds())
			return nil
		})
		return sc, wc, err
	}
	sc, wc, _ := run(true)
	if err := sc.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		sc, wc, _ = run(false)
	}
	res, err := sc.Result()
	if err != nil {
		if b.cluster != nil && (strings.HasPrefix(err.Error(), "MOVED ") || strings.HasPrefix(err.Error(), "ASK ")) {
			b.cluster.ReloadState(ctx)
		}
		return nil, err
	}
	n, err := wc.Int64()
	if err != nil {
		return res, fmt.Errorf("%w: WAIT %d %d: %w", ErrNotReplicated, b.waitN, b.waitTO.Milliseconds(), err)
	}
	if n < int64(b.waitN) {
		return res, fmt.Errorf("%w: %d of %d replicas acknowledged within %v", ErrNotReplicated, n, b.waitN, b.waitTO)
	}
	return res, nil
}
