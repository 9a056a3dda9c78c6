package baton

import (
	"context"
	"log/slog"
	"time"

	"github.com/batonhq/baton/httpapi"
	"github.com/batonhq/baton/metrics"
	"github.com/batonhq/baton/schedulerhost"
)

// The audit poll: one more actor of the runner (run.go), on every
// instance with a control store, leader, follower and standby alike, so
// that every instance reports the same counts whoever leads. Every
// AuditPollInterval it reads the Host's Audit of every job over the last
// AuditWindow and sets baton_ticks{job,class,reason}: the due ticks of the
// window by class and reason (metrics.Metrics.Ticks). A round whose read
// fails is counted in baton_audit_poll_errors_total, baton_ticks keeps its
// last values, and the error goes to GET /status
// (httpapi.API.SetPollError), not to /readyz.
//
// What a round costs: one List of the control store's audit/ prefix (every
// job's Account, at most audit.MaxBytes each), one List of its terms, one
// read of who leads (the leader's note of refused claims), and one ledger
// History read of schedulerhost.AbsenceHistory entries per job of the
// set: J + 3 calls for J jobs (2J + 3 on Kubernetes, whose History reads
// two ConfigMaps), all reads. At the default minute, three instances with
// 20 jobs on etcd make 3 × 23 = 69 reads a minute.

// DefaultAuditPollInterval is Advanced.AuditPollInterval when zero.
const DefaultAuditPollInterval = time.Minute

// AuditWindow is the window of baton_ticks: the last 24 h before each
// round.
const AuditWindow = 24 * time.Hour

// auditPoll is the runner's audit poll.
type auditPoll struct {
	host   *schedulerhost.Host
	m      *metrics.Metrics
	log    *slog.Logger
	every  time.Duration
	setErr func(err error, at time.Time) // the round's failure, nil if none, for GET /status
}

// newAuditPoll returns the poll of an instance built from cfg, or nil if
// it has no control store (where the accounting lives) or
// Advanced.AuditPollInterval is negative.
func newAuditPoll(cfg Config, control bool, host *schedulerhost.Host, m *metrics.Metrics, api *httpapi.API) *auditPoll {
	every := cfg.Advanced.AuditPollInterval
	if !control || every < 0 {
		return nil
	}
	if every == 0 {
		every = DefaultAuditPollInterval
	}
	return &auditPoll{host: host, m: m, log: cfg.Logger, every: every,
		setErr: func(err error, at time.Time) { api.SetPollError(httpapi.AuditPoll, err, at) }}
}

// run polls at once, then every p.every, until ctx ends. It blocks.
func (p *auditPoll) run(ctx context.Context) { pollEvery(ctx, p.every, p.poll) }

// poll reads once and sets the metric; its reads are bounded by the
// interval (at least a second).
func (p *auditPoll) poll(parent context.Context) {
	ctx, cancel := context.WithTimeout(parent, max(p.every, time.Second))
	defer cancel()
	now := time.Now()
	reps, err := p.host.Audit(ctx, "", now.Add(-AuditWindow), now)
	if parent.Err() != nil { // a read cut short by the shutdown is no failure
		return
	}
	p.setErr(err, now)
	if err != nil {
		p.m.AuditPollFailed()
		p.log.Warn("audit poll: read failed: baton_ticks keeps its last values", "err", err)
		return
	}
	p.m.Ticks(reps)
}
