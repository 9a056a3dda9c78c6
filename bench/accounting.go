package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/schedulerhost"
)

// accBackends are the backends of the accounting section's reads, in
// report order. Kubernetes is left out: the proxy passes its TLS
// uncounted, and its accounts' ConfigMap (768 KiB) holds no 1,000
// accounts of a day.
var accBackends = []string{"etcd", "postgres", "mariadb", "consul", "redis"}

// accJobs are the job counts of the accounting section's reads.
var accJobs = []int{1, 1000, 10000}

// accReadRow is one backend and job count of the accounting's reads.
type accReadRow struct {
	backend string
	jobs    int
	fill    time.Duration // writing the jobs' Accounts, 16 at a time
	one     accRead       // Host.Audit of job-7 (job-0 at 1 job)
	all     accRead       // Host.Audit of every job
	// histFull and histEmpty are the bytes of one History read of a job
	// with AbsenceHistory entries and of one with none.
	histFull, histEmpty int64
	acctBytes           int    // the stored size of one job's Account
	summary             string // the one job's report, in counts
	err                 error
}

// accRead is what one Host.Audit call cost at the proxy.
type accRead struct {
	requests map[string]int64 // by kind
	bytes    int64            // bytes the server sent
	took     time.Duration
}

func (a accRead) total() int64 {
	var n int64
	for _, v := range a.requests {
		n += v
	}
	return n
}

// accountStores returns the store of c's accounts (its Accounter's, or
// its control store) and its control store.
func accountStores(b election.Backend) (accounts, ctl control.Store, err error) {
	c, ok := b.(driver.Controller)
	if !ok {
		return nil, nil, fmt.Errorf("no control store")
	}
	ctl, accounts = c.Control(), c.Control()
	if a, ok := b.(driver.Accounter); ok {
		accounts = a.AccountStore()
	}
	return accounts, ctl, nil
}

// followerHost is a Host with jobs every-minute jobs on c's backend that
// never leads: an instance as a follower's polls read through it.
func followerHost(c *ledgerConn, jobs int) (*schedulerhost.Host, error) {
	accts, ctl, err := accountStores(c.backend)
	if err != nil {
		return nil, err
	}
	js := make([]schedulerhost.Job, jobs)
	for i := range js {
		js[i] = schedulerhost.Job{Name: accJobName(i), Schedule: everyMinute, Deadline: 2 * time.Minute, Run: func(context.Context) error { return nil }}
	}
	cfg := schedulerhost.Config{Jobs: js, Ledger: c.ledger, Control: ctl, Accounts: accts, Instance: "follower", Logger: quiet}
	if lr, ok := c.backend.(election.LeaderReader); ok {
		cfg.Leader = lr.Leader
	}
	return schedulerhost.New(cfg)
}

