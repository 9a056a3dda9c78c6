package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
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
	msgs = append(msgs, "run started", "node started")
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
