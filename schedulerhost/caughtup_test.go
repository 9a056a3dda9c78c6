package schedulerhost_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// hungReads is a ledger whose LastClaimed waits until its context ends, as
// on a backend that does not answer.
type hungReads struct{ ledger.Ledger }

func (h hungReads) LastClaimed(ctx context.Context, jobs []string) ([]time.Time, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// leadOnHungReads leads term 7 with jobs on a ledger whose reads hang, for
// d of fake time, and returns the Host's JSON log. The store never granted
// token 7: a claim the schedule loop makes ends the term.
func leadOnHungReads(t *testing.T, d time.Duration, jobs ...schedulerhost.Job) *testenv.Buffer {
	t.Helper()
	logs := new(testenv.Buffer)
	h, err := schedulerhost.New(schedulerhost.Config{
		Ledger: hungReads{newMemory().Ledger()}, Instance: "a",
		Logger: slog.New(slog.NewJSONHandler(logs, nil)), Jobs: jobs,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Lead(ctx, election.NewTerm(context.Background(), 7)) }()
	time.Sleep(d)
	cancel()
	<-done
	return logs
}

// logLines returns the records of logs whose msg is msg, decoded.
func logLines(t *testing.T, logs *testenv.Buffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, ln := range strings.Split(logs.String(), "\n") {
		if ln == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(ln), &m); err != nil {
			t.Fatalf("log line %q: %v", ln, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

const (
	msgNotFired = "ticks not fired: the term ended before its schedule loop began"
	msgLoopLate = "schedule loop began late: the ticks since the term began fire now"
)

func nop(context.Context) error { return nil }

// A term that ends while its catch-up still waits on the ledger never
// begins its schedule loop: the ticks since its start were not fired, and
// it says so for each job, with how many.
func TestHost_TermOverBeforeTheLoopSaysWhichTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := leadOnHungReads(t, 3500*time.Millisecond,
			schedulerhost.Job{Name: "a", Schedule: "@every 1s", Run: nop},
			schedulerhost.Job{Name: "b", Schedule: "@every 2s", Run: nop})
		got := map[string]float64{}
		for _, l := range logLines(t, logs, msgNotFired) {
			got[l["job"].(string)] = l["ticks"].(float64)
		}
		if got["a"] != 3 || got["b"] != 1 || len(got) != 2 {
			t.Errorf("ticks not fired, by job: %v; want a: 3 (1 s, 2 s, 3 s), b: 1 (2 s)", got)
		}
		if l := logLines(t, logs, msgLoopLate); len(l) != 0 {
			t.Errorf("the loop never began, but a line says it began late: %v", l)
		}
	})
}

// A catch-up that waits on the ledger past a second holds the loop back;
// the loop then says how late it began.
func TestHost_LateLoopSaysHowLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := leadOnHungReads(t, 6*time.Second, schedulerhost.Job{Name: "a", Schedule: "@every 1s", Run: nop})
		l := logLines(t, logs, msgLoopLate)
		if len(l) != 1 || l[0]["late"] != float64(5*time.Second) {
			t.Errorf("late-loop lines %v: want one, late 5s (the read's timeout)", l)
		}
		if n := len(logLines(t, logs, msgNotFired)); n != 0 {
			t.Errorf("%d not-fired lines, want none: the loop began", n)
		}
	})
}
