package backendtest

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/schedulerhost"
)

// JobControlHarness tells RunJobControl how to make elections whose
// candidates carry a control store.
type JobControlHarness struct {
	// NewElection starts a fresh election and returns a function making
	// candidates for it, each with its Ledger, its Control store and the
	// Network that all of its traffic goes through.
	NewElection func(t *testing.T, timing election.Timing) func(t *testing.T, name string) JobControlCandidate
}

// JobControlCandidate is a candidate with its control store and the
// network path that all of its traffic goes through.
type JobControlCandidate struct {
	Candidate
	Control control.Store
	Network Network
}

// controlTiming leaves a term 12 s after its last renewal: replies held
// for the 5 s of a control write's timeout do not end it.
var controlTiming = election.Timing{TTL: 15 * time.Second, RenewInterval: time.Second, SafetyMargin: 3 * time.Second}

// RunJobControl checks, as subtests of t, that the operators'
// actions a Host acknowledged are honoured on a real backend:
//   - a run-now request whose take was applied by the server but whose
//     answer was lost (held until the client timed out, or answered for a
//     resent command) runs once, in the term that took it;
//   - a pause acknowledged between a tick and its jittered start stops
//     the run;
//   - of the requests a deposed term left taken, the next leader runs
//     once the one never started, and settles the started one as
//     cancelled, not run.
func RunJobControl(t *testing.T, h JobControlHarness) {
	for _, mode := range []lostMode{answerHeld, takeResent} {
		t.Run("RunNowAnswerLost/"+string(mode), func(t *testing.T) {
			testRunNowAnswerLost(t, h, mode)
		})
	}
	t.Run("PauseDuringJitter", func(t *testing.T) {
		testPauseDuringJitter(t, h)
	})
	t.Run("RunNowLeftByADeposedTerm", func(t *testing.T) {
		testRunNowLeftByADeposedTerm(t, h)
	})
}

// lostMode is how the answer to the take is lost.
type lostMode string

const (
	// answerHeld: the server applies the take, its answer is held until
	// the client's write timed out.
	answerHeld lostMode = "answer-held"
	// takeResent: the server applies the take and the client, as after a
	// network error, sends it again: the resent write finds the version
	// changed and fails.
	takeResent lostMode = "take-resent"
)

// lossyStore loses the answer to the first write that takes a run-now
// request, as mode says.
type lossyStore struct {
	control.Store
	proxy Network
	mode  lostMode

	mu    sync.Mutex
	done  bool
	err   error // what the Host got from the take
	until time.Time
}

func (s *lossyStore) Put(ctx context.Context, p control.Put) (int64, error) {
	s.mu.Lock()
	take := !s.done && p.Token != 0 && bytes.Contains(p.Value, []byte(`"state":"taken"`))
	s.done = s.done || take
	s.mu.Unlock()
	if !take {
		return s.Store.Put(ctx, p)
	}
	var v int64
	var err error
	switch s.mode {
	case answerHeld:
		// A conditioned write first, that the take is one round trip
		// (etcd's store finds the term's key once per token).
		if _, err := s.Store.Put(ctx, control.Put{Key: "hosttest/warm", Value: []byte("x"), IfVersion: control.AnyVersion, Token: p.Token}); err != nil {
			return 0, err
		}
		s.proxy.HoldReplies()
		v, err = s.Store.Put(ctx, p)
		s.proxy.Heal()
	case takeResent:
		v, err = s.Store.Put(ctx, p)
		if err == nil {
			v, err = s.Store.Put(ctx, p)
		}
	}
	s.mu.Lock()
	s.err, s.until = err, time.Now()
	s.mu.Unlock()
	return v, err
}

func (s *lossyStore) takeErr() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done, s.err
}

func controlLogger(t *testing.T, name string) *slog.Logger {
	if os.Getenv("BATON_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", name)
	}
	return slog.New(slog.DiscardHandler)
}

