package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// TestLogMessagesExist checks that every log message the suite reads is
// one the code logs: a message reworded in the code and not here would
// make the suite blind to it (a failed catch-up then looks like lost
// ticks). It runs in the fast tier.
func TestLogMessagesExist(t *testing.T) {
	var msgs []string
	for m := range misfireMsgs {
		msgs = append(msgs, m)
	}
	for m := range interesting {
		msgs = append(msgs, m)
	}
	msgs = append(msgs, "run started", "node started", missedMsg, askedMsg, steppedMsg, notFiredMsg)
	var src strings.Builder
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "e2e", "testdata", ".git", "bench":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		src.Write(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	code := src.String()
	for _, m := range msgs {
		if !strings.Contains(code, strconv.Quote(m)) {
			t.Errorf("the suite reads log message %q, which no code of the module logs", m)
		}
	}
}

// TestMisfireMessagesRead checks the other way: every message with which
// the code says it did not start a tick ("run not started: ...", "tick
// skipped: ...") is one the suite reads as a reason. One it did not read
// made a tick the node had accounted for look lost (a soak trial: "run not
// started: pause state unknown" while the leader's agent reset every
// connection).
func TestMisfireMessagesRead(t *testing.T) {
	said := regexp.MustCompile(`\.(?:Info|Warn|Error)\("((?:run not started|tick skipped): [^"]*)"`)
	found := 0
	for _, dir := range []string{"../schedulerhost", "../node"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range said.FindAllSubmatch(b, -1) {
				found++
				if !misfireMsgs[string(m[1])] {
					t.Errorf("%s logs %q, which the suite does not read as a reason for a tick not run", f, m[1])
				}
			}
		}
	}
	want := 0
	for m := range misfireMsgs {
		if strings.HasPrefix(m, "run not started: ") || strings.HasPrefix(m, "tick skipped: ") {
			want++
		}
	}
	if found < want {
		t.Errorf("found %d such messages in the code, fewer than the %d the suite reads: the pattern is stale", found, want)
	}
}

// TestLogSchema runs a term on the in-memory backend with a JSON logger,
// as a node logs, and reads its lines with the suite's own event: the
// keys the checker's evidence comes from (token, job, tick, last_claimed)
// must be there under the names the suite reads. Renaming one in the
// code, which no message test would notice, fails here.
func TestLogSchema(t *testing.T) {
	var out envtest.Buffer
	log := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	mem := memory.New(election.Timing{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// An earlier term claimed a tick 3 s ago and died: the next term's
	// catch-up finds ticks missed.
	old, err := mem.Candidate().Acquire(ctx, election.Identity{ID: "old"})
	if err != nil {
		t.Fatal(err)
	}
	last := time.Now().Add(-3 * time.Second).Truncate(time.Second)
	// Job k's last claim is its hourly tick before now: none missed.
	hour := time.Now().Truncate(time.Hour)
	for _, err := range mem.Ledger().Claim(ctx, []ledger.Claim{
		{Job: "j", Tick: last, Token: old.Token(), Instance: "old"},
		{Job: "k", Tick: hour, Token: old.Token(), Instance: "old"}}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ran := make(chan struct{}, 16)
	host, err := schedulerhost.New(schedulerhost.Config{
		Jobs: []schedulerhost.Job{{Name: "j", Schedule: "* * * * * *", Misfire: schedulerhost.MisfireRunOnce, MisfireGrace: time.Minute,
			Run: func(context.Context) error { ran <- struct{}{}; return nil }},
			{Name: "k", Schedule: "0 0 * * * *", Misfire: schedulerhost.MisfireRunOnce, Run: func(context.Context) error { return nil }},
			{Name: "n", Schedule: "0 0 * * * *", Run: func(context.Context) error { return nil }}}, // never claimed
		Ledger: mem.Ledger(), Instance: "new", Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	el, err := election.New(election.Config{Backend: mem.Candidate(), Identity: election.Identity{ID: "new"}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- el.Run(rctx, host.Lead) }()
	for range 2 { // the catch-up run and a regular one
		select {
		case <-ran:
		case <-ctx.Done():
			t.Fatal("no runs in 20 s")
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}

	seen := map[string]event{}
	sc := bufio.NewScanner(bytes.NewReader([]byte(out.String())))
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		if _, ok := seen[ev.Msg]; !ok {
			seen[ev.Msg] = ev
		}
	}
	for msg, ok := range map[string]func(event) bool{
		"acquired leadership": func(e event) bool { return e.Token > 0 },
		missedMsg:             func(e event) bool { return e.Token > 0 && e.Job == "j" && e.Last.Equal(last) },
		noneMissedMsg:         func(e event) bool { return e.Token > 0 && e.Job == "k" && e.Last.Equal(hour) },
		noneClaimedMsg:        func(e event) bool { return e.Token > 0 && e.Job == "n" },
		"run started":         func(e event) bool { return e.Token > 0 && e.Job == "j" && !e.Tick.IsZero() },
		"released leadership": func(e event) bool { return e.Token > 0 && len(e.TermLength) > 0 },
	} {
		e, found := seen[msg]
		switch {
		case !found:
			t.Errorf("no %q line in:\n%s", msg, out.String())
		case !ok(e):
			t.Errorf("%q read as %+v: a key the suite reads is missing or renamed", msg, e)
		}
	}
}
