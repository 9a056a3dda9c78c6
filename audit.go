package baton

import (
	"context"
	"fmt"
	"time"

	"github.com/batonhq/baton/audit"
)

// DefaultAuditWindow is the window of Audit when it is given none: the
// last 24 hours.
const DefaultAuditWindow = 24 * time.Hour

// Audit accounts for the due ticks of job (every job of the set if job is
// empty) in the window ending now: each tick in exactly one class (ran,
// skipped, covered, missed, refused, lost, pending) with its reason, the
// counts adding up to the ticks due (package audit). window zero means
// DefaultAuditWindow; it must not be negative. It reads the backend's
// control store and ledger (schedulerhost.Host.Audit) and works on every
// instance, leading or not, before Run and after it. Without a control
// store its error is schedulerhost.ErrNoAccounting; a job not in the set
// is an error naming it.
func (b *Baton) Audit(ctx context.Context, job string, window time.Duration) ([]audit.Report, error) {
	if window < 0 {
		return nil, fmt.Errorf("baton: Audit: window %v: must not be negative", window)
	}
	if window == 0 {
		window = DefaultAuditWindow
	}
	to := time.Now()
	return b.host.Audit(ctx, job, to.Add(-window), to)
}
