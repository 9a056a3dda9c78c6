package election_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newElector(t *testing.T, b election.Backend, id string) *election.Elector {
	t.Helper()
	e, err := election.New(election.Config{Backend: b, Identity: election.Identity{ID: id}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// newMemElector returns an elector id on a new memory backend whose
// leases last 5 s, and the backend.
func newMemElector(t *testing.T, id string) (*memory.Server, *election.Elector) {
	t.Helper()
	m := memory.New(election.Timing{TTL: 5 * time.Second})
	return m, newElector(t, m.Candidate(), id)
}

// run runs e with lead on a goroutine of its own. stop cancels Run's
// context, waits for Run to return and returns its error.
func run(e *election.Elector, lead func(context.Context, election.Term) error) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, lead) }()
	return func() error {
		cancel()
		return <-done
	}
}

// runHolding runs e with a lead function that holds each term until it
// ends; see run.
func runHolding(e *election.Elector) (stop func() error) {
	return run(e, func(tctx context.Context, _ election.Term) error { <-tctx.Done(); return nil })
}

// runCauses runs e with a lead function that holds each term until it
// ends, then sends the term's cause on causes; see run.
func runCauses(e *election.Elector) (causes <-chan error, stop func() error) {
	c := make(chan error, 10)
	return c, run(e, func(tctx context.Context, _ election.Term) error {
		<-tctx.Done()
		c <- context.Cause(tctx)
		return nil
	})
}

// wantStandbyUntilEligible checks a running elector a that is on
// standby: it lets a minute pass and fails t with leads if a leads then;
// it makes a eligible and fails t with idle unless a then leads at once.
func wantStandbyUntilEligible(t *testing.T, a *election.Elector, leads, idle string) {
	t.Helper()
	time.Sleep(time.Minute)
	if a.IsLeader() {
		t.Fatal(leads)
	}
	a.SetEligible(true)
	synctest.Wait()
	if !a.IsLeader() {
		t.Fatal(idle)
	}
}

func TestElector_Run_ReleasesAfterLeadReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, e := newMemElector(t, "a")
		var heldDuringDrain, heldAfter bool
		var cause error
		stop := run(e, func(tctx context.Context, term election.Term) error {
			<-tctx.Done()
			cause = context.Cause(tctx)
			time.Sleep(3 * time.Second) // drain: the lease must stay held and renewed
			_, err := m.Leader(context.Background())
			heldDuringDrain = err == nil && term.Context().Err() == nil
			return nil
		})
		time.Sleep(time.Second)
		if !e.IsLeader() {
			t.Fatal("not leading")
		}
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		_, err := m.Leader(context.Background())
		heldAfter = err == nil
		if !errors.Is(cause, election.ErrSteppingDown) {
			t.Errorf("term cause = %v, want ErrSteppingDown", cause)
		}
		if !heldDuringDrain {
			t.Error("lease not held while lead was draining")
		}
		if heldAfter {
			t.Error("lease still held after Run returned")
		}
	})
}

func TestElector_Run_LossCancelsTermWithCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, e := newMemElector(t, "a")
		causes, stop := runCauses(e)
		synctest.Wait()
		m.Revoke()
		if c := <-causes; !errors.Is(c, election.ErrLeadershipLost) {
			t.Errorf("cause = %v, want ErrLeadershipLost", c)
		}
		synctest.Wait()
		if !e.IsLeader() {
			t.Error("elector did not campaign again after the loss")
		}
		stop()
		if c := <-causes; !errors.Is(c, election.ErrSteppingDown) {
			t.Errorf("second term's cause = %v, want ErrSteppingDown", c)
		}
	})
}

func TestElector_StepDown_CoolsDownThenLeadsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memory.New(election.Timing{TTL: 5 * time.Second})
		a, b := newElector(t, m.Candidate(), "a"), newElector(t, m.Candidate(), "b")
		ctx, cancel := context.WithCancel(context.Background())
		lead := func(tctx context.Context, _ election.Term) error { <-tctx.Done(); return nil }
		da, db := make(chan error), make(chan error)
		go func() { da <- a.Run(ctx, lead) }()
		synctest.Wait()
		go func() { db <- b.Run(ctx, lead) }()
		synctest.Wait()
		if !a.IsLeader() || b.IsLeader() {
			t.Fatal("want a leading, b following")
		}
		if !a.StepDown(10 * time.Second) {
			t.Fatal("StepDown reported no term")
		}
		synctest.Wait()
		if a.IsLeader() || !b.IsLeader() {
			t.Fatalf("after step-down: a leads %v, b leads %v; want b", a.IsLeader(), b.IsLeader())
		}
		// b steps down without cooldown; a is cooling down and must not take it.
		b.StepDown(0)
		time.Sleep(5 * time.Second)
		if a.IsLeader() {
			t.Error("a led during its cooldown")
		}
		time.Sleep(6 * time.Second)
		if !a.IsLeader() && !b.IsLeader() {
			t.Error("nobody leads after the cooldown")
		}
		cancel()
		<-da
		<-db
	})
}

