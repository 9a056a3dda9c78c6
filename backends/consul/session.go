package consul

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/election"
)

// session is a Consul session being kept alive by Acquire while it waits.
type session struct {
	id    string
	sent  time.Time // when the last successful create or renew was sent
	check bool      // renew before the next lock attempt, to learn whether it is still alive
}

// keepSession makes sure s is a live session whose last create or renew
// was sent less than maxAge ago.
func (b *Backend) keepSession(ctx context.Context, s *session, id election.Identity, maxAge time.Duration) error {
	if s.id != "" && !s.check && time.Since(s.sent) < maxAge {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, b.requestTimeout())
	defer cancel()
	wo := (&api.WriteOptions{}).WithContext(rctx)
	sent := time.Now()
	if s.id != "" {
		e, _, err := b.cfg.Client.Session().Renew(s.id, wo)
		if err != nil {
			return fmt.Errorf("renew %s: %w", s.id, err)
		}
		if e != nil {
			s.sent, s.check = sent, false
			return nil
		}
		b.log.Debug("consul session gone while waiting, creating another", "identity", id.ID, "session", s.id)
		s.id = ""
	}
	name := b.cfg.SessionName
	if name == "" {
		name = "baton " + id.ID + " " + b.cfg.Key
	}
	// No health checks, so that a node marked failed (its agent died or
	// is unreachable) does not invalidate the session. Consul still
	// deletes it if the node is deregistered (force-leave, leave, catalog
	// deregister) or someone destroys it, while the holder may be cut off
	// and leading; the lock-delay, at least MinLockDelay, keeps the key
	// from the next candidate until the holder's deadline has passed.
	sid, _, err := b.cfg.Client.Session().CreateNoChecks(&api.SessionEntry{
		Name:      name,
		TTL:       b.cfg.Timing.TTL.String(),
		LockDelay: b.cfg.LockDelay,
		Behavior:  api.SessionBehaviorRelease,
	}, wo)
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	s.id, s.sent, s.check = sid, sent, false
	return nil
}

// destroy destroys a session Acquire created but is giving up, bounded by
// a short timeout of its own (ctx may be done already).
func (b *Backend) destroy(ctx context.Context, sid string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 500*time.Millisecond)
	defer cancel()
	if _, err := b.cfg.Client.Session().Destroy(sid, (&api.WriteOptions{}).WithContext(dctx)); err != nil {
		b.log.Debug("consul destroy session", "session", sid, "err", err)
	}
}
