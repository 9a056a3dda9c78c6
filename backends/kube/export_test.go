package kube

import (
	"context"

	"github.com/batonhq/baton/ledger"
)

// DeleteLease deletes the Lease ns/name, as kubectl delete lease does.
func DeleteLease(ctx context.Context, c *Client, ns, name string) error {
	return c.remove(ctx, leases, ns, name)
}

// ClaimPastLeaseCheck writes claims cs (all of one token) as Claim does
// once its read of the Lease showed their token holding: a claim in
// flight whose Lease check came before the next term began.
func ClaimPastLeaseCheck(ctx context.Context, l ledger.Ledger, cs []ledger.Claim) []error {
	errs := make([]error, len(cs))
	live := make([]int, len(cs))
	for i := range live {
		live[i] = i
	}
	tl := l.(*tickLedger)
	tl.write(ctx, cs, live, cs[0].Token, errs)
	return errs
}
