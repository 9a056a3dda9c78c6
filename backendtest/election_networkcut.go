package backendtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/election/driver"
)

// testNetworkCut checks the network-cut rule: cutting the leader off
// ends its term before any other candidate leads, in every trial.
func testNetworkCut(t *testing.T, h ElectionHarness) {
	newC := h.NewElection(t)
	trials := h.CutTrials
	if trials == 0 {
		trials = 20
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	minGap := time.Duration(1<<63 - 1)
	for i := range trials {
		a, b := newC(t, fmt.Sprintf("a%d", i)), newC(t, fmt.Sprintf("b%d", i))
		if a.Cut == nil {
			t.Skip("backend harness cannot cut a candidate off")
		}
		// Two Electors; each lead function notes when its term began and
		// when its Term's context (ended only by the lease) was cancelled.
		type term struct {
			began, ended time.Time
			cause        error
		}
		aTerm := make(chan term, 4)
		lead := func(out chan<- term) func(context.Context, election.Term) error {
			return func(_ context.Context, et election.Term) error {
				tm := term{began: time.Now()}
				<-et.Context().Done()
				tm.ended, tm.cause = time.Now(), context.Cause(et.Context())
				out <- tm
				return nil
			}
		}
		run := func(c Candidate, id string, out chan term) (context.CancelFunc, chan error) {
			e, err := election.New(election.Config{Backend: c.Backend, Identity: election.Identity{ID: id}, Logger: quiet,
				RetryPeriod: 100 * time.Millisecond, ReleaseTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- e.Run(ctx, lead(out)) }()
			return cancel, done
		}
		// b's lead function reports its start at once.
		bStarted := make(chan time.Time, 4)
		bLead := func(ctx context.Context, _ election.Term) error {
			bStarted <- time.Now()
			<-ctx.Done()
			return nil
		}
		stopA, doneA := run(a, "a", aTerm)
		waitFor := time.Now().Add(10 * h.TTL)
		aLeads := false
		for !aLeads && time.Now().Before(waitFor) {
			if lr, ok := a.Backend.(driver.LeaderReader); ok {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				info, err := lr.Leader(ctx)
				cancel()
				aLeads = err == nil && info.Identity.ID == "a"
			} else {
				aLeads = true
			}
			if !aLeads {
				time.Sleep(10 * time.Millisecond)
			}
		}
		time.Sleep(100 * time.Millisecond)
		eb, err := election.New(election.Config{Backend: b.Backend, Identity: election.Identity{ID: "b"}, Logger: quiet, RetryPeriod: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ctxB, stopB := context.WithCancel(context.Background())
		doneB := make(chan error, 1)
		go func() { doneB <- eb.Run(ctxB, bLead) }()
		// Cut at a different phase of the renew cycle each trial.
		time.Sleep(time.Duration(i%5) * h.TTL / 10)
		a.Cut()
		cut := time.Now()
		var at term
		select {
		case at = <-aTerm:
		case bt := <-bStarted:
			t.Fatalf("trial %d: b led at %v while a's term context was still live", i, bt.Sub(cut))
		case <-time.After(5 * h.TTL):
			t.Fatalf("trial %d: a's term context not cancelled within 5*TTL of the cut", i)
		}
		var bAt time.Time
		select {
		case bAt = <-bStarted:
		case <-time.After(10 * h.TTL):
			t.Fatalf("trial %d: b did not lead within 10*TTL of the cut", i)
		}
		gap := bAt.Sub(at.ended)
		t.Logf("trial %2d: a's term context cancelled %v after the cut, b led %v later", i, at.ended.Sub(cut).Round(time.Millisecond), gap.Round(time.Millisecond))
		if gap <= 0 {
			t.Errorf("trial %d: b led %v before a's term context was cancelled", i, -gap)
		}
		if !errors.Is(at.cause, election.ErrLeadershipLost) {
			t.Errorf("trial %d: a's term cause = %v, want ErrLeadershipLost", i, at.cause)
		}
		minGap = min(minGap, gap)
		a.Heal()
		stopA()
		stopB()
		for _, d := range []chan error{doneA, doneB} {
			select {
			case <-d:
			case <-time.After(10 * time.Second):
				t.Fatalf("trial %d: an elector did not stop", i)
			}
		}
	}
	t.Logf("network cut: %d trials, the leader's term context was always cancelled first; minimum gap %v", trials, minGap.Round(time.Millisecond))
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
