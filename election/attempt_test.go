package election_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
)

type countFailures struct{ n atomic.Int64 }

func (c *countFailures) AcquireFailed(error)                   { c.n.Add(1) }
func (c *countFailures) Elected(uint64)                        {}
func (c *countFailures) TermEnded(uint64, time.Duration, bool) {}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

func watchedElector(t *testing.T, b election.Backend, logs *lockedBuffer, obs election.Observer) *election.Elector {
	t.Helper()
	e, err := election.New(election.Config{
		Backend: b, Identity: election.Identity{ID: "a"}, Observer: obs,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// An Elector whose store does not answer warns at once, then once a
// minute for the same failure, counts each, reports AcquireFailing after
// AcquireFailingAfter in a row, and forgets it all once it leads.
func TestElector_AcquireFailures_WarnedCountedReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memory.New(election.Timing{TTL: 3 * time.Second, RenewInterval: time.Second})
		c := m.Candidate()
		c.Cut()
		var logs lockedBuffer
		var obs countFailures
		e := watchedElector(t, c, &logs, &obs)
		stop := runHolding(e)
		defer stop()

		time.Sleep(time.Second + time.Millisecond)
		synctest.Wait()
		if n := logs.count("level=WARN"); n != 1 {
			t.Fatalf("%d warnings 1 s into a cut, want 1", n)
		}
		if err := e.AcquireFailing(); err != nil {
			t.Errorf("AcquireFailing after one failure: %v, want nil", err)
		}
		time.Sleep(time.Duration(election.AcquireFailingAfter-1) * time.Second)
		synctest.Wait()
		err := e.AcquireFailing()
		if err == nil || !strings.Contains(err.Error(), "memory: acquire: no answer") {
			t.Fatalf("AcquireFailing after %d failures: %v, want the failure", election.AcquireFailingAfter, err)
		}
		time.Sleep(55 * time.Second) // 58 s into the cut
		synctest.Wait()
		if n, w := obs.n.Load(), logs.count("level=WARN"); n != 58 || w != 1 {
			t.Errorf("58 s into a cut: %d failures counted, %d warnings; want 58 and 1", n, w)
		}
		time.Sleep(3 * time.Second) // a minute after the first warning
		synctest.Wait()
		if w, h := logs.count("level=WARN"), logs.count("same_error_since_last_warning=59"); w != 2 || h != 1 {
			t.Log(logs.b.String())
			t.Errorf("61 s into a cut: %d warnings, %d saying 59 more; want 2 and 1", w, h)
		}
		c.Heal()
		time.Sleep(time.Second)
		synctest.Wait()
		if !e.IsLeader() {
			t.Fatal("healed but not leading")
		}
		if err := e.AcquireFailing(); err != nil {
			t.Errorf("AcquireFailing while leading: %v, want nil", err)
		}
		if logs.count("acquire attempts answered again") != 1 {
			t.Error("no Info line saying the attempts are answered again")
		}
	})
}

// refusing is a backend whose Acquire returns its error: the Elector
// retries, and counts and warns the same way.
type refusing struct{ err error }

func (r refusing) Acquire(context.Context, election.Identity) (election.Lease, error) {
	return nil, r.err
}

func TestElector_AcquireErrorsReturned_CountedOnceWarned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs lockedBuffer
		var obs countFailures
		e := watchedElector(t, refusing{errors.New("401 Unauthorized (request 17)")}, &logs, &obs)
		stop := runHolding(e)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if n, w := obs.n.Load(), logs.count("level=WARN"); n < 10 || w != 1 {
			t.Errorf("30 s of refusals: %d counted, %d warnings; want 10 or more, and 1", n, w)
		}
		if err := e.AcquireFailing(); err == nil || !strings.Contains(err.Error(), "401") {
			t.Errorf("AcquireFailing: %v, want the 401", err)
		}
		// Standby: no campaign, so nothing to report.
		e.SetEligible(false)
		synctest.Wait()
		if err := e.AcquireFailing(); err != nil {
			t.Errorf("AcquireFailing on standby: %v, want nil", err)
		}
		stop()
	})
}
