package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
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
