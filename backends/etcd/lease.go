package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
)

// lease is one candidacy and, once Acquire returns it, one term: an etcd
// lease with the candidate's key under it. driver.ManagedLease owns the
// renew loop and the local deadline; lease supplies the etcd calls.
type lease struct {
	*driver.ManagedLease
	b   *Backend
	ka  *keeper // the lease's keepalive stream
	id  clientv3.LeaseID
	key string
	rev int64 // the key's create revision: the fencing token
}

// Release implements election.Lease: it ends the term, stops renewing and
// revokes the etcd lease, which deletes the key at once, then closes the
// keepalive stream.
func (l *lease) Release(ctx context.Context) error {
	err := l.ManagedLease.Release(ctx)
	l.ka.close()
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	return nil
}

// renew sends one keepalive for the lease on its keepalive stream and
// returns the TTL granted.
func (l *lease) renew(ctx context.Context) (time.Duration, error) {
	ttl, err := l.ka.keepAlive(ctx, l.id)
	if err == nil && ttl <= 0 {
		err = rpctypes.ErrLeaseNotFound // the server's answer for a lease it does not know
	}
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return 0, election.LostError(fmt.Errorf("%w: lease %x", ErrLeaseExpired, l.id))
	}
	if err != nil {
		return 0, fmt.Errorf("etcd: keepalive lease %x: %w", l.id, err)
	}
	return time.Duration(ttl) * time.Second, nil
}

// watch blocks until the key is deleted or put under another lease, and
// returns the reason; or until ctx is done. An interrupted watch returns an
// error wrapping driver.ErrRetryWatch; the next call reads the key again
// before watching from there, so no change is missed.
func (l *lease) watch(ctx context.Context) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	resp, err := l.b.cli.Get(wctx, l.key)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: read %s: %w", driver.ErrRetryWatch, l.key, err)
	}
	if reason := l.check(resp.Kvs); reason != nil {
		return reason
	}
	for wr := range l.b.cli.Watch(wctx, l.key, clientv3.WithRev(resp.Header.Revision+1)) {
		if err := wr.Err(); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w: watch %s: %w", driver.ErrRetryWatch, l.key, err)
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return fmt.Errorf("%w: %s deleted at revision %d", ErrKeyGone, l.key, ev.Kv.ModRevision)
			}
			if reason := l.check([]*mvccpb.KeyValue{ev.Kv}); reason != nil {
				return reason
			}
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("%w: watch %s closed", driver.ErrRetryWatch, l.key)
}

// check returns nil if kvs (the result of reading the key) shows the key
// with this lease and create revision, or the reason it does not.
func (l *lease) check(kvs []*mvccpb.KeyValue) error {
	if len(kvs) == 0 {
		return fmt.Errorf("%w: %s does not exist", ErrKeyGone, l.key)
	}
	kv := kvs[0]
	if clientv3.LeaseID(kv.Lease) != l.id || kv.CreateRevision != l.rev {
		return fmt.Errorf("%w: %s now has lease %x, create revision %d (want lease %x, revision %d)",
			ErrKeyGone, l.key, kv.Lease, kv.CreateRevision, l.id, l.rev)
	}
	return nil
}

// release revokes the lease, which deletes the key in the same step.
func (l *lease) release(ctx context.Context) error {
	return revokeLease(ctx, l.b.cli, l.id)
}

// revokeLease revokes id; a lease the server no longer knows counts as
// revoked.
func revokeLease(ctx context.Context, cli *clientv3.Client, id clientv3.LeaseID) error {
	_, err := cli.Revoke(ctx, id)
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("revoke lease %x: %w", id, err)
	}
	return nil
}
