package schedulerhost_test

// Tests of claims the backend refused (refused.go) and of history
// entries an ended term could not write (history.go, settle.go).

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// errForbidden is what an apiserver answers a caller without the verb.
var errForbidden = errors.New(`PUT /api/v1/namespaces/default/configmaps/jobs-ledger-01: 403 Forbidden: configmaps "jobs-ledger-01" is forbidden: User "system:serviceaccount:default:jobs" cannot update resource "configmaps"`)

// claimObserver counts what the claims tests look at.
type claimObserver struct {
	mu               sync.Mutex
	refused, skipped int
	misfired         int
}

func (o *claimObserver) RunStarted(string, time.Time, time.Duration)      {}
func (o *claimObserver) RunFinished(string, ledger.Result, time.Duration) {}
func (o *claimObserver) Drained(time.Duration, int)                       {}
func (o *claimObserver) Misfired(_ string, n int)                         { o.mu.Lock(); o.misfired += n; o.mu.Unlock() }
func (o *claimObserver) OverlapSkipped(string)                            { o.mu.Lock(); o.skipped++; o.mu.Unlock() }
func (o *claimObserver) ClaimRefused(string)                              { o.mu.Lock(); o.refused++; o.mu.Unlock() }

func (o *claimObserver) counts() (refused, skipped, misfired int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.refused, o.skipped, o.misfired
}

// A claim the backend refused (not authorised) is not asked again, and is
// said for what it is: logged and counted as refused, with the error, and
// shown as the job's last run; not as an overlap skip.
func TestHost_RefusedClaimIsNamedAndCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var st starts
		fl := &faultLedger{Ledger: m.Ledger(), fault: func(tick, attempt int, c ledger.Claim) (bool, error) {
			if tick >= 1 {
				return false, ledger.Refused(errForbidden)
			}
			return false, nil
		}}
		logs := new(envtest.Buffer)
		obs := &claimObserver{}
		n := startNode(t, m, "a", schedulerhost.Config{Ledger: fl, Observer: obs,
			Logger: slog.New(slog.NewJSONHandler(logs, nil)), Jobs: []schedulerhost.Job{{
				Name: "t", Schedule: "@every 1s",
				Run: func(ctx context.Context) error { st.add(ctx); return nil },
			}}})
		time.Sleep(5500 * time.Millisecond)
		status := n.host.Status()
		hist := n.history(t, "t", 10)
		n.stop(t)
		if len(hist) < 2 || !strings.HasPrefix(hist[0].Error, "not started: claim refused: ") || hist[len(hist)-1].Result != ledger.ResultOK {
			t.Errorf("History = %+v, want the refused ticks newest first, then the run of the first tick", hist)
		}

		fl.mu.Lock()
		ticks := len(fl.ticks)
		var asked []int
		for _, tk := range fl.ticks[1:] {
			asked = append(asked, fl.attempts[tk])
		}
		fl.mu.Unlock()
		if ticks < 4 {
			t.Errorf("%d ticks claimed in 5.5 s of @every 1s, want at least 4", ticks)
		}
		for i, a := range asked {
			if a != 1 {
				t.Errorf("refused tick %d asked %d times, want once: a refusal is not asked again", i+1, a)
			}
		}
		if got := st.count(); got != 1 {
			t.Errorf("%d runs, want 1 (the first tick; the others were refused)", got)
		}
		refused, skipped, _ := obs.counts()
		if refused != ticks-1 || skipped != 0 {
			t.Errorf("observer: %d refused, %d overlap skips; want %d refused, 0 skips", refused, skipped, ticks-1)
		}
		if got := len(logLines(t, logs, "run not started: claim refused")); got != ticks-1 {
			t.Errorf("%d log lines \"run not started: claim refused\", want %d; log:\n%s", got, ticks-1, logs)
		}
		for _, ln := range logLines(t, logs, "tick skipped: previous run still going") {
			t.Errorf("logged %v: no run was going", ln)
		}
		last := status[0].LastRun
		if last == nil || last.Result != ledger.ResultCancelled || !strings.HasPrefix(last.Error, "not started: claim refused: ") ||
			!strings.Contains(last.Error, "403 Forbidden") {
			t.Errorf("Status LastRun = %+v, want cancelled, \"not started: claim refused: ...403 Forbidden...\"", last)
		}
	})
}

