package election_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
)

// holdingBackend calls hold once, when its first Acquire has succeeded and
// before it returns: a hold that began while the campaign was won.
type holdingBackend struct {
	election.Backend
	hold func()
	once atomic.Bool
}

func (b *holdingBackend) Acquire(ctx context.Context, id election.Identity) (election.Lease, error) {
	l, err := b.Backend.Acquire(ctx, id)
	if err == nil && b.once.CompareAndSwap(false, true) {
		b.hold()
	}
	return l, err
}

// A term won while a hold began is stepped down before lead is called:
// lead finds its context ended with a HoldError naming the hold, the lease
// is released, and the Elector does not campaign again for HoldCooldown,
// nor while the hold lasts.
func TestElector_HeldAtTermStart_StepsDownWithCooldown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memory.New(election.Timing{TTL: 5 * time.Second})
		var a *election.Elector
		b := &holdingBackend{Backend: m.Candidate(), hold: func() { a.Hold("app unhealthy: test") }}
		a, err := election.New(election.Config{Backend: b, Identity: election.Identity{ID: "a"}, Logger: quiet, HoldCooldown: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		type call struct {
			ended bool
			cause error
		}
		calls := make(chan call, 10)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		started := time.Now()
		go func() {
			done <- a.Run(ctx, func(tctx context.Context, _ election.Term) error {
				calls <- call{ended: tctx.Err() != nil, cause: context.Cause(tctx)}
				<-tctx.Done()
				return nil
			})
		}()
		synctest.Wait()
		c := <-calls
		var he *election.HoldError
		if !c.ended || !errors.As(c.cause, &he) || he.Reason != "app unhealthy: test" || !errors.Is(c.cause, election.ErrSteppingDown) {
			t.Errorf("lead called with context ended %v, cause %v; want ended with a HoldError of the hold, an ErrSteppingDown", c.ended, c.cause)
		}
		if a.IsLeader() {
			t.Error("still leading after a term won while held")
		}
		if _, err := m.Leader(context.Background()); err == nil {
			t.Error("the lease is still held")
		}
		if u := a.CooldownUntil(); !u.Equal(started.Add(30 * time.Second)) {
			t.Errorf("CooldownUntil = %v, want %v (HoldCooldown)", u, started.Add(30*time.Second))
		}
		a.Hold("")
		time.Sleep(29 * time.Second)
		if a.IsLeader() {
			t.Error("led again within HoldCooldown")
		}
		time.Sleep(2 * time.Second)
		if !a.IsLeader() {
			t.Error("not leading after the cooldown, the hold lifted")
		}
		if c := <-calls; c.ended {
			t.Errorf("the next term's lead began with its context ended: %v", c.cause)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// A StepDown while held ends the term with a HoldError carrying the
// hold's reason (errors.Is ErrSteppingDown still holds); without a hold
// the cause is ErrSteppingDown itself.
func TestElector_StepDownWhileHeld_CauseCarriesTheReason(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, a := newMemElector(t, "a")
		causes := make(chan error, 10)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			done <- a.Run(ctx, func(tctx context.Context, _ election.Term) error {
				<-tctx.Done()
				causes <- context.Cause(tctx)
				return nil
			})
		}()
		synctest.Wait()
		a.StepDown(0)
		if c := <-causes; c != election.ErrSteppingDown {
			t.Errorf("cause of a step-down without a hold = %v, want ErrSteppingDown", c)
		}
		synctest.Wait()
		if !a.IsLeader() {
			t.Fatal("not leading again")
		}
		a.Hold("app unhealthy: GET /healthz: 503")
		if !a.IsLeader() {
			t.Fatal("a hold ended the term")
		}
		a.StepDown(time.Minute)
		c := <-causes
		var he *election.HoldError
		if !errors.As(c, &he) || he.Reason != "app unhealthy: GET /healthz: 503" || !errors.Is(c, election.ErrSteppingDown) {
			t.Errorf("cause of a step-down while held = %v, want a HoldError with the reason, an ErrSteppingDown", c)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}
