package etcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/election"
)

var _ election.Checker = (*Backend)(nil)

// Check implements election.Checker. It sends one transaction that reads
// the election's and the ledger's keys and, in a branch that never runs,
// writes to both, so the server checks the client's connection, TLS and
// read and write permissions without changing anything. It blocks until
// answered or ctx is done.
func (b *Backend) Check(ctx context.Context) error {
	ledger := b.prefix + "-ledger/"
	_, err := b.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(b.keys+"baton-check"), "<", 0)). // never true
		Then(clientv3.OpPut(b.keys+"baton-check", ""), clientv3.OpPut(ledger+"baton-check", "")).
		Else(clientv3.OpGet(b.keys, clientv3.WithPrefix(), clientv3.WithCountOnly()),
			clientv3.OpGet(ledger, clientv3.WithPrefix(), clientv3.WithCountOnly())).
		Commit()
	if err != nil {
		return fmt.Errorf("etcd: check %s: %w", b.prefix, err)
	}
	return nil
}
