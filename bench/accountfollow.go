package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/election"
)

// accFollowBackends and accFollowJobs are the follower trials: a
// measured minute each, all side by side.
var (
	accFollowBackends = []string{"etcd", "postgres"}
	accFollowJobs     = []int{10, 1000}
)

// accFollowRow is a follower baton's requests over a measured minute.
type accFollowRow struct {
	backend string
	jobs    int
	window  time.Duration
	counts  map[string]int64 // by kind, over the window
	bytes   int64            // bytes the server sent in the window
	err     error
}

// formulaReads is docs/operations.md's reads a minute of one instance
// with jobs jobs, each with a deadline, at the default intervals: six
// absence polls and one audit round of J + 3 calls each.
func formulaReads(jobs int) int {
	return int(time.Minute/baton.DefaultAbsencePollInterval)*(jobs+3) +
		int(time.Minute/baton.DefaultAuditPollInterval)*(jobs+3)
}

// accFollowTrial runs a baton instance with jobs every-minute jobs, each
// with a deadline, as a follower on backend (another candidate holds the
// lease, on a connection of its own) through a counting proxy, with the
// default poll intervals, and counts its requests from 7 s after its
// start through a minute: the absence rounds at 10 s, 20 s, ... 60 s and
// the audit round at 60 s, each whole inside the window.
func accFollowTrial(e *env, backend string, jobs int) (row accFollowRow) {
	row = accFollowRow{backend: backend, jobs: jobs, window: time.Minute}
	lane := fmt.Sprintf("f%d-%d", jobs, time.Now().UnixNano())
	lc, err := openLedger(e, backend, e.targetOf(backend), lane)
	if err != nil {
		row.err = err
		return row
	}
	defer lc.close()
	accts, _, err := accountStores(lc.backend)
	if err != nil {
		row.err = err
		return row
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := saveAccounts(ctx, accts, jobs, time.Now().UTC().Truncate(time.Minute)); err != nil {
		row.err = fmt.Errorf("write the accounts: %w", err)
		return row
	}
	// The leader: a candidate that holds the lease and runs nothing.
	el, err := election.New(election.Config{Backend: lc.backend, Identity: election.Identity{ID: "leader"}, Logger: quiet})
	if err != nil {
		row.err = err
		return row
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	leading := make(chan struct{})
	wg.Go(func() {
		el.Run(ctx, func(ctx context.Context, _ election.Term) error {
			close(leading)
			<-ctx.Done()
			return nil
		})
	})
	select {
	case <-leading:
	case <-time.After(30 * time.Second):
		row.err = fmt.Errorf("the leader took no term within 30 s")
		return row
	}

	p, err := newCountProxy(e.targetOf(backend), protoOf(backend))
	if err != nil {
		row.err = err
		return row
	}
	defer p.Close()
	fc, err := openLedger(e, backend, p.Addr(), lane)
	if err != nil {
		row.err = err
		return row
	}
	defer fc.close()
	js := make([]baton.Job, jobs)
	for i := range js {
		js[i] = baton.Job{Name: accJobName(i), Schedule: everyMinute, Deadline: 2 * time.Minute, Run: func(context.Context) error { return nil }}
	}
	b, err := baton.New(baton.Config{Backend: fc.backend, Election: lane, Jobs: js, Instance: "follower", Logger: quiet})
	if err != nil {
		row.err = err
		return row
	}
	start := time.Now()
	runErr := make(chan error, 1)
	wg.Go(func() { runErr <- b.Run(ctx) })
	time.Sleep(time.Until(start.Add(7 * time.Second)))
	c0, by0 := p.Counts(), p.BytesDown()
	time.Sleep(time.Until(start.Add(7*time.Second + row.window)))
	c1, by1 := p.Counts(), p.BytesDown()
	if b.Leading() {
		row.err = fmt.Errorf("the follower led")
	}
	cancel()
	if err := <-runErr; err != nil && row.err == nil {
		row.err = err
	}
	row.counts = map[string]int64{}
	for _, k := range kinds {
		row.counts[k] = c1[k] - c0[k]
	}
	row.bytes = by1 - by0
	return row
}
