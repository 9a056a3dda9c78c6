package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
)

// aclCommands are every command the Backend sends, or its scripts call:
// what an ACL user needs, besides AUTH and HELLO, which every user may
// send.
var aclCommands = []string{
	"ping", "evalsha", "eval", "subscribe", "unsubscribe",
	"get", "set", "pexpire", "pttl", "incr", "del", "publish",
	"hget", "hset", "hmget", "hdel", "lpush", "ltrim", "lrange", "lset",
	"zadd", "zrem", "zrangebylex", // the control store
	"wait", "cluster|slots", // WaitReplicas; a Cluster client's routing
}

// ACL returns the least-privilege ACL rules for this election's user, to
// follow "ACL SETUSER NAME on >PASSWORD": its keys and channel, and the
// commands the Backend uses, nothing else.
func (b *Backend) ACL() string { return ACLRules(b.election) }

// ACLRules is Backend.ACL for the election e.
func ACLRules(e string) string {
	p := "baton:{" + e + "}:*"
	return "resetkeys resetchannels -@all ~" + p + " &" + p + " +" + strings.Join(aclCommands, " +")
}

// checkScript calls, on a probe key of the election, every command the
// Backend's scripts call, and deletes the probe: the server checks the
// user's permission for each command and key. It returns the first error.
var checkScript = newScript(`
local err = nil
local function c(cmd, ...)
  local r = redis.pcall(cmd, ...)
  if type(r) == 'table' and r.err and not err then err = r.err .. ' (' .. cmd .. ' on ' .. KEYS[1] .. ')' end
end
local k = KEYS[1]
c('SET', k, '0', 'PX', 5000)
c('INCR', k)
c('PEXPIRE', k, 5000)
c('PTTL', k)
c('GET', k)
c('DEL', k)
c('HSET', k, 'f', 'v')
c('HGET', k, 'f')
c('HMGET', k, 'f')
c('HDEL', k, 'f')
c('DEL', k)
c('ZADD', k, 0, 'm')
c('ZRANGEBYLEX', k, '-', '+')
c('ZREM', k, 'm')
c('DEL', k)
c('LPUSH', k, 'v')
c('LSET', k, 0, 'w')
c('LTRIM', k, 0, 0)
c('LRANGE', k, 0, -1)
c('DEL', k)
c('PUBLISH', ARGV[1], 'check')
redis.pcall('DEL', k)
if err then return redis.error_reply(err) end
return 1
`)

// Check implements driver.Checker. It blocks until answered or ctx is
// done, and leaves nothing behind. It sends a PING (the connection, TLS
// and password are checked when the client connects), subscribes to the
// election's channel, and runs a script that calls every command the
// Backend's scripts use on a probe key of the election
// (baton:{ELECTION}:check, deleted at once); with WaitReplicas, followed
// by a WAIT, which fails if too few replicas acknowledge it. Each failure
// names the servers (Addr, the Sentinels' primary, or the Cluster) and
// what the server wants.
func (b *Backend) Check(ctx context.Context) error {
	if err := b.cli.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: check %s: ping %s: %w", b.election, b.where, b.explain(err))
	}
	ps := b.cli.Subscribe(ctx, b.k.events)
	_, err := ps.Receive(ctx)
	ps.Close()
	if err != nil {
		return fmt.Errorf("redis: check %s: subscribe to %s at %s: %w", b.election, b.k.events, b.where, b.explain(err))
	}
	if _, err := b.eval(ctx, checkScript, []string{b.k.check}, b.k.events); err != nil {
		return fmt.Errorf("redis: check %s: write probe at %s on %s: %w", b.election, b.where, b.k.check, b.explain(err))
	}
	return nil
}

// explain adds to an error what the server or the network wants.
func (b *Backend) explain(err error) error {
	if err == nil {
		return nil
	}
	who := "the default user"
	if b.user != "" {
		who = fmt.Sprintf("user %q", b.user)
	}
	msg := err.Error()
	var op *net.OpError
	switch {
	case strings.Contains(msg, "NOPERM") || strings.Contains(msg, "script can't run this command") || strings.Contains(msg, "script can't access"):
		return fmt.Errorf("%w: %s lacks a permission; it needs: ACL SETUSER NAME on >PASSWORD %s", err, who, b.ACL())
	case strings.Contains(msg, "WRONGPASS"):
		return fmt.Errorf("%w: wrong Username or Password for %s at %s", err, who, b.where)
	case strings.Contains(msg, "NOAUTH"):
		return fmt.Errorf("%w: the server at %s requires a Password (and a Username for an ACL user)", err, b.where)
	case strings.Contains(msg, "tls:") || strings.Contains(msg, "x509:"):
		return fmt.Errorf("cannot connect to %s: TLS handshake failed: %w", b.where, err)
	case errors.As(err, &op) && op.Op == "dial":
		return fmt.Errorf("cannot connect to %s: %w", b.where, err)
	case isTimeout(err) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("no answer from %s: %w", b.where, err)
	}
	return err
}
