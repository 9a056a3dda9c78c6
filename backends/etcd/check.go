package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Check implements driver.Checker. It blocks until answered or ctx is
// done, and changes nothing. It sends two requests:
//
//   - a read of the election's keys that does not wait for a connection:
//     if no endpoint can be connected to (refused, TLS handshake failed,
//     certificate rejected), it fails at once with the endpoints and the
//     connection's error, e.g. "x509: certificate signed by unknown
//     authority" or "tls: certificate required", instead of waiting until
//     ctx ends;
//   - a transaction that reads the election's and the ledger's keys and,
//     in a branch that never runs, writes to both, so that the server
//     checks the client's read and write permissions on both prefixes
//     (etcd checks a transaction's permissions before evaluating it).
//
// A user without those permissions gets an error wrapping
// rpctypes.ErrPermissionDenied; a wrong password is reported by
// clientv3.New already (rpctypes.ErrAuthFailed).
func (b *Backend) Check(ctx context.Context) error {
	if err := b.reach(ctx); err != nil {
		return fmt.Errorf("etcd: check %s: %w", b.prefix, err)
	}
	ledger := b.ledgerPrefix()
	_, err := b.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(b.keys+"baton-check"), "<", 0)). // never true
		Then(clientv3.OpPut(b.keys+"baton-check", ""), clientv3.OpPut(ledger+"baton-check", "")).
		Else(clientv3.OpGet(b.keys, clientv3.WithPrefix(), clientv3.WithCountOnly()),
			clientv3.OpGet(ledger, clientv3.WithPrefix(), clientv3.WithCountOnly())).
		Commit()
	if err != nil {
		return fmt.Errorf("etcd: check %s: write probe at %s: %w", b.prefix, strings.Join(b.cli.Endpoints(), ","), b.explain(err))
	}
	return nil
}

func (b *Backend) ledgerPrefix() string { return b.prefix + ledgerSuffix + "/" }

// explain adds to an authentication or permission error what the server
// wants.
func (b *Backend) explain(err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrPermissionDenied):
		who := fmt.Sprintf("user %q", b.cli.Username)
		if b.cli.Username == "" {
			who = "the user named by the client certificate's common name"
		}
		return fmt.Errorf("%w: %s needs read and write permission on the key prefixes %s and %s", err, who, b.keys, b.ledgerPrefix())
	case errors.Is(err, rpctypes.ErrUserEmpty):
		return fmt.Errorf("%w: the server has authentication enabled; give a user name and password, or a client certificate whose common name is a user", err)
	}
	return err
}

// reach sends one count-only read of the election's keys, failing fast
// (grpc.WaitForReady(false)) if the client cannot connect to any endpoint.
func (b *Backend) reach(ctx context.Context) error {
	kv := pb.NewKVClient(b.cli.ActiveConnection())
	_, err := kv.Range(ctx, &pb.RangeRequest{
		Key:       []byte(b.keys),
		RangeEnd:  []byte(clientv3.GetPrefixRangeEnd(b.keys)),
		CountOnly: true,
	}, grpc.WaitForReady(false))
	if err == nil {
		return nil
	}
	eps := strings.Join(b.cli.Endpoints(), ",")
	if s, ok := status.FromError(err); ok && s.Code() == codes.Unavailable {
		msg := s.Message()
		switch {
		case tlsProblem(msg):
			return fmt.Errorf("cannot connect to %s: TLS handshake failed: %s", eps, msg)
		case strings.Contains(eps, "https://") && closedEarly(msg):
			// With TLS 1.3 the server checks the client certificate after
			// the client has finished its handshake; its alert can be lost
			// when the client writes first.
			return fmt.Errorf("cannot connect to %s: %s: the server closed the connection right after the TLS handshake, "+
				"as it does when it rejects the client certificate (none, or not signed by a CA it trusts)", eps, msg)
		}
		return fmt.Errorf("cannot connect to %s: %s", eps, msg)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("read at %s: %w", eps, ctx.Err())
	}
	return fmt.Errorf("read at %s: %w", eps, b.explain(rpctypes.Error(err)))
}

// closedEarly reports whether a gRPC connection error message says the
// server closed the connection.
func closedEarly(msg string) bool {
	for _, s := range []string{"broken pipe", "connection reset", "EOF"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// tlsProblem reports whether a gRPC connection error message is about TLS
// or certificates.
func tlsProblem(msg string) bool {
	for _, s := range []string{"tls:", "x509:", "certificate", "handshake"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
