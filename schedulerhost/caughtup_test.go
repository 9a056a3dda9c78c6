package schedulerhost_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/election"
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

// lockedBuffer is a log sink for a Host's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the log's lines whose msg is msg, decoded.
func (l *lockedBuffer) lines(t *testing.T, msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, ln := range bytes.Split(l.b.Bytes(), []byte("\n")) {
		if len(ln) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(ln, &m); err != nil {
			t.Fatalf("log line %q: %v", ln, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// A term that ends while its catch-up still waits on the ledger never
// begins its schedule loop: the ticks since its start were not fired, and
// it says so for each job, with how many.
func TestHost_TermOverBeforeTheLoopSaysWhichTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var logs lockedBuffer
		h, err := schedulerhost.New(schedulerhost.Config{
			Ledger: hungReads{m.Ledger()}, Instance: "a",
			Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
			Jobs: []schedulerhost.Job{
				{Name: "a", Schedule: "@every 1s", Run: func(context.Context) error { return nil }},
				{Name: "b", Schedule: "@every 2s", Run: func(context.Context) error { return nil }},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- h.Lead(ctx, election.NewTerm(context.Background(), 7)) }()
		time.Sleep(3500 * time.Millisecond)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Lead: %v", err)
		}
		got := map[string]float64{}
		for _, l := range logs.lines(t, "ticks not fired: the term ended before its schedule loop began") {
			got[l["job"].(string)] = l["ticks"].(float64)
		}
		if got["a"] != 3 || got["b"] != 1 || len(got) != 2 {
			t.Errorf("ticks not fired, by job: %v; want a: 3 (1 s, 2 s, 3 s), b: 1 (2 s)", got)
		}
		if l := logs.lines(t, "schedule loop began late: the ticks since the term began fire now"); len(l) != 0 {
			t.Errorf("the loop never began, but a line says it began late: %v", l)
		}
	})
}

// A catch-up that waits on the ledger past a second holds the loop back;
// the loop then says how late it began.
func TestHost_LateLoopSaysHowLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory()
		var logs lockedBuffer
		h, err := schedulerhost.New(schedulerhost.Config{
			Ledger: hungReads{m.Ledger()}, Instance: "a",
			Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
			Jobs:   []schedulerhost.Job{{Name: "a", Schedule: "@every 1s", Run: func(context.Context) error { return nil }}},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- h.Lead(ctx, election.NewTerm(context.Background(), 7)) }()
		time.Sleep(6 * time.Second)
		cancel()
		<-done // the store never granted token 7: the loop's first claim ends the term
		l := logs.lines(t, "schedule loop began late: the ticks since the term began fire now")
		if len(l) != 1 || l[0]["late"] != float64(5*time.Second) {
			t.Errorf("late-loop lines %v: want one, late 5s (the read's timeout)", l)
		}
		if n := len(logs.lines(t, "ticks not fired: the term ended before its schedule loop began")); n != 0 {
			t.Errorf("%d not-fired lines, want none: the loop began", n)
		}
	})
}