// TestElector_StepDown_ReportsTermAndCooldown: Term tells that the term
// held is stepping down while it drains, and CooldownUntil gives the end of
// the cooldown until it is over, then zero.
func TestElector_StepDown_ReportsTermAndCooldown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, a := newMemElector(t, "a")
		if u := a.CooldownUntil(); !u.IsZero() {
			t.Errorf("CooldownUntil before any step-down = %v, want zero", u)
		}
		drain := make(chan struct{})
		stop := run(a, func(tctx context.Context, _ election.Term) error { <-tctx.Done(); <-drain; return nil })
		synctest.Wait()
		ti, ok := a.Term()
		if !ok || ti.SteppingDown {
			t.Fatalf("Term before the step-down = %+v, %v; want held, not stepping down", ti, ok)
		}
		at := time.Now()
		if !a.StepDown(time.Minute) {
			t.Fatal("StepDown reported no term")
		}
		synctest.Wait()
		got, ok := a.Term()
		if !ok || !got.SteppingDown || got.Token != ti.Token {
			t.Errorf("Term while draining = %+v, %v; want token %d stepping down", got, ok, ti.Token)
		}
		if u := a.CooldownUntil(); !u.Equal(at.Add(time.Minute)) {
			t.Errorf("CooldownUntil = %v, want %v", u, at.Add(time.Minute))
		}
		close(drain)
		synctest.Wait()
		if _, ok := a.Term(); ok {
			t.Error("a term is held after the drain")
		}
		time.Sleep(time.Minute)
		if u := a.CooldownUntil(); !u.IsZero() {
			t.Errorf("CooldownUntil after the cooldown = %v, want zero", u)
		}
		synctest.Wait()
		if ti2, ok := a.Term(); !ok || ti2.SteppingDown || ti2.Token <= ti.Token {
			t.Errorf("Term after the cooldown = %+v, %v; want a new term, not stepping down", ti2, ok)
		}
		stop()
	})
}

func TestElector_StepDown_ShorterCooldownTakesEffect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, a := newMemElector(t, "a")
		stop := runHolding(a)
		synctest.Wait()
		a.StepDown(time.Hour)
		synctest.Wait()
		if a.IsLeader() {
			t.Fatal("leading during a one-hour cooldown")
		}
		a.StepDown(time.Second)
		time.Sleep(1100 * time.Millisecond)
		if !a.IsLeader() {
			t.Error("a shorter cooldown did not replace the hour-long one")
		}
		stop()
	})
}

func TestElector_Ineligible_DoesNotCampaign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, a := newMemElector(t, "a")
		a.SetEligible(false)
		stop := runHolding(a)
		defer stop()
		wantStandbyUntilEligible(t, a, "an ineligible elector leads", "eligible again but not leading")
	})
}

// A hold keeps an elector from campaigning apart from the operator's
// eligibility: both must allow it.
func TestElector_Hold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, a := newMemElector(t, "a")
		a.Hold("app unhealthy: test")
		stop := runHolding(a)
		defer stop()
		time.Sleep(time.Minute)
		if a.IsLeader() || a.Held() != "app unhealthy: test" || !a.Eligible() {
			t.Fatalf("held: leader %v, held %q, eligible %v", a.IsLeader(), a.Held(), a.Eligible())
		}
		a.SetEligible(false)
		a.Hold("")
		wantStandbyUntilEligible(t, a, "hold lifted on a standby elector: it leads", "neither held nor on standby, but not leading")
	})
}

func TestElector_Run_LeadErrorIsReturnedAfterRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, a := newMemElector(t, "a")
		boom := errors.New("boom")
		err := a.Run(context.Background(), func(context.Context, election.Term) error { return boom })
		if !errors.Is(err, boom) {
			t.Errorf("Run = %v, want boom", err)
		}
		err = newElector(t, m.Candidate(), "b").Run(context.Background(), func(context.Context, election.Term) error { panic("oops") })
		if err == nil || !contains(err.Error(), "panic: oops") {
			t.Errorf("Run with a panicking lead = %v, want the panic as an error", err)
		}
		if _, err := m.Leader(context.Background()); !errors.Is(err, election.ErrNoLeader) {
			t.Error("lease still held after Run returned an error")
		}
	})
}

func contains(s, sub string) bool {
	return len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub))
}

// The log of a term's end gives the term's length as term_length, and
// took is the release's own time. A shutdown (Run's context ended) ends
// the term with ErrShuttingDown, a step-down without it; both are
// ErrSteppingDown.
func TestElector_Run_LogsTermLengthAndReleaseTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memory.New(election.Timing{TTL: 5 * time.Second})
		var logs bytes.Buffer
		e, err := election.New(election.Config{Backend: m.Candidate(), Identity: election.Identity{ID: "a"},
			Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		causes, stop := runCauses(e)
		synctest.Wait()
		e.StepDown(time.Second)
		if c := <-causes; !errors.Is(c, election.ErrSteppingDown) || errors.Is(c, election.ErrShuttingDown) {
			t.Errorf("step-down: cause %v, want ErrSteppingDown and not ErrShuttingDown", c)
		}
		time.Sleep(3 * time.Second) // the cooldown ends; it leads again
		time.Sleep(7 * time.Second) // a 7 s term
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if c := <-causes; !errors.Is(c, election.ErrShuttingDown) || !errors.Is(c, election.ErrSteppingDown) {
			t.Errorf("shutdown: cause %v, want ErrShuttingDown, an ErrSteppingDown", c)
		}
		var last map[string]any
		for line := range bytes.Lines(logs.Bytes()) {
			var rec map[string]any
			if json.Unmarshal(line, &rec) == nil && rec["msg"] == "released leadership" {
				last = rec
			}
		}
		termLen, _ := last["term_length"].(float64)
		took, ok := last["took"].(float64)
		if time.Duration(termLen) < 7*time.Second || !ok || time.Duration(took) >= time.Second {
			t.Errorf("released leadership: term_length %v, took %v; want the term (>= 7s) and the release (< 1s): %v",
				time.Duration(termLen), time.Duration(took), last)
		}
	})
}
