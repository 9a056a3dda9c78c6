package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// refusingLedger refuses every claim, as a backend that denies the
// leader's credentials the write.
type refusingLedger struct{ ledger.Ledger }

func (refusingLedger) Claim(_ context.Context, cs []ledger.Claim) []error {
	errs := make([]error, len(cs))
	for i := range errs {
		errs[i] = ledger.Refused(errors.New("403 Forbidden: cannot update resource \"configmaps\""))
	}
	return errs
}

// refusedNode is a node with the control store of mem whose claims go
// to l; runs counts its job's runs.
func refusedNode(t *testing.T, mem *memory.Server, id string, l ledger.Ledger, runs *atomic.Int64) (*API, *election.Elector) {
	t.Helper()
	discard := slog.New(slog.DiscardHandler)
	host, err := schedulerhost.New(schedulerhost.Config{Ledger: l, Control: mem.Control(), Instance: id, Logger: discard,
		Jobs: []schedulerhost.Job{{Name: "j", Schedule: "@every 1s", Run: func(context.Context) error { runs.Add(1); return nil }}}})
	if err != nil {
		t.Fatal(err)
	}
	el, err := election.New(election.Config{Backend: mem.Candidate(), Identity: election.Identity{ID: id}, Election: "e", Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{Elector: el, Host: host, Election: "e", Logger: discard, Control: mem.Control(),
		InstanceInterval: time.Second, StepDownCooldown: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return n, el
}

// A leader whose claims are all refused steps down once that has lasted
// more than the lease's TTL, when an eligible follower is known, and
// that follower leads and runs the jobs; with no follower known it stays.
func TestNode_RefusedClaimsStepDown(t *testing.T) {
	for _, follower := range []bool{true, false} {
		t.Run(map[bool]string{true: "follower", false: "alone"}[follower], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memory.New(election.Timing{TTL: 3 * time.Second})
				var runsA, runsB atomic.Int64
				a, elA := refusedNode(t, mem, "a", refusingLedger{mem.Ledger()}, &runsA)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 2)
				go func() { done <- runAPI(ctx, a) }()
				synctest.Wait()
				if !elA.IsLeader() {
					t.Fatal("a does not lead")
				}
				var elB *election.Elector
				if follower {
					var b *API
					b, elB = refusedNode(t, mem, "b", mem.Ledger(), &runsB)
					go func() { done <- runAPI(ctx, b) }()
				}
				time.Sleep(4 * time.Second) // refusals over more than the TTL: not yet a step-down
				if !elA.IsLeader() {
					t.Errorf("a stepped down after 4 s of refused claims, before 3 refusals over more than the TTL")
				}
				time.Sleep(6 * time.Second)
				switch {
				case follower && (elA.IsLeader() || !elB.IsLeader() || runsB.Load() == 0):
					t.Errorf("after 10 s of refused claims: a leads %v, b leads %v, b ran %d; want b leading and running", elA.IsLeader(), elB.IsLeader(), runsB.Load())
				case follower && elA.CooldownUntil().IsZero():
					t.Error("a stepped down without the step-down cooldown")
				case !follower && !elA.IsLeader():
					t.Error("a stepped down with no eligible follower known")
				}
				if runsA.Load() != 0 {
					t.Errorf("a ran %d times with every claim refused", runsA.Load())
				}
				cancel()
				for range map[bool]int{true: 2, false: 1}[follower] {
					if err := <-done; err != nil {
						t.Error(err)
					}
				}
			})
		})
	}
}
