package kit_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/election/electiontest"
)

// The in-memory backend's leases are ManagedLeases.
func TestManagedLease_SelfFencesAtLocalDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := election.Timing{TTL: 6 * time.Second, RenewInterval: 2 * time.Second, SafetyMargin: time.Second}
		m := electiontest.NewMemory(timing)
		c := m.Candidate()
		l, err := c.Acquire(context.Background(), election.Identity{ID: "a"})
		if err != nil {
			t.Fatal(err)
		}
		// Renewals at 2 s and 4 s succeed; the path is cut at 5 s, so the
		// last renewal was sent at 4 s: the term must end at 4+6-1 = 9 s.
		start := time.Now()
		time.Sleep(5 * time.Second)
		c.Cut()
		<-l.Done()
		if got := time.Since(start); got != 9*time.Second {
			t.Errorf("term ended at %v, want 9s (last renewal sent + TTL - SafetyMargin)", got)
		}
		if !errors.Is(l.Err(), election.ErrLeadershipLost) {
			t.Errorf("Err = %v, want ErrLeadershipLost", l.Err())
		}
		// The store gives the lease away only at 4+6 = 10 s.
		other := m.Candidate()
		lb, err := other.Acquire(context.Background(), election.Identity{ID: "b"})
		if err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 10*time.Second {
			t.Errorf("b acquired at %v, want 10s", got)
		}
		c.Heal()
		l.Release(context.Background())
		lb.Release(context.Background())
	})
}
