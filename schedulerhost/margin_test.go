package schedulerhost_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/schedulerhost"
)

// TestHost_NoStartInTheLastMomentsOfAnUnrenewedTerm: a tick whose claim
// comes back with less than the start margin left of a term whose renewal
// is held (the path to the backend cut) does not start: its process would
// be stopped at once, before doing anything. If the renewal lands, the run
// starts then.
//
// TTL 5 s: SafetyMargin 1 s, RenewInterval 1.667 s. The term opens at
// 0.9 s, the second renewal is sent at 4.233 s and the path is cut right
// after it: the deadline is 8.233 s, and the tick of 8 s finds 233 ms left.
func TestHost_NoStartInTheLastMomentsOfAnUnrenewedTerm(t *testing.T) {
	for _, tc := range []struct {
		name   string
		healAt time.Duration // 0: never
		want8  bool          // the tick of 8 s runs
	}{
		{"renewal never lands", 0, false},
		{"renewal lands during the wait", 8100 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t0 := time.Now()
				var logs testenv.Buffer
				type start struct {
					tick time.Time
					at   time.Duration
					left time.Duration
				}
				var mu sync.Mutex
				var runs []start
				time.Sleep(900 * time.Millisecond)
				n := startNode(t, newMemory(), "a", schedulerhost.Config{ShutdownTimeout: time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Jobs: []schedulerhost.Job{{
					Name: "every-second", Schedule: "* * * * * *",
					Run: func(ctx context.Context) error {
						d, ok := election.LocalDeadline(ctx)
						if !ok {
							t.Error("a run's context carries no lease")
						}
						tk, _ := schedulerhost.TickFromContext(ctx)
						mu.Lock()
						runs = append(runs, start{tk.Time, time.Since(t0), time.Until(d)})
						mu.Unlock()
						return nil
					},
				}}})
				time.Sleep(4300*time.Millisecond - time.Since(t0))
				n.backend.Cut()
				if tc.healAt > 0 {
					time.Sleep(tc.healAt - time.Since(t0))
					n.backend.Heal()
				}
				time.Sleep(9 * time.Second)
				n.stop(t)

				mu.Lock()
				defer mu.Unlock()
				ran8 := false
				for _, s := range runs {
					if s.left < 200*time.Millisecond {
						t.Errorf("tick %s started at %v with %v of its term left", s.tick.Sub(t0), s.at, s.left)
					}
					if s.tick.Sub(t0) == 8*time.Second {
						ran8 = true
						// The wait looks again every 10 ms.
						if tc.want8 && (s.at < tc.healAt || s.at > tc.healAt+10*time.Millisecond) {
							t.Errorf("tick 8s started at %v, want within 10ms of %v (when the renewal landed)", s.at, tc.healAt)
						}
					}
				}
				if ran8 != tc.want8 {
					t.Errorf("tick 8s ran: %v, want %v (runs %+v)", ran8, tc.want8, runs)
				}
				log := logs.String()
				if !tc.want8 && !strings.Contains(log, `msg="run not started: term over" job=every-second tick=2000-01-01T00:00:08.000Z`) {
					t.Errorf("no \"run not started\" for the tick of 8 s in the log:\n%s", log)
				}
				if tc.want8 && !strings.Contains(log, `msg="run start waited for the lease renewal" job=every-second tick=2000-01-01T00:00:08.000Z`) {
					t.Errorf("no word of the wait in the log:\n%s", log)
				}
			})
		})
	}
}
