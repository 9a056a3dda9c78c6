package schedulerhost_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/schedulerhost"
)

// hangingDone is a control store whose writes of a run-now request as
// done are never answered (a server that hangs); the rest passes.
type hangingDone struct {
	control.Store
	hung atomic.Int32 // such writes made
}

func (s *hangingDone) Put(ctx context.Context, p control.Put) (int64, error) {
	if strings.HasPrefix(p.Key, "run/") && strings.Contains(string(p.Value), `"state":"done"`) {
		s.hung.Add(1)
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return s.Store.Put(ctx, p)
}

// A run-now run gives up its job's overlap slot before its request is
// written as done, as a scheduled run does: that write may take seconds
// of retries on a hung server, and the next term, maybe on this same
// Host, must not skip the job's ticks as overlaps of a run that is over.
// a's run now of slow, going when a's path is cut at 4.3 s, is cancelled
// at its term's end; the path is healed at 10 s, while the request's
// write hangs, and a's next term must run slow's ticks.
func TestControl_RunNowFreesItsSlotBeforeItsRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		var logs envtest.Buffer
		m := newMemory()
		st := &hangingDone{Store: m.Control()}
		var scheduled atomic.Int32 // slow's scheduled runs after the heal
		var healed atomic.Bool
		slow := schedulerhost.Job{Name: "slow", Schedule: "*/5 * * * * *", Run: func(ctx context.Context) error {
			if _, manual := schedulerhost.ManualFromContext(ctx); manual {
				<-ctx.Done() // until the term's end
				return ctx.Err()
			}
			if healed.Load() {
				scheduled.Add(1)
			}
			return nil
		}}
		time.Sleep(900 * time.Millisecond)
		n := startNode(t, m, "a", schedulerhost.Config{Control: st, ShutdownTimeout: time.Second, RunNowPoll: 200 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(&logs, nil)), Jobs: []schedulerhost.Job{slow}})
		jobs := control.NewJobs(st)
		time.Sleep(time.Second)
		if _, _, err := jobs.RequestRun(t.Context(), control.RunRequest{ID: "req-1", Job: "slow", By: "bob", At: time.Now(), Via: "a"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(4300*time.Millisecond - time.Since(t0))
		n.backend.Cut()
		time.Sleep(10*time.Second - time.Since(t0))
		synctest.Wait()
		if st.hung.Load() == 0 {
			t.Fatalf("no write of the run-now request as done by 10 s; log:\n%s", logs.String())
		}
		at := len(logs.String())
		healed.Store(true)
		n.backend.Heal()
		time.Sleep(31*time.Second - time.Since(t0)) // ticks of 15, 20, 25 and 30 s
		synctest.Wait()
		if got := scheduled.Load(); got < 3 {
			t.Errorf("healed at 10 s, with the run-now request's write hung: slow ran %d scheduled ticks by 31 s, want at least 3; log:\n%s", got, logs.String())
		}
		if log := logs.String(); strings.Contains(log[at:], "previous run still going") {
			t.Errorf("after the heal, a tick was skipped as an overlap of a run that is over; log:\n%s", log)
		}
		n.stop(t)
		time.Sleep(time.Minute) // the write's retries give up
	})
}
