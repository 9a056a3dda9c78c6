package backendtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/election"
)

// cutTrialsAtOnce is how many network-cut trials run at the same time,
// each in an election of its own: a trial waits most of its time for the
// lease to lapse (on Consul about 30 s), so running them one after
// another made the suite the longest part of a backend's tests. Five
// covers the five phases of the renew cycle that the cut falls at.
const cutTrialsAtOnce = 5

// testNetworkCut checks the network-cut rule: cutting the leader off
// ends its term before any other candidate leads, in every trial.
func testNetworkCut(t *testing.T, h ElectionHarness) {
	trials := h.CutTrials
	if trials == 0 {
		trials = 20
	}
	gaps := make([]time.Duration, trials)
	for first := 0; first < trials; first += cutTrialsAtOnce {
		// The candidates are made here, on the test's goroutine: a
		// harness may call t.Fatal.
		type pair struct{ a, b Candidate }
		var pairs []pair
		for i := first; i < min(first+cutTrialsAtOnce, trials); i++ {
			newC := h.NewElection(t)
			p := pair{newC(t, fmt.Sprintf("a%d", i)), newC(t, fmt.Sprintf("b%d", i))}
			if p.a.Cut == nil {
				t.Skip("backend harness cannot cut a candidate off")
			}
			pairs = append(pairs, p)
		}
		var wg sync.WaitGroup
		for k, p := range pairs {
			wg.Go(func() { gaps[first+k] = cutTrial(t, h, first+k, p.a, p.b) })
		}
		wg.Wait()
		if t.Failed() {
			return
		}
	}
	t.Logf("network cut: %d trials, %d at a time, each in an election of its own; the leader's term context was always cancelled first; minimum gap %v",
		trials, cutTrialsAtOnce, slices.Min(gaps).Round(time.Millisecond))
}

// cutTrial is trial i of the network-cut rule: a leads, b waits, a is
// cut off. It returns the gap from the end of a's term to b's start, and
// reports on t what breaks the rule (it runs on a goroutine of its own:
// Errorf, never Fatal). Both Electors have stopped when it returns.
func cutTrial(t *testing.T, h ElectionHarness, i int, a, b Candidate) time.Duration {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// Two Electors; each lead function notes when its term began and
	// when its Term's context (ended only by the lease) was cancelled.
	aTerm, aBegan := make(chan cutTerm, 4), make(chan struct{}, 4)
	lead := func(out chan<- cutTerm) func(context.Context, election.Term) error {
		return func(_ context.Context, et election.Term) error {
			tm := cutTerm{began: time.Now()}
			select {
			case aBegan <- struct{}{}:
			default:
			}
			<-et.Context().Done()
			tm.ended, tm.cause = time.Now(), context.Cause(et.Context())
			out <- tm
			return nil
		}
	}
	// b's lead function reports its start at once.
	bStarted := make(chan time.Time, 4)
	bLead := func(ctx context.Context, _ election.Term) error {
		bStarted <- time.Now()
		<-ctx.Done()
		return nil
	}
	var stops []func()
	defer func() {
		a.Heal()
		for _, stop := range stops {
			stop()
		}
	}()
	run := func(c Candidate, id string, lead func(context.Context, election.Term) error, cfg election.Config) bool {
		cfg.Backend, cfg.Identity, cfg.Logger, cfg.RetryPeriod = c.Backend, election.Identity{ID: id}, quiet, 100*time.Millisecond
		e, err := election.New(cfg)
		if err != nil {
			t.Errorf("trial %d: %s: %v", i, id, err)
			return false
		}
		stop := runElector(e, lead)
		stops = append(stops, func() {
			if !stop(10 * time.Second) {
				t.Errorf("trial %d: elector %s did not stop", i, id)
			}
		})
		return true
	}
	if !run(a, "a", lead(aTerm), election.Config{ReleaseTimeout: time.Second}) {
		return 0
	}
	// a leads once its lead function runs. The backend may show a as
	// the holder earlier, while a is still waiting for its acquisition's
	// answer: a cut then leaves a with no term at all, and b's lead
	// after the lease lapses would read as two leaders.
	select {
	case <-aBegan:
	case <-time.After(10 * h.TTL):
		t.Errorf("trial %d: a did not lead within 10*TTL", i)
		return 0
	}
	time.Sleep(100 * time.Millisecond)
	if !run(b, "b", bLead, election.Config{}) {
		return 0
	}
	// Cut at a different phase of the renew cycle each trial.
	time.Sleep(time.Duration(i%5) * h.TTL / 10)
	a.Cut()
	cut := time.Now()
	at, bAt := firstOut(aTerm, bStarted, 5*h.TTL)
	switch {
	case !bAt.IsZero() && at.ended.IsZero():
		t.Errorf("trial %d: b led at %v while a's term context was still live", i, bAt.Sub(cut))
		return 0
	case !bAt.IsZero() && !at.ended.Before(bAt):
		t.Errorf("trial %d: b led at %v while a's term context was still live; it was cancelled %v later", i, bAt.Sub(cut), at.ended.Sub(bAt))
		return 0
	case at.ended.IsZero():
		t.Errorf("trial %d: a's term context not cancelled within 5*TTL of the cut", i)
		return 0
	case bAt.IsZero():
		select {
		case bAt = <-bStarted:
		case <-time.After(10 * h.TTL):
			t.Errorf("trial %d: b did not lead within 10*TTL of the cut", i)
			return 0
		}
	}
	gap := bAt.Sub(at.ended)
	t.Logf("trial %2d: a's term context cancelled %v after the cut, b led %v later", i, at.ended.Sub(cut).Round(time.Millisecond), gap.Round(time.Millisecond))
	if gap <= 0 {
		t.Errorf("trial %d: b led %v before a's term context was cancelled", i, -gap)
	}
	if !errors.Is(at.cause, election.ErrLeadershipLost) {
		t.Errorf("trial %d: a's term cause = %v, want ErrLeadershipLost", i, at.cause)
	}
	return gap
}

// cutTerm is a's term in a network-cut trial: when its lead function
// began, when it saw the term's context cancelled, and why.
type cutTerm struct {
	began, ended time.Time
	cause        error
}

// firstOut waits up to wait for a's term to end or b to lead. It returns
// a's term (zero if it did not end within wait) and, if b led first or
// at the same time, b's start. Which came first is judged by the times
// the two lead functions recorded, not by which one this goroutine
// receives first: a goroutine kept from running while both happened
// finds both channels ready, and select picks one of them at random.
// So when b's start is received first, firstOut still waits for a's
// term, and the caller compares the two times.
func firstOut(aTerm <-chan cutTerm, bStarted <-chan time.Time, wait time.Duration) (cutTerm, time.Time) {
	timeout := time.After(wait)
	select {
	case at := <-aTerm:
		return at, time.Time{}
	case bt := <-bStarted:
		select {
		case at := <-aTerm:
			return at, bt
		case <-timeout:
			return cutTerm{}, bt
		}
	case <-timeout:
		return cutTerm{}, time.Time{}
	}
}

// checkNoGoroutines fails t if a goroutine with a function of pkg on its
// stack is still running 2 s from now.
func checkNoGoroutines(t *testing.T, pkg string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var left []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, pkg+".") && !strings.Contains(g, "testing.tRunner") {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d goroutine(s) of %s left after Release:\n%s", len(left), pkg, strings.Join(left, "\n\n"))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