// accReadTrial fills jobs Accounts of a typical day in an election of
// its own on backend and measures a follower Host's Audit of one job and
// of all, through a counting proxy.
func accReadTrial(e *env, backend string, jobs int) (row accReadRow) {
	row = accReadRow{backend: backend, jobs: jobs}
	p, err := newCountProxy(e.targetOf(backend), protoOf(backend))
	if err != nil {
		row.err = err
		return row
	}
	defer p.Close()
	c, err := openLedger(e, backend, p.Addr(), fmt.Sprintf("a%d-%d", jobs, time.Now().UnixNano()))
	if err != nil {
		row.err = err
		return row
	}
	defer c.close()
	accts, _, err := accountStores(c.backend)
	if err != nil {
		row.err = err
		return row
	}
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Minute)
	one := accJobName(min(7, jobs-1))
	row.acctBytes, err = fittedSize(typicalDay(one, now))
	if err != nil {
		row.err = err
		return row
	}
	t0 := time.Now()
	if err := saveAccounts(ctx, accts, jobs, now); err != nil {
		row.err = fmt.Errorf("write the accounts: %w", err)
		return row
	}
	row.fill = time.Since(t0)
	if err := fillHistory(ctx, c.backend, c.ledger, one, now); err != nil {
		row.err = err
		return row
	}
	h, err := followerHost(c, jobs)
	if err != nil {
		row.err = err
		return row
	}
	// A History read of the filled job and of one with no entries.
	b0 := p.BytesDown()
	if _, err := c.ledger.History(ctx, one, schedulerhost.AbsenceHistory); err != nil {
		row.err = err
		return row
	}
	b1 := p.BytesDown()
	if _, err := c.ledger.History(ctx, "job-none", schedulerhost.AbsenceHistory); err != nil {
		row.err = err
		return row
	}
	row.histFull, row.histEmpty = b1-b0, p.BytesDown()-b1

	from, to := now.Add(-24*time.Hour), now
	measure := func(job string) (accRead, []audit.Report, error) {
		c0, by0, start := p.Counts(), p.BytesDown(), time.Now()
		reps, err := h.Audit(ctx, job, from, to)
		took := time.Since(start)
		c1 := p.Counts()
		r := accRead{requests: map[string]int64{}, bytes: p.BytesDown() - by0, took: took}
		for _, k := range kinds {
			if d := c1[k] - c0[k]; d != 0 {
				r.requests[k] = d
			}
		}
		return r, reps, err
	}
	var reps []audit.Report
	if row.one, reps, err = measure(one); err != nil {
		row.err = fmt.Errorf("audit of %s: %w", one, err)
		return row
	}
	if len(reps) == 1 {
		row.summary = reportSummary(reps[0])
	}
	if row.all, reps, err = measure(""); err != nil {
		row.err = fmt.Errorf("audit of every job: %w", err)
		return row
	}
	for _, r := range reps {
		if r.Error != "" {
			row.err = fmt.Errorf("audit of %s: %s", r.Job, r.Error)
			break
		}
	}
	return row
}

// reportSummary is a report's counts, as the status page's line has them.
func reportSummary(r audit.Report) string {
	s := fmt.Sprintf("due %d", r.Due)
	for _, c := range audit.Classes {
		if n := r.Classes[c]; n > 0 {
			s += fmt.Sprintf(", %s %d", c, n)
		}
	}
	return s
}

// accountingSection runs the accounting section: the audits' reads, the
// followers' measured minutes (side by side with the reads in quick
// mode, each on its own proxy; after them otherwise, so that a poll round
// slowed by the reads does not straddle the minute's edge), then the
// lateness with and without the accounting, alone.
func accountingSection(e *env, o options) *accResults {
	a := &accResults{}
	backends, follow := accBackends, accFollowBackends
	if o.quick {
		backends, follow = []string{"etcd", "postgres"}, []string{"etcd"}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	followers := func() {
		for _, backend := range follow {
			for _, jobs := range accFollowJobs {
				wg.Go(func() {
					logf("accounting: a follower's minute, %s, %d jobs", backend, jobs)
					f := accFollowTrial(e, backend, jobs)
					if f.err != nil {
						logf("accounting: follower on %s, %d jobs: %v", backend, jobs, f.err)
					}
					mu.Lock()
					a.follow = append(a.follow, f)
					mu.Unlock()
				})
			}
		}
	}
	if o.quick {
		followers()
	}
	now := time.Now().UTC().Truncate(time.Minute)
	a.worst, a.worstErr = fittedSize(worstAccount("job-7", now))
	for _, backend := range backends {
		for _, jobs := range accJobs {
			logf("accounting: audit reads, %s, %d jobs", backend, jobs)
			row := accReadTrial(e, backend, jobs)
			if row.err != nil {
				logf("accounting: audit reads, %s, %d jobs: %v", backend, jobs, row.err)
			}
			a.reads = append(a.reads, row)
		}
	}
	if !o.quick {
		followers()
	}
	wg.Wait()
	a.sideBySide = o.quick
	a.lateness = accLateness(e, o)
	slices.SortFunc(a.follow, func(x, y accFollowRow) int {
		if c := slices.Index(follow, x.backend) - slices.Index(follow, y.backend); c != 0 {
			return c
		}
		return x.jobs - y.jobs
	})
	return a
}
