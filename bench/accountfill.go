package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// everyMinute is the schedule of the accounting section's jobs.
const everyMinute = "0 * * * * *"

// minuteNext is everyMinute's Next in UTC, as an Account records it.
func minuteNext() audit.Next {
	s, err := schedulerhost.ParseSchedule(everyMinute)
	if err != nil {
		panic(err)
	}
	return func(t time.Time) time.Time { return s.Next(t.UTC()) }
}

// accJobName names the accounting section's job i.
func accJobName(i int) string { return fmt.Sprintf("job-%d", i) }

// typicalDay is the Account of an every-minute job at now (a whole
// minute) after a day, through the tick at now: two terms of two instances, runs ok with three
// that failed or timed out, the tick in flight at the failover lost, two
// ticks missed while nobody led. Ten ranges, as the leader's writer
// would have stored them.
func typicalDay(job string, now time.Time) audit.Account {
	next := minuteNext()
	a := audit.Account{Job: job}
	a.SetSpec(audit.Spec{At: now.Add(-30 * time.Hour), Schedule: everyMinute, Zone: "UTC"})
	start := now.Add(-25 * time.Hour)
	f1, t2, fo, t3 := now.Add(-20*time.Hour), now.Add(-15*time.Hour), now.Add(-9*time.Hour), now.Add(-3*time.Hour)
	ok := func(from, to time.Time, token uint64, inst string) audit.Range {
		return audit.Range{Class: audit.Ran, Reason: audit.ReasonOK, First: from, Last: to, Count: int64(to.Sub(from)/time.Minute) + 1,
			Token: token, Instance: inst, Attempts: 1, Late: 3 * time.Millisecond}
	}
	one := func(t time.Time, c audit.Class, r audit.Reason, token uint64, inst, err string) audit.Range {
		return audit.Range{Class: c, Reason: r, First: t, Last: t, Count: 1, Token: token, Instance: inst, Attempts: 3, Late: 4 * time.Millisecond, Error: err}
	}
	m := time.Minute
	for _, r := range []audit.Range{
		ok(start, f1.Add(-m), 41, "node-a"),
		one(f1, audit.Ran, audit.ReasonFailed, 41, "node-a", "exit status 1: dial tcp 10.0.3.7:5432: connect: connection refused"),
		ok(f1.Add(m), t2.Add(-m), 41, "node-a"),
		one(t2, audit.Ran, audit.ReasonTimeout, 41, "node-a", "context deadline exceeded (timeout 30s)"),
		ok(t2.Add(m), fo.Add(-m), 41, "node-a"),
		one(fo, audit.Lost, audit.ReasonOutcomeUnknown, 41, "node-a", "term ended before its outcome was recorded"),
		{Class: audit.Missed, Reason: audit.ReasonNoLeader, First: fo.Add(m), Last: fo.Add(2 * m), Count: 2,
			NobodyFrom: fo.Add(20 * time.Second), NobodyUntil: fo.Add(2*m + 40*time.Second)},
		ok(fo.Add(3*m), t3.Add(-m), 42, "node-b"),
		one(t3, audit.Ran, audit.ReasonFailed, 42, "node-b", "exit status 2: upstream returned 503 Service Unavailable"),
		ok(t3.Add(m), now, 42, "node-b"),
	} {
		a.Add(r, next)
	}
	return a
}

// worstAccount is an Account as large as one gets: alternate ok and
// failed ticks, each failure with an error of audit.MaxError bytes,
// until the oldest fold into the counts to keep it within audit.MaxBytes.
func worstAccount(job string, now time.Time) audit.Account {
	next := minuteNext()
	a := audit.Account{Job: job}
	a.SetSpec(audit.Spec{At: now.Add(-30 * time.Hour), Schedule: everyMinute, Zone: "UTC"})
	long := strings.Repeat("error text of the longest kind kept; ", 8)
	for t := now.Add(-4 * time.Hour); t.Before(now); t = t.Add(2 * time.Minute) {
		a.Add(audit.Range{Class: audit.Ran, Reason: audit.ReasonOK, First: t, Last: t, Count: 1, Token: 42, Instance: "node-b", Attempts: 1}, next)
		a.Add(audit.Range{Class: audit.Ran, Reason: audit.ReasonFailed, First: t.Add(time.Minute), Last: t.Add(time.Minute), Count: 1,
			Token: 42, Instance: "node-b", Attempts: 3, Error: long}, next)
	}
	return a
}

// fittedSize is the stored size of a: what audit.Save writes.
func fittedSize(a audit.Account) (int, error) {
	a.Folded = nil
	b, err := a.Fit()
	return len(b), err
}

// saveAccounts writes a typical day's Account of each of jobs jobs into
// s, unfenced (Token 0), 16 writes at a time.
func saveAccounts(ctx context.Context, s control.Store, jobs int, now time.Time) error {
	const workers = 16
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range workers {
		wg.Go(func() {
			for i := range next {
				st := audit.Stored{Account: typicalDay(accJobName(i), now)}
				if _, err := audit.Save(ctx, s, st, 0); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range jobs {
		mu.Lock()
		failed := len(errs) > 0
		mu.Unlock()
		if failed {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// fillHistory claims and finishes job's last 20 ticks through now (a
// whole minute) in a real term of backend b: the ledger history a follower's
// audit reads with the Account (schedulerhost.AbsenceHistory entries).
func fillHistory(ctx context.Context, b election.Backend, l ledger.Ledger, job string, now time.Time) error {
	el, err := election.New(election.Config{Backend: b, Identity: election.Identity{ID: "node-b"}, Logger: quiet})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var fillErr error
	done := false
	runErr := el.Run(ctx, func(_ context.Context, term election.Term) error {
		defer cancel()
		for k := schedulerhost.AbsenceHistory - 1; k >= 0; k-- {
			tick := now.Add(-time.Duration(k) * time.Minute)
			c := ledger.Claim{Job: job, Tick: tick, Token: term.Token(), Instance: "node-b", Started: tick.Add(3 * time.Millisecond)}
			if errs := l.Claim(ctx, []ledger.Claim{c}); errs[0] != nil {
				fillErr = fmt.Errorf("claim %s %v: %w", job, tick, errs[0])
				return nil
			}
			r := ledger.Run{Job: job, Tick: tick, Instance: "node-b", Token: term.Token(), Started: c.Started,
				Ended: tick.Add(850 * time.Millisecond), Result: ledger.ResultOK, Attempts: 1}
			if errs := l.Finish(ctx, []ledger.Run{r}); errs[0] != nil {
				fillErr = fmt.Errorf("finish %s %v: %w", job, tick, errs[0])
				return nil
			}
		}
		done = true
		return nil
	})
	if fillErr != nil {
		return fillErr
	}
	if !done {
		return fmt.Errorf("fill the history of %s: no term within a minute (%v)", job, runErr)
	}
	return nil
}
