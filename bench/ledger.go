package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// ledgerBackends are the backends of the ledger section, in report order.
var ledgerBackends = []string{"etcd", "postgres", "mariadb", "consul", "redis", "kube"}

// ledgerJobs are the job counts of the ledger section.
var ledgerJobs = []int{1, 100, 1000, 10000}

// ledRow is one trial of the ledger section: a Host with its backend's
// Ledger and jobs every-second jobs.
type ledRow struct {
	backend     string
	jobs        int
	window      time.Duration
	d           dist
	missing     int
	extra       int           // runs beyond one per tick in the window (must be 0)
	runs        int64         // runs of the whole trial: warm-up, window and the runs after it
	counted     bool          // the proxy counted the requests (writes, requests)
	writes      float64       // backend write requests per instant (at the proxy)
	claimWrites float64       // Ledger.Claim calls per instant (one batch each)
	finishCalls float64       // Ledger.Finish calls per instant
	requests    float64       // all backend requests per instant but renewals and watches
	rssMB       float64       // the leader process's peak RSS during the window
	cpu         time.Duration // etcd and Redis (servers run by the bench): the server's CPU time per instant
	fullBatch   dist          // durations of Claim calls of MaxBatch claims, in the window
	batch       int           // the ledger's MaxBatch
	err         error
}

// accounting is how a ledger trial's Host keeps the tick accounting.
type accounting int

const (
	noControl     accounting = iota // no control store: no accounting, as the ledger section runs
	accountingOn                    // the backend's control store, the leader writes the Accounts
	accountingOff                   // the control store, schedulerhost.Config.NoAccounting
)

// ledgerTrial runs a Host with backend's Ledger and jobs jobs on
// `* * * * * *` (all due at the same instant) for warm + window, and
// measures the lateness of the runs of the window's ticks, the runs
// missing or extra, the backend requests per instant and the peak RSS.
func ledgerTrial(e *env, backend string, jobs int, warm, window time.Duration, acct accounting) ledRow {
	return tracedTrial(e, backend, jobs, warm, window, acct, nil)
}

// tracedTrial is ledgerTrial with tr as the Host's Tracer (nil: none).
func tracedTrial(e *env, backend string, jobs int, warm, window time.Duration, acct accounting, tr schedulerhost.Tracer) ledRow {
	row := ledRow{backend: backend, jobs: jobs, window: window}
	p, err := newCountProxy(e.targetOf(backend), protoOf(backend))
	if err != nil {
		row.err = err
		return row
	}
	defer p.Close()
	lane := fmt.Sprintf("l%d-%d", jobs, time.Now().UnixNano())
	c, err := openLedger(e, backend, p.Addr(), lane)
	if err != nil {
		row.err = err
		return row
	}
	defer c.close()
	row.batch = c.ledger.MaxBatch()
	cl := &countingLedger{Ledger: c.ledger}

	rec := &trialRuns{seen: make(map[int]map[int64]int, jobs)}
	js := make([]schedulerhost.Job, jobs)
	for i := range js {
		js[i] = schedulerhost.Job{Name: fmt.Sprintf("job-%05d", i), Schedule: "* * * * * *", Overlap: schedulerhost.OverlapAllow,
			Misfire: schedulerhost.MisfireSkip, Run: rec.run(i)}
	}
	hcfg := schedulerhost.Config{Jobs: js, Logger: quiet, Ledger: cl, Instance: "bench", ShutdownTimeout: 30 * time.Second, Tracer: tr}
	if acct != noControl {
		if hcfg.Accounts, hcfg.Control, err = accountStores(c.backend); err != nil {
			row.err = err
			return row
		}
		hcfg.NoAccounting = acct == accountingOff
	}
	h, err := schedulerhost.New(hcfg)
	if err != nil {
		row.err = err
		return row
	}
	el, err := election.New(election.Config{Backend: c.backend, Identity: election.Identity{ID: "bench"}, Logger: quiet})
	if err != nil {
		row.err = err
		return row
	}
	runtime.GC()
	debug.FreeOSMemory()
	sm := newSampler(time.Now(), warm, window, jobs)
	rec.sm = sm
	stopAt := sm.to.Add(2 * time.Second) // the window's last runs finish and are recorded
	ctx, cancel := context.WithDeadline(context.Background(), stopAt)
	defer cancel()

	// Requests are counted from half a second before the window's first
	// tick to half a second before the tick after its last: window/1s
	// instants, each with its claims and the finishes of the runs before.
	var c0, c1 map[string]int64
	var l0, l1 [2]int64
	var f0, f1 int
	var cpu0, cpu1 time.Duration
	var peak atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		time.Sleep(time.Until(sm.from.Add(-500 * time.Millisecond)))
		c0, l0, f0 = p.Counts(), cl.counts(), len(cl.fullBatches())
		cpu0, _ = e.serverCPU(backend)
		for t := time.NewTicker(100 * time.Millisecond); time.Now().Before(sm.to.Add(-500 * time.Millisecond)); <-t.C {
			if r := rssBytes(); r > peak.Load() {
				peak.Store(r)
			}
		}
		c1, l1, f1 = p.Counts(), cl.counts(), len(cl.fullBatches())
		cpu1, _ = e.serverCPU(backend)
	})
	runErr := el.Run(ctx, h.Lead)
	wg.Wait()
	if runErr != nil && ctx.Err() == nil {
		row.err = runErr
	}
	instants := window.Seconds()
	row.counted = p.Counting()
	for _, k := range kinds {
		d := float64(c1[k]-c0[k]) / instants
		if k == kWrite {
			row.writes = d
		}
		if k == kWrite || k == kRead || k == kOther {
			row.requests += d
		}
	}
	row.claimWrites = float64(l1[0]-l0[0]) / instants
	row.finishCalls = float64(l1[1]-l0[1]) / instants
	row.rssMB = float64(peak.Load()) / (1 << 20)
	row.cpu = time.Duration(float64(cpu1-cpu0) / instants)
	if full := cl.fullBatches(); f1 > f0 && f1 <= len(full) {
		row.fullBatch = dist{s: append([]time.Duration(nil), full[f0:f1]...)}
	}
	got := sm.samples()
	row.d = dist{s: append([]time.Duration(nil), got...)}
	row.runs = rec.all.Load()
	want := jobs * int(window/time.Second)
	n, extra := rec.tally()
	row.extra = extra
	row.missing = want - n
	return row
}

