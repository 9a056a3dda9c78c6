package schedulerhost

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
)

// catchUpWorkers bounds the ledger reads a new term makes at once.
const catchUpWorkers = 16

// catchUp applies each job's misfire policy to the ticks missed between
// its last claimed tick and termStart. The catch-up ticks are claimed
// before the schedule loop starts, so a regular tick can never be claimed
// ahead of them; their runs then start like any other.
func (t *termRun) catchUp(ctx context.Context, termStart time.Time) {
	sem := make(chan struct{}, catchUpWorkers)
	var wg sync.WaitGroup
	for _, j := range t.h.jobs {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t.catchUpJob(ctx, j, termStart)
		})
	}
	wg.Wait()
}

// missedTicks lists the ticks of s after last, up to and including until,
// that are within grace of until, and counts all of them (the count stops
// at maxMissedScan).
func missedTicks(s cron.Schedule, last, until time.Time, grace time.Duration) (inGrace []time.Time, total int) {
	for n := s.Next(last); !n.IsZero() && !n.After(until); n = s.Next(n) {
		total++
		if until.Sub(n) <= grace {
			inGrace = append(inGrace, n)
		}
		if total >= maxMissedScan {
			break
		}
	}
	return inGrace, total
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

func (t *termRun) catchUpJob(ctx context.Context, j *jobState, termStart time.Time) {
	h := t.h
	log := h.log.With("job", j.Name, "token", t.token)
	rctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	last, err := h.cfg.Ledger.LastClaimed(rctx, j.Name)
	cancel()
	if err != nil {
		log.Warn("catch-up skipped: reading last claimed tick failed", "err", err)
		return
	}
	if last.IsZero() {
		return
	}
	grace := j.MisfireGrace
	if grace == 0 {
		grace = defaultGrace(j.sched, termStart.In(h.cfg.Location))
	}
	inGrace, total := missedTicks(j.sched, last.In(h.cfg.Location), termStart.In(h.cfg.Location), grace)
	if total == 0 {
		return
	}
	var run []time.Time
	switch j.Misfire {
	case MisfireRunOnce:
		if len(inGrace) > 0 {
			run = inGrace[len(inGrace)-1:]
		}
	case MisfireRunAll:
		run = inGrace[max(0, len(inGrace)-j.MaxCatchUp):]
	}
	misfired := total - len(run)
	log.Warn("missed ticks while nobody led", "last_claimed", last, "missed", total, "within_grace", len(inGrace),
		"grace", grace, "policy", j.Misfire, "catch_up_runs", len(run))
	if misfired > 0 && h.cfg.Observer != nil {
		h.cfg.Observer.Misfired(j.Name, misfired)
	}
	// Claim in order now; the runs start afterwards, one after another.
	var claimed []time.Time
	for _, tick := range run {
		err := t.claim(j, tick, true)
		if errors.Is(err, ErrTickClaimed) {
			continue
		}
		if err != nil {
			break
		}
		claimed = append(claimed, tick)
	}
	if len(claimed) == 0 {
		return
	}
	if !t.begin() {
		for _, tick := range claimed {
			t.finishNotStarted(j, tick, true)
		}
		return
	}
	j.mu.Lock()
	j.active++
	j.mu.Unlock()
	go t.run(j, claimed, true, true, nil)
}
