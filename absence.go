package baton

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/httpapi"
	"github.com/batonhq/baton/metrics"
	"github.com/batonhq/baton/schedulerhost"
)

// The absence poll: one more actor of the runner (run.go), on every
// instance, leader, follower and standby alike, so that a dead man's
// switch fires even when the leader is dead. Every AbsencePollInterval
// it reads who leads (the Elector's Leader: a leader knows it leads, a
// follower asks the backend's LeaderReader) and the Host's Absence (the
// pauses and the tick Accounts, then the history of each job with a
// Deadline), and sets the
// metrics: baton_election_leaderless_seconds, while nobody leads the
// time since the last poll that saw someone lead (or since the poll
// began, if none has): at most one poll interval more than nobody has
// led, so that the first poll after a leader's lease lapsed already says
// so (0 while someone leads; absent for a backend without a
// LeaderReader), and baton_job_deadline_seconds,
// baton_job_last_success_timestamp_seconds and baton_job_overdue. A read
// that fails is counted in baton_absence_poll_errors_total, and the
// gauges it would have set keep their last values; the round's errors go
// to GET /status (httpapi.API.SetPollError), not to /readyz.

// DefaultAbsencePollInterval is Advanced.AbsencePollInterval when zero.
const DefaultAbsencePollInterval = 10 * time.Second

// absencePoll is the runner's absence poll. Its fields after the first
// line belong to its goroutine.
type absencePoll struct {
	host         *schedulerhost.Host
	elector      *election.Elector
	m            *metrics.Metrics
	log          *slog.Logger
	every        time.Duration
	leaderReader bool                          // the backend can say who leads
	setErr       func(err error, at time.Time) // the round's failure, nil if none, for GET /status

	leaderSeen time.Time // the last poll that saw someone lead, or the poll's start
}

// newAbsencePoll returns the poll of an instance built from cfg, or nil
// if it would have nothing to read: no job has a Deadline and the
// backend cannot say who leads (a reload that adds a Deadline then takes
// effect at the next start).
func newAbsencePoll(cfg Config, host *schedulerhost.Host, el *election.Elector, m *metrics.Metrics, api *httpapi.API) *absencePoll {
	_, lr := cfg.Backend.(election.LeaderReader)
	if !lr && !slices.ContainsFunc(cfg.Jobs, func(j Job) bool { return j.Deadline > 0 }) {
		return nil
	}
	every := cfg.Advanced.AbsencePollInterval
	if every == 0 {
		every = DefaultAbsencePollInterval
	}
	return &absencePoll{host: host, elector: el, m: m, log: cfg.Logger, every: every, leaderReader: lr,
		setErr: func(err error, at time.Time) { api.SetPollError(httpapi.AbsencePoll, err, at) }}
}

// run polls at once, then every p.every, until ctx ends. It blocks.
func (p *absencePoll) run(ctx context.Context) { pollEvery(ctx, p.every, p.poll) }

// pollEvery calls poll at once, then every every, until ctx ends. It
// blocks.
func pollEvery(ctx context.Context, every time.Duration, poll func(context.Context)) {
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}

// poll reads once and sets the metrics; its reads are bounded by the
// interval (at least a second).
func (p *absencePoll) poll(parent context.Context) {
	ctx, cancel := context.WithTimeout(parent, max(p.every, time.Second))
	defer cancel()
	now := time.Now()
	var failed []error
	if p.leaderReader {
		if err := p.pollLeader(ctx, now); err != nil {
			failed = append(failed, err)
		}
	}
	jobs, err := p.host.Absence(ctx, now)
	switch {
	case err == nil:
		p.m.Absence(jobs)
	case jobs == nil: // nothing read: the gauges keep their values
		failed = append(failed, err)
	default:
		p.m.Absence(jobs) // the jobs whose read failed keep their values
		for _, j := range jobs {
			if j.Err != nil {
				failed = append(failed, j.Err)
			}
		}
	}
	if parent.Err() != nil { // a read cut short by the shutdown is no failure
		return
	}
	p.setErr(errors.Join(failed...), now)
	if len(failed) == 0 {
		return
	}
	p.m.AbsencePollFailed(len(failed))
	p.log.Warn("absence poll: reads failed: the metrics keep their last values", "failed", len(failed), "err", errors.Join(failed...))
}

// pollLeader reads who leads and sets the leaderless gauge, or returns
// the read's error and leaves it.
func (p *absencePoll) pollLeader(ctx context.Context, now time.Time) error {
	if p.leaderSeen.IsZero() {
		p.leaderSeen = now
	}
	_, err := p.elector.Leader(ctx)
	var d time.Duration
	switch {
	case err == nil:
		p.leaderSeen = now
	case errors.Is(err, election.ErrNoLeader):
		d = max(now.Sub(p.leaderSeen), time.Millisecond)
	default:
		return err
	}
	p.m.Leaderless(d)
	return nil
}
