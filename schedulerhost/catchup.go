package schedulerhost

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/batonhq/baton/audit"
)

// msgMissedWhileNobodyLed is how a new term logs, for each job whose
// last claimed tick it read, the ticks missed since (at Warn), or that
// none were (at Debug, msgNoneMissed).
const (
	msgMissedWhileNobodyLed = "missed ticks while nobody led"
	msgNoneMissed           = "no ticks missed while nobody led"
	// msgNoneClaimed: the ledger holds no claim of the job yet, so its
	// catch-up has nothing to count from (at Debug).
	msgNoneClaimed = "no tick of the job claimed yet: nothing to catch up"
)

// coverKey names a catch-up run: its job and tick (UnixNano).
type coverKey struct {
	job  string
	tick int64
}

const (
	// catchUpWorkers bounds the ledger reads a new term makes at once.
	catchUpWorkers = 16
	// maxMissedScan bounds how many missed ticks missedTicks walks.
	maxMissedScan = 100000
)

// catchUp applies each job's misfire policy to the ticks missed between
// its last claimed tick and termStart. The last claimed ticks are read a
// page of MaxBatch jobs per ledger call, catchUpWorkers pages at once.
// The catch-up ticks are claimed before the schedule loop starts, so a
// regular tick can never be claimed ahead of them; the first claims of
// all jobs go in shared batches (batch.go), and each job's runs start as
// soon as its claims are decided.
//
// A job SetJobs added, or whose schedule it changed, has no catch-up of
// the ticks before that reload (jobState.since).
func (t *termRun) catchUp(ctx context.Context, termStart time.Time) {
	h := t.h
	jobs := h.jobSet()
	last, read := t.lastClaimed(ctx, jobs)
	type pending struct {
		j   *jobState
		run []time.Time
		tn  turn
	}
	var todo []pending
	for i, j := range jobs {
		if last[i].IsZero() || ctx.Err() != nil {
			if read[i] && ctx.Err() == nil { // never claimed: nobody ran its ticks so far
				t.acct.missedSpan(j, j.sched.Next(laterOf(h.started, j.since).Add(-time.Nanosecond).In(h.cfg.Location)),
					termStart, true, audit.ReasonNoLeader, termStart)
			}
			continue
		}
		from := last[i]
		if j.since.After(from) {
			from = j.since
		}
		run, _ := t.missed(j, j.sched.Next(from.In(h.cfg.Location)), termStart, msgMissedWhileNobodyLed, "last_claimed", last[i])
		// The batch is admitted as one run (a run abandoned by an earlier
		// term may still be going), its ticks claimed in order now, before
		// the schedule loop starts; the runs then start one after another.
		if len(run) == 0 {
			continue
		}
		if !t.begin() {
			for _, tick := range run {
				h.log.Info("run not started: term stopping", "job", j.Name, "tick", tick, "token", t.token)
			}
			continue
		}
		ok, tn := t.admitCatchUp(j, run)
		if !ok {
			t.end()
			continue
		}
		todo = append(todo, pending{j, run, tn})
	}
	t.claims.expectN(len(todo))
	mark := t.markPauses() // the runs start after their claims, without waiting
	var wg sync.WaitGroup
	for _, p := range todo {
		wg.Go(func() {
			claimed := t.claimInOrder(p.j, p.run, p.tn, true)
			go t.runTicks(p.j, claimed, true, true, turn{}, false, mark)
		})
	}
	wg.Wait()
}

// msgNotFired: the term ended while its catch-up still waited on the
// ledger, before the schedule loop began; the loop would have fired the
// ticks since the term's start late. msgLoopLate: it began more than
// lateLoop after the term's start, and fires those ticks now.
const (
	msgNotFired = "ticks not fired: the term ended before its schedule loop began"
	msgLoopLate = "schedule loop began late: the ticks since the term began fire now"
	lateLoop    = time.Second
)

// caughtUp says, after the catch-up, what became of the ticks since
// termStart that only the schedule loop fires: so that no tick a leader
// could not fire goes unsaid.
func (t *termRun) caughtUp(ctx context.Context, termStart time.Time) {
	h := t.h
	now, _ := h.clock.now()
	if ctx.Err() == nil {
		if late := now.Sub(termStart); late > lateLoop {
			h.log.Warn(msgLoopLate, "token", t.token, "late", late)
		}
		return
	}
	for _, j := range h.jobSet() {
		if j.retired.Load() {
			continue
		}
		first := j.sched.Next(laterOf(termStart, j.since).In(h.cfg.Location))
		if first.IsZero() || first.After(now) {
			continue
		}
		_, n, _ := missedTicks(j.sched, first, now, 0)
		h.log.Warn(msgNotFired, "job", j.Name, "token", t.token, "first", first, "ticks", n, "until", now)
	}
}

