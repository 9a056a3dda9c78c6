// Package redisfence is the Redis guard of package fence: one Lua script
// that checks the fence of (election, resource), advances it, and performs
// the write, so that no other command runs between the check and the
// write (a check then a SET are two steps, and a stale writer can run
// between them).
//
// The fence is a hash at Prefix + election + ":" + resource with the
// fields epoch and token. In Redis Cluster, the fence key and the key
// written must hash to one slot: give the resource name the key's hash
// tag, as in resource "{invoice:42}" for key "{invoice:42}:status".
//
// A fence in Redis lives as long as its key: a flushed or replaced Redis
// loses the fences with the data, and a stale write is then accepted once
// (as the first write of a new fence). Keep the fence where the data is.
package redisfence

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/fence"
)

// DefaultPrefix starts the fence keys when Guard.Prefix is empty.
const DefaultPrefix = "baton:fence:"

//go:embed guard.lua
var guardLua string

var script = redis.NewScript(guardLua)

// Guard is the Redis guard of one election. It is safe for concurrent use.
type Guard struct {
	Client   redis.Scripter // a *redis.Client, *redis.ClusterClient, redis.UniversalClient ...
	Election string         // the election whose tokens it accepts
	Prefix   string         // DefaultPrefix when empty
}

// FenceKey returns the key of the fence of resource.
func (g *Guard) FenceKey(resource string) string {
	p := g.Prefix
	if p == "" {
		p = DefaultPrefix
	}
	return p + g.Election + ":" + resource
}

// Set writes value to key (with ttl when > 0) if tok is not older than
// the fence of resource, and advances the fence, in one script. A stale
// token returns a *fence.StaleError and writes nothing.
func (g *Guard) Set(ctx context.Context, resource string, tok fence.Token, key, value string, ttl time.Duration) error {
	if ttl < 0 || (ttl > 0 && ttl < time.Millisecond) {
		return fmt.Errorf("%w: ttl %v: want 0 (none) or 1ms and more", fence.ErrInvalid, ttl)
	}
	return g.run(ctx, resource, tok, []string{key}, "set", value, strconv.FormatInt(ttl.Milliseconds(), 10))
}

// HSet sets field of the hash at key to value if tok is not older than
// the fence of resource, and advances the fence, in one script: the owner
// check and the write are one step.
func (g *Guard) HSet(ctx context.Context, resource string, tok fence.Token, key, field, value string) error {
	return g.run(ctx, resource, tok, []string{key}, "hset", field, value)
}

// Advance checks and advances the fence of resource and writes nothing:
// a fence.Store for fence.Middleware.
func (g *Guard) Advance(ctx context.Context, resource string, tok fence.Token) error {
	return g.run(ctx, resource, tok, nil, "none")
}

// Read returns the fence of resource, and false when there is none.
func (g *Guard) Read(ctx context.Context, resource string) (fence.Token, bool, error) {
	c, ok := g.Client.(redis.Cmdable)
	if !ok {
		return fence.Token{}, false, fmt.Errorf("%w: Guard.Client %T cannot run HMGET", fence.ErrInvalid, g.Client)
	}
	v, err := c.HMGet(ctx, g.FenceKey(resource), "epoch", "token").Result()
	if err != nil {
		return fence.Token{}, false, fmt.Errorf("fence: read resource %q: %w", resource, err)
	}
	if v[0] == nil || v[1] == nil {
		return fence.Token{}, false, nil
	}
	t, err := parse(g.Election, v[0], v[1])
	return t, err == nil, err
}

// Reset deletes the fence of resource: the operator's remedy when the
// election's token counter started over below it without a new epoch.
// Make sure the old term's processes are gone first.
func (g *Guard) Reset(ctx context.Context, resource string) error {
	c, ok := g.Client.(redis.Cmdable)
	if !ok {
		return fmt.Errorf("%w: Guard.Client %T cannot run DEL", fence.ErrInvalid, g.Client)
	}
	if err := c.Del(ctx, g.FenceKey(resource)).Err(); err != nil {
		return fmt.Errorf("fence: reset resource %q: %w", resource, err)
	}
	return nil
}

func (g *Guard) run(ctx context.Context, resource string, tok fence.Token, keys []string, mode string, args ...string) error {
	if err := fence.Check(g.Election, resource, tok); err != nil {
		return err
	}
	argv := []any{strconv.FormatUint(tok.Epoch, 10), strconv.FormatUint(tok.N, 10), mode}
	for _, a := range args {
		argv = append(argv, a)
	}
	res, err := script.Run(ctx, g.Client, append([]string{g.FenceKey(resource)}, keys...), argv...).Slice()
	if err != nil {
		return fmt.Errorf("fence: guarded %s of resource %q: %w", mode, resource, err)
	}
	if len(res) == 3 && res[0] == int64(0) {
		f, err := parse(g.Election, res[1], res[2])
		if err != nil {
			return err
		}
		return &fence.StaleError{Resource: resource, Token: tok, Fence: f}
	}
	return nil
}

func parse(election string, epoch, token any) (fence.Token, error) {
	e, err1 := strconv.ParseUint(fmt.Sprint(epoch), 10, 64)
	n, err2 := strconv.ParseUint(fmt.Sprint(token), 10, 64)
	if err1 != nil || err2 != nil {
		return fence.Token{}, fmt.Errorf("fence: fence key holds epoch %v token %v: not decimal", epoch, token)
	}
	return fence.Token{Election: election, Epoch: e, N: n}, nil
}
