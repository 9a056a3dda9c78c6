package kube

import (
	"context"
	"net/http"

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

// Intercept puts f in front of every request c sends: f sends it (send),
// late, or not at all, as a test's network would.
func Intercept(c *Client, f func(req *http.Request, send func(*http.Request) (*http.Response, error)) (*http.Response, error)) {
	next := c.http.Transport
	c.http.Transport = roundTripFunc(func(req *http.Request) (*http.Response, error) { return f(req, next.RoundTrip) })
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
