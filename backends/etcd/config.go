package etcd

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// Timing limits of etcd leases.
const (
	// DefaultTTL is the lease TTL when Config.Timing.TTL is zero.
	DefaultTTL = 5 * time.Second
	// MinTTL is the smallest TTL accepted (the server's minimum with its
	// default election timeout).
	MinTTL = 2 * time.Second
)

// Transaction limits.
const (
	// DefaultMaxTxnOps is Config.MaxTxnOps when it is zero: etcd's default
	// --max-txn-ops.
	DefaultMaxTxnOps = 128
	// claimOps is how many operations one claim's transaction, nested in
	// its batch's, holds in its larger branch (a delete of old history,
	// two puts and a read). etcd checks each level of a transaction
	// against --max-txn-ops minus the operations of the levels above it,
	// so a batch of n claims needs n + claimOps <= --max-txn-ops.
	claimOps = 4
	// minTxnOps is the smallest MaxTxnOps accepted: one claim per batch.
	minTxnOps = claimOps + 1
)

// limits are etcd's bounds and defaults for the fields every backend's
// Config has.
var limits = driver.BackendLimits{
	Client:         "Client (or Endpoints)",
	DefaultTTL:     DefaultTTL,
	MinTTL:         MinTTL,
	TTLUnit:        time.Second,
	DefaultHistory: ledger.DefaultHistory,
}

// Config configures a Backend. Zero values mean the documented defaults.
// New copies it; the caller's struct is never modified.
type Config struct {
	// Client talks to the etcd cluster. Required. TLS, authentication and
	// endpoints come with it; the Backend never closes it. Give it a
	// DialTimeout and DialKeepAliveTime/Timeout so that a dead connection
	// is noticed.
	Client *clientv3.Client
	// Endpoints, instead of Client: the cluster's client URLs, without TLS
	// or authentication. New dials a client of its own (5 s dial timeout,
	// keepalive every 5 s) that Close closes. Set Client or Endpoints.
	Endpoints []string
	// Prefix names the election, e.g. "/baton/elections/reports". Required,
	// without a trailing slash. Candidates put their keys under Prefix+"/",
	// as concurrency.Election does, so `etcdctl elect -l PREFIX` shows the
	// leader. The ledger uses Prefix+"-ledger/", so no path segment of a
	// Prefix may end with "-ledger" (New refuses it). Elections may nest
	// ("/baton/elections/reports" and "/baton/elections/reports/eu"): keys
	// further down than Prefix+"/<name>" are not candidates of Prefix.
	Prefix string
	// Timing is the lease timing. TTL must be whole seconds, at least
	// MinTTL; zero means DefaultTTL. See election.Timing for the others.
	Timing election.Timing
	// History is how many runs per job the Ledger keeps. Zero means
	// ledger.DefaultHistory.
	History int
	// MaxTxnOps is the server's --max-txn-ops: how many operations etcd
	// accepts in one transaction, at each level of nesting less those of
	// the levels above. Zero means DefaultMaxTxnOps (128, etcd's
	// default); at least 5. The Ledger sends MaxTxnOps-4 claims, or
	// finishes, per transaction (its MaxBatch) and reads MaxTxnOps jobs'
	// last claimed ticks per transaction. Set it when the cluster runs
	// with another --max-txn-ops: above the server's value, the server
	// refuses every batch of more claims than its value less 4 ("too
	// many operations in txn request").
	MaxTxnOps int
	// Logger receives debug details and cleanup warnings. Nil means
	// slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	c.Timing, c.History, c.Logger = limits.Defaults(c.Timing, c.History, c.Logger)
	if c.MaxTxnOps == 0 {
		c.MaxTxnOps = DefaultMaxTxnOps
	}
	return c
}

// Validate reports every problem with c at once, after defaults are
// applied. Each problem names the field and its value.
func (c Config) Validate() error {
	_, err := c.resolved()
	return err
}

// resolved returns c with its defaults applied, which New builds a Backend
// from, and every problem with it (nil when there is none).
func (c Config) resolved() (Config, error) {
	c = c.withDefaults()
	errs := limits.Problems(c.Client != nil || len(c.Endpoints) > 0, c.Timing, c.History)
	if c.Client != nil && len(c.Endpoints) > 0 {
		errs = append(errs, fmt.Errorf("Endpoints %q: set Client or Endpoints, not both", c.Endpoints))
	}
	for i, e := range c.Endpoints {
		if strings.TrimSpace(e) == "" {
			errs = append(errs, fmt.Errorf("Endpoints[%d] %q: empty", i, e))
		}
	}
	if c.MaxTxnOps < minTxnOps {
		errs = append(errs, fmt.Errorf("MaxTxnOps %d: must be at least %d (one claim takes %d operations nested in its batch's transaction, plus one in it)",
			c.MaxTxnOps, minTxnOps, claimOps))
	}
	switch {
	case c.Prefix == "":
		errs = append(errs, fmt.Errorf("Prefix %q: required", c.Prefix))
	case strings.HasSuffix(c.Prefix, "/"):
		errs = append(errs, fmt.Errorf("Prefix %q: must not end with a slash (keys go under Prefix + \"/\")", c.Prefix))
	default:
		if err := notInLedger(c.Prefix); err != nil {
			errs = append(errs, err)
		}
	}
	return c, driver.InvalidConfig("etcd", errs)
}

// ledgerSuffix ends the name of the key prefix of an election's ledger:
// election P keeps its ledger under P + ledgerSuffix + "/".
const ledgerSuffix = "-ledger"

// notInLedger refuses a prefix with a path segment S-ledger (S not
// empty): that is where election S keeps its ledger, whose keys
// (S-ledger/<job>/last, ...) would be taken for candidates, and S's
// ledger and this election would share one key prefix and its
// permissions.
func notInLedger(prefix string) error {
	dir := ""
	for seg := range strings.SplitSeq(prefix, "/") {
		if owner, ok := strings.CutSuffix(seg, ledgerSuffix); ok && owner != "" {
			return fmt.Errorf("Prefix %q: %q is where election %q keeps its ledger (no path segment may end with %q)",
				prefix, seg, dir+owner, ledgerSuffix)
		}
		dir += seg + "/"
	}
	return nil
}
