package main

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/robfig/cron/v3"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/schedulerhost"
)

// sampler collects lateness samples of ticks whose nominal time falls in
// [from, to): n jobs × whole seconds in the window.
type sampler struct {
	from, to time.Time
	buf      []time.Duration
	i        atomic.Int64
	late1s   atomic.Int64 // runs whose actual start was a second or more late by truncation (not recorded)
}

func newSampler(start time.Time, warm, window time.Duration, jobs int) *sampler {
	from := start.Add(warm).Truncate(time.Second).Add(time.Second)
	to := from.Add(window)
	return &sampler{from: from, to: to, buf: make([]time.Duration, jobs*int(window/time.Second)+jobs)}
}

// record stores now - tick if tick is inside the window.
func (s *sampler) record(tick, now time.Time) {
	if tick.Before(s.from) || !tick.Before(s.to) {
		return
	}
	i := s.i.Add(1) - 1
	if int(i) < len(s.buf) {
		s.buf[i] = now.Sub(tick)
	}
}

func (s *sampler) samples() []time.Duration {
	n := min(int(s.i.Load()), len(s.buf))
	return s.buf[:n]
}

// latenessRun measures one runner with jobs every-second jobs: the
// lateness of each run (actual start of the job function minus the
// nominal tick) for ticks in a window of whole seconds after a warm-up.
// baton's Host gives the nominal tick to the job (TickFromContext); the
// peers do not, so for them the nominal tick is the start time truncated
// to the second, exact while lateness stays under one second (the number
// of samples, jobs × window seconds, shows it did: a run a second late
// would land on the next tick and one would be missing or doubled).
func latenessRun(runner string, jobs int, warm, window time.Duration) (dist, int, error) {
	runtime.GC()
	var sm *sampler
	var stopAt time.Time
	arm := func() { // after the jobs are set up, before the runner starts
		sm = newSampler(time.Now(), warm, window, jobs)
		stopAt = sm.to.Add(300 * time.Millisecond)
	}
	switch runner {
	case "baton":
		js := make([]schedulerhost.Job, jobs)
		for i := range js {
			js[i] = schedulerhost.Job{Name: fmt.Sprintf("job-%d", i), Schedule: "* * * * * *", Overlap: schedulerhost.OverlapAllow,
				Run: func(ctx context.Context) error {
					now := time.Now()
					t, _ := schedulerhost.TickFromContext(ctx)
					sm.record(t.Time, now)
					return nil
				}}
		}
		h, err := schedulerhost.New(schedulerhost.Config{Jobs: js, Logger: quiet})
		if err != nil {
			return dist{}, 0, err
		}
		// A real term (the in-memory backend) around Host.Lead, as a node
		// runs it.
		mem := memory.New(election.Timing{})
		el, err := election.New(election.Config{Backend: mem.Candidate(), Identity: election.Identity{ID: "lateness"}, Logger: quiet})
		if err != nil {
			return dist{}, 0, err
		}
		arm()
		ctx, cancel := context.WithDeadline(context.Background(), stopAt)
		defer cancel()
		el.Run(ctx, h.Lead)
	case "floor":
		// No scheduler: sleep to each second and start one bare goroutine
		// per job, the least any goroutine-per-run runner can do.
		arm()
		var wg sync.WaitGroup
		for tick := time.Now().Truncate(time.Second).Add(time.Second); tick.Before(stopAt); tick = tick.Add(time.Second) {
			time.Sleep(time.Until(tick))
			for range jobs {
				wg.Go(func() { sm.record(tick, time.Now()) })
			}
		}
		wg.Wait()
	case "robfig":
		c := cron.New(cron.WithSeconds())
		for range jobs {
			if _, err := c.AddFunc("* * * * * *", func() {
				now := time.Now()
				sm.record(now.Truncate(time.Second), now)
			}); err != nil {
				return dist{}, 0, err
			}
		}
		arm()
		c.Start()
		time.Sleep(time.Until(stopAt))
		<-c.Stop().Done()
	case "gocron":
		s, err := gocron.NewScheduler()
		if err != nil {
			return dist{}, 0, err
		}
		for range jobs {
			if _, err := s.NewJob(gocron.CronJob("* * * * * *", true), gocron.NewTask(func() {
				now := time.Now()
				sm.record(now.Truncate(time.Second), now)
			})); err != nil {
				return dist{}, 0, err
			}
		}
		arm()
		s.Start()
		time.Sleep(time.Until(stopAt))
		s.Shutdown()
	}
	got := sm.samples()
	want := jobs * int(window/time.Second)
	return dist{s: append([]time.Duration(nil), got...)}, want - len(got), nil
}
