package schedulerhost_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/schedulerhost"
)

// The line with which the schedule loop says the wall clock stepped
// forward carries the term's token and the gap it skipped over, under the
// keys the e2e checker reads ("token", "from", "to"): a tick in the gap
// may go unrun only as its policy says, and the checker ties the gap to a
// pause of the machine it saw itself. Renaming a key fails here.
func TestHost_WallClockStepForward_LogsTheGap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out testenv.Buffer
		clk := schedulerhost.NewSteppingClock()
		job := schedulerhost.Job{Name: "j", Schedule: "@every 1s", Misfire: schedulerhost.MisfireSkip,
			Run: func(context.Context) error { return nil }}
		n := startNode(t, newMemory(), "a", schedulerhost.Config{Jobs: []schedulerhost.Job{job},
			Logger: slog.New(slog.NewJSONHandler(&out, nil))}, func(h *schedulerhost.Host) { h.UseClock(clk) })
		time.Sleep(1500 * time.Millisecond)
		before := clk.Wall()
		clk.Step(time.Minute)
		time.Sleep(time.Second)
		n.stop(t)

		var line struct {
			Token    uint64
			From, To time.Time
		}
		found := false
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.Contains(l, `"msg":"wall clock stepped forward: the ticks it skipped over count as missed"`) {
				if err := json.Unmarshal([]byte(l), &line); err != nil {
					t.Fatalf("%v: %s", err, l)
				}
				found = true
				break
			}
		}
		if !found {
			t.Fatalf("no step line in:\n%s", out.String())
		}
		if line.Token == 0 {
			t.Errorf("step line without the term's token")
		}
		if line.From.Before(before) || line.From.After(before.Add(500*time.Millisecond)) {
			t.Errorf("gap from %v, want within 500ms after %v, the wall clock before the step", line.From, before)
		}
		if gap := line.To.Sub(line.From); gap < time.Minute || gap > time.Minute+500*time.Millisecond {
			t.Errorf("gap %v (%v to %v), want the step of 1m", gap, line.From, line.To)
		}
	})
}