// failFinish is a ledger whose Finish fails, as a backend that stopped
// accepting the leader's token.
type failFinish struct{ ledger.Ledger }

func (f failFinish) Finish(_ context.Context, rs []ledger.Run) []error {
	errs := make([]error, len(rs))
	for i := range errs {
		errs[i] = ledger.Refused(errors.New("401 Unauthorized: Unauthorized"))
	}
	return errs
}

// A run whose end the leader could not record does not stay "running":
// the next leader settles it as unknown, saying which term left it.
func TestHost_UnrecordedRunIsSettledByNextLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var st starts
		job := schedulerhost.Job{Name: "t", Schedule: "@every 1s", Run: func(ctx context.Context) error { st.add(ctx); return nil }}
		a := startNode(t, m, "a", schedulerhost.Config{Ledger: failFinish{m.Ledger()}, ShutdownTimeout: 2 * time.Second, Jobs: []schedulerhost.Job{job}})
		time.Sleep(3500 * time.Millisecond)
		a.stop(t)
		ranA := st.count()
		hist := history(t, m, "t")
		running := 0
		for _, r := range hist {
			if r.Result == ledger.ResultRunning {
				running++
			}
		}
		if ranA < 2 || running != ranA {
			t.Fatalf("a ran %d ticks, %d entries running in %+v; want at least 2, all running", ranA, running, hist)
		}
		tokA := hist[0].Token

		b := startNode(t, m, "b", schedulerhost.Config{Jobs: []schedulerhost.Job{job}})
		time.Sleep(2500 * time.Millisecond)
		b.stop(t)
		settled := 0
		for _, r := range history(t, m, "t") {
			switch {
			case r.Token == tokA && r.Result == ledger.ResultRunning:
				t.Errorf("run of tick %v (token %d) still running after the next leader led: %+v", r.Tick, r.Token, r)
			case r.Token == tokA:
				settled++
				if r.Result != ledger.ResultUnknown || !strings.Contains(r.Error, "term with token") || !r.Ended.IsZero() {
					t.Errorf("settled run %+v: want result unknown, no end, an error naming the term", r)
				}
			case r.Result != ledger.ResultOK:
				t.Errorf("b's run %+v, want ok", r)
			}
		}
		if settled != ranA {
			t.Errorf("%d of a's %d runs settled", settled, ranA)
		}
	})
}

// While nobody could settle them yet, the runs an ended term left
// running are shown by History as being settled, not as running.
func TestHost_HistoryShowsSettling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		job := schedulerhost.Job{Name: "t", Schedule: "@every 1s", Run: func(context.Context) error { return nil }}
		// Both terms' writes fail: a's ends, b's settlements.
		a := startNode(t, m, "a", schedulerhost.Config{Ledger: failFinish{m.Ledger()}, ShutdownTimeout: 2 * time.Second, Jobs: []schedulerhost.Job{job}})
		time.Sleep(2500 * time.Millisecond)
		a.stop(t)
		b := startNode(t, m, "b", schedulerhost.Config{Ledger: failFinish{m.Ledger()}, Jobs: []schedulerhost.Job{job}})
		time.Sleep(100 * time.Millisecond)
		hist := b.history(t, "t", 10)
		b.stop(t)
		old := 0
		for _, r := range hist {
			if r.Token != 1 {
				continue
			}
			old++
			if r.Result != "settling" || !strings.Contains(r.Error, "outcome being settled: the term with token 1 ended") {
				t.Errorf("a's run of tick %v as b's History shows it: %s %q, want settling", r.Tick, r.Result, r.Error)
			}
		}
		if old < 2 {
			t.Errorf("b's History shows %d of a's runs, want at least 2: %+v", old, hist)
		}
	})
}
