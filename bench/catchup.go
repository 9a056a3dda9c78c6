package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/schedulerhost"
)

// catchRow is one catch-up trial: a leader with jobs every-second jobs
// crashes (its connection is cut), and the next leader's catch-up runs
// (MisfireRunOnce, one per job) are timed from its term start.
type catchRow struct {
	backend string
	jobs    int
	took    time.Duration // term start to the last catch-up run's start
	claimed time.Duration // term start to the first catch-up run's start
	runs    int           // catch-up runs started (want jobs)
	extra   int           // ticks run twice across both leaders (must be 0)
	err     error
}

// catchUpTrial measures catch-up at scale on backend.
func catchUpTrial(e *env, backend string, jobs int) catchRow {
	row := catchRow{backend: backend, jobs: jobs}
	lane := fmt.Sprintf("c%d-%d", jobs, time.Now().UnixNano())
	var mu sync.Mutex
	ran := make(map[string]map[int64]int, jobs)
	var termStart time.Time
	var first, last time.Time
	mkJobs := func() []schedulerhost.Job {
		js := make([]schedulerhost.Job, jobs)
		for i := range js {
			js[i] = schedulerhost.Job{Name: fmt.Sprintf("job-%05d", i), Schedule: "* * * * * *", Overlap: schedulerhost.OverlapAllow,
				Misfire: schedulerhost.MisfireRunOnce, MisfireGrace: time.Minute,
				Run: func(ctx context.Context) error {
					now := time.Now()
					t, _ := schedulerhost.TickFromContext(ctx)
					mu.Lock()
					defer mu.Unlock()
					if ran[t.Job] == nil {
						ran[t.Job] = map[int64]int{}
					}
					ran[t.Job][t.Time.Unix()]++
					if t.CatchUp {
						row.runs++
						if first.IsZero() {
							first = now
						}
						last = now
					}
					return nil
				}}
		}
		return js
	}
	type node struct {
		p      *countProxy
		c      *ledgerConn
		cancel context.CancelFunc
		done   chan struct{}
	}
	start := func(id string, onLead func()) (*node, error) {
		p, err := newCountProxy(e.targetOf(backend), protoOf(backend))
		if err != nil {
			return nil, err
		}
		c, err := openLedger(e, backend, p.Addr(), lane)
		if err != nil {
			p.Close()
			return nil, err
		}
		h, err := schedulerhost.New(schedulerhost.Config{Jobs: mkJobs(), Logger: quiet, Ledger: c.ledger, Instance: id, ShutdownTimeout: 10 * time.Second})
		if err != nil {
			return nil, err
		}
		el, err := election.New(election.Config{Backend: c.backend, Identity: election.Identity{ID: id}, Logger: quiet})
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		n := &node{p: p, c: c, cancel: cancel, done: make(chan struct{})}
		go func() {
			defer close(n.done)
			el.Run(ctx, func(ctx context.Context, term election.Term) error {
				onLead()
				return h.Lead(ctx, term)
			})
		}()
		return n, nil
	}
	led := make(chan struct{})
	var ledOnce sync.Once
	a, err := start("a", func() { ledOnce.Do(func() { close(led) }) })
	if err != nil {
		row.err = err
		return row
	}
	select {
	case <-led:
	case <-time.After(30 * time.Second):
		row.err = fmt.Errorf("a did not lead within 30 s")
		a.cancel()
		return row
	}
	time.Sleep(3 * time.Second) // every job claims a few ticks
	a.p.Blackhole()             // a crashes, as the backend sees it
	bLed := make(chan struct{})
	b, err := start("b", func() {
		mu.Lock()
		termStart = time.Now()
		mu.Unlock()
		close(bLed)
	})
	if err != nil {
		row.err = err
		a.cancel()
		return row
	}
	select {
	case <-bLed:
	case <-time.After(60 * time.Second):
		row.err = fmt.Errorf("b did not lead within 60 s")
	}
	time.Sleep(5 * time.Second)
	b.cancel()
	<-b.done
	a.cancel()
	a.p.Close()
	<-a.done
	b.p.Close()
	a.c.close()
	b.c.close()
	mu.Lock()
	defer mu.Unlock()
	if row.runs > 0 {
		row.took, row.claimed = last.Sub(termStart), first.Sub(termStart)
	}
	for _, ticks := range ran {
		for _, k := range ticks {
			row.extra += k - 1
		}
	}
	return row
}
