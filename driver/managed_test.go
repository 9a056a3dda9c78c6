package driver_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
)

// The in-memory backend's leases are ManagedLeases.
func TestManagedLease_SelfFencesAtLocalDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := election.Timing{TTL: 6 * time.Second, RenewInterval: 2 * time.Second, SafetyMargin: time.Second}
		m := memory.New(timing)
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
		// Its processes must be gone by half the margin after the deadline.
		if g, ok := l.(driver.GoneByer); !ok {
			t.Errorf("%T is not a GoneByer", l)
		} else if got := g.GoneBy().Sub(start); got != 9500*time.Millisecond {
			t.Errorf("GoneBy at %v, want 9.5s (deadline + SafetyMargin/2)", got)
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

// A term lost by Lose (or the backend's word) must have its processes
// gone at once: another candidate may lead already.
func TestManagedLease_GoneByAtOnceOnLose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memory.New(election.Timing{TTL: 6 * time.Second, RenewInterval: 2 * time.Second, SafetyMargin: time.Second})
		l, err := m.Candidate().Acquire(context.Background(), election.Identity{ID: "a"})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		l.(driver.Loser).Lose(errors.New("stale claim"))
		lost := time.Now()
		<-l.Done()
		if got := l.(driver.GoneByer).GoneBy(); !got.Equal(lost) {
			t.Errorf("GoneBy %v after the loss, want at once", got.Sub(lost))
		}
		l.Release(context.Background())
	})
}

// A renewal whose answer comes late (a partition held the request, then
// healed) still extends the term from its send time; the next renewal is
// due one RenewInterval after that send, so it goes out at once, not one
// RenewInterval after the late answer, a few milliseconds before the
// deadline. Renewals here take 100 ms, except the first, held 1.35 s.
func TestManagedLease_RenewalAfterALateAnswerIsNotLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := election.Timing{TTL: 3 * time.Second, RenewInterval: time.Second, SafetyMargin: 600 * time.Millisecond}
		start := time.Now()
		var mu sync.Mutex
		var sent []time.Duration
		l := driver.NewManagedLease(driver.ManagedLeaseConfig{
			Timing: timing,
			Sent:   start,
			Renew: func(ctx context.Context) (time.Duration, error) {
				mu.Lock()
				sent = append(sent, time.Since(start))
				d := 100 * time.Millisecond
				if len(sent) == 1 {
					d = 1350 * time.Millisecond
				}
				mu.Unlock()
				select {
				case <-time.After(d):
					return 0, nil
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			},
			Release: func(context.Context) error { return nil },
			Logger:  slog.New(slog.DiscardHandler),
		})
		defer l.Release(context.Background())
		// The first renewal, sent at 1 s and answered at 2.35 s, sets the
		// deadline to 1 + 3 - 0.6 = 3.4 s. The second must be answered
		// before that.
		time.Sleep(6 * time.Second)
		mu.Lock()
		defer mu.Unlock()
		select {
		case <-l.Done():
			t.Fatalf("term ended at its deadline (%v); renewals sent at %v", l.Err(), sent)
		default:
		}
		if len(sent) < 2 || sent[1] != 2350*time.Millisecond {
			t.Errorf("renewals sent at %v, want the second at 2.35 s, as soon as the first was answered", sent)
		}
	})
}