// lastClaimed reads the last claimed tick of each of all (zero for a job
// whose read failed: it has no catch-up this term, as is logged); read
// says which were read.
func (t *termRun) lastClaimed(ctx context.Context, all []*jobState) (last []time.Time, read []bool) {
	h := t.h
	last, read = make([]time.Time, len(all)), make([]bool, len(all))
	page := max(1, h.cfg.Ledger.MaxBatch())
	sem := make(chan struct{}, catchUpWorkers)
	var wg sync.WaitGroup
	for from := 0; from < len(all) && ctx.Err() == nil; from += page {
		jobs := all[from:min(from+page, len(all))]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			names := make([]string, len(jobs))
			for i, j := range jobs {
				names[i] = j.Name
			}
			rctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
			got, err := h.cfg.Ledger.LastClaimed(rctx, names)
			cancel()
			if err == nil && len(got) != len(names) {
				err = fmt.Errorf("ledger returned %d ticks for %d jobs", len(got), len(names))
			}
			if err != nil {
				h.log.Warn("catch-up skipped: reading last claimed ticks failed", "jobs", len(names), "first", names[0], "token", t.token, "err", err)
				return
			}
			copy(last[from:], got)
			for i := range got {
				read[from+i] = true
			}
			for i, tk := range got {
				if tk.IsZero() {
					h.log.Debug(msgNoneClaimed, "job", names[i], "token", t.token)
				}
			}
		})
	}
	wg.Wait()
	return last, read
}

// missedTicks walks the ticks of s from first through until: it counts
// them (the count stops at maxMissedScan) and lists those within grace of
// until, oldest first. next is the first tick of s after until. Cron ticks
// are at least a second apart, so when there are too many to walk, the
// ticks within grace are listed from until - min(grace, maxMissedScan
// seconds) instead.
func missedTicks(s cron.Schedule, first, until time.Time, grace time.Duration) (inGrace []time.Time, total int, next time.Time) {
	n := first
	for ; !n.IsZero() && !n.After(until); n = s.Next(n) {
		total++
		if until.Sub(n) <= grace {
			inGrace = append(inGrace, n)
		}
		if total >= maxMissedScan {
			inGrace = inGrace[:0]
			from := until.Add(-min(grace, maxMissedScan*time.Second) - time.Nanosecond)
			for g := s.Next(from); !g.IsZero() && !g.After(until); g = s.Next(g) {
				inGrace = append(inGrace, g)
			}
			return inGrace, total, s.Next(until)
		}
	}
	return inGrace, total, n
}

// defaultGrace is one period of s around t, capped at a minute.
func defaultGrace(s cron.Schedule, t time.Time) time.Duration {
	a := s.Next(t)
	if a.IsZero() {
		return maxDefaultGrace
	}
	b := s.Next(a)
	if b.IsZero() {
		return maxDefaultGrace
	}
	return min(b.Sub(a), maxDefaultGrace)
}

// skipOver handles the ticks of j from first through until that a forward
// step of the wall clock skipped over, on the loop's goroutine: the job's
// Misfire policy picks which to run, as at term start, and they start as
// one catch-up run (claimed in order, run one after another). It returns
// j's next tick after until.
func (t *termRun) skipOver(j *jobState, first, until time.Time) (next time.Time) {
	run, next := t.missed(j, first, until, "wall clock stepped forward: ticks skipped over")
	if len(run) == 0 || !t.begin() {
		return next
	}
	ok, tn := t.admitCatchUp(j, run)
	if !ok {
		t.end()
		return next
	}
	mark := t.markPauses()
	go func() {
		if t.h.cfg.Ledger == nil {
			t.runTicks(j, run, true, false, turn{}, false, mark)
			return
		}
		t.runTicks(j, t.claimInOrder(j, run, tn, false), true, true, turn{}, false, mark)
	}()
	return next
}

// missed applies j's Misfire policy to its ticks from first through until
// (missed while nobody led, or skipped over by a forward step of the wall
// clock): it logs them with msg and attrs (and the first missed tick the
// catch-up runs stand for, covers_from), counts the misfires, and returns
// the ticks to run, oldest first, and j's first tick after until. A
// term's catch-up that finds none missed says so at Debug
// (msgNoneMissed), so that every job whose last claim was read has a
// line.
func (t *termRun) missed(j *jobState, first, until time.Time, msg string, attrs ...any) (run []time.Time, next time.Time) {
	h := t.h
	until = until.In(h.cfg.Location)
	grace := j.MisfireGrace
	if grace == 0 {
		grace = defaultGrace(j.sched, until)
	}
	inGrace, total, next := missedTicks(j.sched, first, until, grace)
	args := append([]any{"job", j.Name, "token", t.token}, attrs...)
	defer func() {
		why, nobody := audit.ReasonClockStep, time.Time{}
		if msg == msgMissedWhileNobodyLed {
			why, nobody = audit.ReasonNoLeader, until
		}
		t.acct.missed(j, first, until, inGrace, run, why, nobody)
	}()
	if total == 0 {
		if msg == msgMissedWhileNobodyLed {
			h.log.Debug(msgNoneMissed, args...)
		}
		return nil, next
	}
	var from time.Time // the first missed tick the catch-up runs stand for
	switch j.Misfire {
	case MisfireRunOnce:
		if len(inGrace) > 0 {
			run, from = inGrace[len(inGrace)-1:], inGrace[0]
			t.covers.Store(coverKey{j.Name, run[0].UnixNano()}, from)
		}
	case MisfireRunAll:
		run = inGrace[max(0, len(inGrace)-j.MaxCatchUp):]
		if len(run) > 0 {
			from = run[0]
		}
	}
	args = append(args, "missed", total, "within_grace", len(inGrace), "grace", grace, "policy", j.Misfire,
		"catch_up_runs", len(run))
	if len(run) > 0 {
		args = append(args, "covers_from", from)
	}
	h.log.Warn(msg, args...)
	if misfired := total - len(run); misfired > 0 && h.cfg.Observer != nil {
		h.cfg.Observer.Misfired(j.Name, misfired)
	}
	return run, next
}
