package etcd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// keeper sends the keepalives of one etcd lease on one LeaseKeepAlive
// stream, one request at a time.
//
// Why not clientv3's KeepAliveOnce: it opens a new gRPC stream for every
// call, and a client with a user name and password authenticates again on
// every stream it opens (clientv3's stream interceptor calls Authenticate
// first). Authenticate makes the server check the password with bcrypt
// and write a token through raft: tens of milliseconds of server CPU at
// etcd's default cost, far more on a loaded server, with a higher
// --bcrypt-cost, or under the race detector. Each renewal then waited for
// a password check, and a term ended when one check took longer than
// what the TTL leaves after the renewal interval and the safety margin.
//
// The keeper opens its stream (and so authenticates) before the lease is
// granted, off the lease's clock, and sends every renewal on it. It opens
// a new stream only after the old one failed: the connection broke, the
// server restarted, the user was deleted or its password changed, or,
// with JWT tokens, the stream's token expired or went stale because users
// or roles changed (ErrAuthOldRevision). That renewal then waits for one
// password check, as every renewal used to.
type keeper struct {
	lc   pb.LeaseClient
	log  *slog.Logger
	ctx  context.Context // parent of every stream; ends with close
	stop context.CancelFunc

	mu     sync.Mutex // one request at a time on the stream
	stream pb.Lease_LeaseKeepAliveClient
	end    context.CancelFunc // ends stream
	used   bool               // stream has answered a keepalive
}

// newKeeper returns a keeper of cli with no stream open yet. Set log
// before the first keepAlive.
func newKeeper(cli *clientv3.Client) *keeper {
	// WithRequireLeader: a member cut off from its cluster's leader ends
	// the stream, and the next one may go to another endpoint.
	ctx, stop := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	return &keeper{lc: clientv3.RetryLeaseClient(cli), log: slog.Default(), ctx: ctx, stop: stop}
}

// open opens the stream unless it is open. ctx bounds the opening only;
// the stream lasts until it fails or close is called.
func (k *keeper) open(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.openLocked(ctx)
}

func (k *keeper) openLocked(ctx context.Context) error {
	if k.stream != nil {
		return nil
	}
	sctx, end := context.WithCancel(k.ctx)
	stop := context.AfterFunc(ctx, end)
	s, err := k.lc.LeaseKeepAlive(sctx, grpc.WaitForReady(true))
	if !stop() { // ctx ended while opening
		end()
		return fmt.Errorf("open keepalive stream: %w", context.Cause(ctx))
	}
	if err != nil {
		end()
		if k.ctx.Err() != nil {
			return errors.New("keepalive stream closed")
		}
		return fmt.Errorf("open keepalive stream: %w", rpctypes.Error(err))
	}
	k.stream, k.end, k.used = s, end, false
	return nil
}

// dropLocked ends the stream; the next keepalive opens another.
func (k *keeper) dropLocked() {
	if k.stream != nil {
		k.end()
		k.stream, k.end = nil, nil
	}
}

// keepAlive renews lease id once and returns the TTL the server granted,
// 0 if the server no longer knows the lease. It returns when answered or
// when ctx is done. A failure on a stream that had worked before (the
// server restarted, the token went stale) is retried at once on a new
// stream.
func (k *keeper) keepAlive(ctx context.Context, id clientv3.LeaseID) (int64, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for {
		if err := k.openLocked(ctx); err != nil {
			return 0, err
		}
		used := k.used
		ttl, err := k.sendLocked(ctx, id)
		if err == nil {
			k.used = true
			return ttl, nil
		}
		k.dropLocked()
		if ctx.Err() != nil || k.ctx.Err() != nil || !used {
			return 0, err
		}
		k.log.Debug("keepalive stream failed, opening another", "err", err)
	}
}

func (k *keeper) sendLocked(ctx context.Context, id clientv3.LeaseID) (int64, error) {
	// Recv takes no context: ending the stream is how ctx interrupts it.
	stop := context.AfterFunc(ctx, k.end)
	defer func() {
		if !stop() { // ended by ctx, maybe after the answer came
			k.dropLocked()
		}
	}()
	err := k.stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(id)})
	if err != nil && !errors.Is(err, io.EOF) { // on io.EOF, Recv returns the stream's error
		return 0, k.streamErr(ctx, err)
	}
	resp, err := k.stream.Recv()
	if err != nil {
		return 0, k.streamErr(ctx, err)
	}
	if clientv3.LeaseID(resp.ID) != id {
		return 0, fmt.Errorf("keepalive stream answered for lease %x", resp.ID)
	}
	return resp.TTL, nil
}

func (k *keeper) streamErr(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case k.ctx.Err() != nil:
		return errors.New("keepalive stream closed")
	case errors.Is(err, io.EOF):
		return errors.New("keepalive stream ended by the server")
	}
	return rpctypes.Error(err)
}

// close ends the stream, waiting for a keepalive in flight to return, and
// makes later keepalives fail. It is idempotent.
func (k *keeper) close() {
	k.stop()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dropLocked()
}