// startControlNode starts an Elector and a Host with store as its
// Control, stopped when t ends.
func startControlNode(t *testing.T, c JobControlCandidate, store control.Store, jobs ...schedulerhost.Job) (*election.Elector, *schedulerhost.Host) {
	t.Helper()
	log := controlLogger(t, "a")
	e, err := election.New(election.Config{Backend: c.Backend, Identity: election.Identity{ID: "a"}, Logger: log, RetryPeriod: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	host, err := schedulerhost.New(schedulerhost.Config{Jobs: jobs, Ledger: c.Ledger, Control: store, Instance: "a",
		Logger: log, ShutdownTimeout: 5 * time.Second, RunNowPoll: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stop := runElector(e, host.Lead)
	t.Cleanup(func() {
		c.Network.Heal()
		if !stop(20 * time.Second) {
			t.Errorf("Run did not return within 20s of cancel")
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for !e.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("no leader within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return e, host
}

// manualRuns records the run-now runs of a job by request id.
type manualRuns struct {
	mu   sync.Mutex
	runs map[string][]uint64 // request id -> tokens of its runs
}

func (m *manualRuns) job(name string) schedulerhost.Job {
	return schedulerhost.Job{Name: name, Schedule: "@every 1h", Run: func(ctx context.Context) error {
		mr, ok := schedulerhost.ManualFromContext(ctx)
		if !ok {
			return nil
		}
		tok, _ := election.TokenFromContext(ctx)
		m.mu.Lock()
		if m.runs == nil {
			m.runs = map[string][]uint64{}
		}
		m.runs[mr.RequestID] = append(m.runs[mr.RequestID], tok)
		m.mu.Unlock()
		return nil
	}}
}

func (m *manualRuns) of(id string) []uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]uint64(nil), m.runs[id]...)
}

// testRunNowAnswerLost: the leader's take of a run-now request is applied
// by the server and its answer lost. The term must find out that it holds
// the request and run it once: the request ends done, run by the term's
// token, and the job ran it exactly once.
func testRunNowAnswerLost(t *testing.T, h JobControlHarness, mode lostMode) {
	c := h.NewElection(t, controlTiming)(t, "a")
	store := &lossyStore{Store: c.Control, proxy: c.Network, mode: mode}
	var rec manualRuns
	e, _ := startControlNode(t, c, store, rec.job("manual"))
	jobs := control.NewJobs(c.Control)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	asked := time.Now()
	if _, _, err := jobs.RequestRun(ctx, control.RunRequest{ID: "r1", Job: "manual", By: "test", At: asked}); err != nil {
		t.Fatal(err)
	}
	var last control.RunRequest
	deadline := asked.Add(25 * time.Second)
	for time.Now().Before(deadline) {
		rctx, rcancel := context.WithTimeout(context.Background(), 3*time.Second)
		r, ok, err := jobs.Request(rctx, "r1")
		rcancel()
		if err == nil && ok {
			last = r
			if r.State == control.StateDone {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	faulted, takeErr := store.takeErr()
	if !faulted || takeErr == nil {
		t.Fatalf("the take was not faulted (faulted %v, error %v): the test did not lose its answer", faulted, takeErr)
	}
	t.Logf("the take's answer was lost (%s): the Host got %v", mode, takeErr)
	if last.State != control.StateDone {
		t.Errorf("request r1: state %q, token %d, %v after it was asked, want done: the term took it and did not run it (job ran it %d times)",
			last.State, last.Token, time.Since(asked).Round(time.Millisecond), len(rec.of("r1")))
		return
	}
	time.Sleep(5 * 200 * time.Millisecond) // five more polls: no second run
	runs := rec.of("r1")
	ti, _ := e.Term()
	tok := ti.Token
	if len(runs) != 1 || runs[0] != tok || last.Result != "ok" || last.Token != tok {
		t.Errorf("request r1 %+v ran %d times (tokens %v), want once, ok, by the term with token %d", last, len(runs), runs, tok)
	}
	t.Logf("request r1 done %v after it was asked, run once by token %d", last.Ended.Sub(asked).Round(time.Millisecond), tok)
}

// testPauseDuringJitter: two jobs share a schedule, one with a jitter. A
// pause of the jittered job acknowledged after the tick and before its
// jittered start stops that run: it is recorded as skipped; the other
// job's run of the tick is not touched.
func testPauseDuringJitter(t *testing.T, h JobControlHarness) {
	c := h.NewElection(t, controlTiming)(t, "a")
	var mu sync.Mutex
	ran := map[string][]time.Time{} // job -> start times, by tick
	type key struct {
		job  string
		tick int64
	}
	at := map[key]time.Time{}
	job := func(name string, jitter time.Duration) schedulerhost.Job {
		return schedulerhost.Job{Name: name, Schedule: "*/5 * * * * *", Jitter: jitter, Run: func(ctx context.Context) error {
			tk, _ := schedulerhost.TickFromContext(ctx)
			mu.Lock()
			ran[name] = append(ran[name], tk.Time)
			at[key{name, tk.Time.UnixNano()}] = time.Now()
			mu.Unlock()
			return nil
		}}
	}
	const jitter = 4 * time.Second
	_, host := startControlNode(t, c, c.Control, job("plain", 0), job("jittered", jitter))
	// The first tick, 2 s away at least, whose delay leaves 1.5 s after
	// the pause.
	tick := time.Now().Add(2 * time.Second).Truncate(5 * time.Second).Add(5 * time.Second)
	for schedulerhost.JitterDelay("jittered", tick, jitter) < 2500*time.Millisecond {
		tick = tick.Add(5 * time.Second)
	}
	delay := schedulerhost.JitterDelay("jittered", tick, jitter)
	time.Sleep(time.Until(tick.Add(700 * time.Millisecond)))
	jobs := control.NewJobs(c.Control)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := jobs.Pause(ctx, control.Pause{Job: "jittered", By: "test", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	acked := time.Now()
	if acked.After(tick.Add(delay - time.Second)) {
		t.Skipf("the pause was acknowledged %v after the tick, too close to the jittered start (%v): loaded machine", acked.Sub(tick), delay)
	}
	time.Sleep(time.Until(tick.Add(delay + 2*time.Second)))
	mu.Lock()
	plainAt, plainRan := at[key{"plain", tick.UnixNano()}]
	jitAt, jitRan := at[key{"jittered", tick.UnixNano()}]
	mu.Unlock()
	if !plainRan {
		t.Errorf("plain did not run tick %v", tick)
	} else {
		t.Logf("plain ran tick %v at +%v", tick, plainAt.Sub(tick).Round(time.Millisecond))
	}
	if jitRan {
		t.Errorf("jittered ran tick %v at +%v (jitter delay %v), %v after the pause acknowledged at +%v",
			tick, jitAt.Sub(tick).Round(time.Millisecond), delay.Round(time.Millisecond), jitAt.Sub(acked).Round(time.Millisecond), acked.Sub(tick).Round(time.Millisecond))
		return
	}
	hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer hcancel()
	hist, err := host.History(hctx, "jittered", 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range hist {
		if r.Tick.Equal(tick) {
			if r.Result != "skipped" {
				t.Errorf("jittered's tick %v recorded %s (%s), want skipped", tick, r.Result, r.Error)
			}
			t.Logf("pause acknowledged at +%v, jittered start due at +%v: tick recorded %s", acked.Sub(tick).Round(time.Millisecond), delay.Round(time.Millisecond), r.Result)
			return
		}
	}
	t.Errorf("jittered's tick %v: not in its history %+v, want skipped", tick, hist)
}