// trialRuns records a ledger trial's runs: every run, and the runs of
// each job's ticks in the sampler's window.
type trialRuns struct {
	sm   *sampler // set before the Host leads
	all  atomic.Int64
	mu   sync.Mutex
	seen map[int]map[int64]int // job index -> tick -> runs
}

// run is job i's function: it records the run's lateness and its tick.
func (r *trialRuns) run(i int) func(context.Context) error {
	return func(ctx context.Context) error {
		now := time.Now()
		r.all.Add(1)
		t, _ := schedulerhost.TickFromContext(ctx)
		r.sm.record(t.Time, now)
		if !t.Time.Before(r.sm.from) && t.Time.Before(r.sm.to) {
			r.mu.Lock()
			if r.seen[i] == nil {
				r.seen[i] = map[int64]int{}
			}
			r.seen[i][t.Time.Unix()]++
			r.mu.Unlock()
		}
		return nil
	}
}

// tally returns how many ticks of the window ran, and the runs beyond
// one per tick.
func (r *trialRuns) tally() (ticks, extra int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, byTick := range r.seen {
		for _, k := range byTick {
			ticks++
			extra += k - 1
		}
	}
	return ticks, extra
}

// countingLedger counts the Host's Claim and Finish calls, and times the
// Claim calls of full batches (MaxBatch claims): the backend's cost of one
// batch, quoted where a lateness target is not met.
type countingLedger struct {
	ledger.Ledger
	claims, finishes atomic.Int64

	mu   sync.Mutex
	full []time.Duration // durations of full-batch Claim calls
}

func (l *countingLedger) Claim(ctx context.Context, cs []ledger.Claim) []error {
	l.claims.Add(1)
	start := time.Now()
	errs := l.Ledger.Claim(ctx, cs)
	if len(cs) == l.MaxBatch() {
		took := time.Since(start)
		l.mu.Lock()
		l.full = append(l.full, took)
		l.mu.Unlock()
	}
	return errs
}

// fullBatches returns the durations of full-batch Claim calls so far.
func (l *countingLedger) fullBatches() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.full...)
}

func (l *countingLedger) Finish(ctx context.Context, rs []ledger.Run) []error {
	l.finishes.Add(1)
	return l.Ledger.Finish(ctx, rs)
}

func (l *countingLedger) counts() [2]int64 { return [2]int64{l.claims.Load(), l.finishes.Load()} }

// rssBytes returns this process's resident set size.
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		if f := strings.Fields(s.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
