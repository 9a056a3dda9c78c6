package e2e

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// historiesDir is where the report keeps the soaks' histories, beside
// the report itself.
const historiesDir = "reliability"

// keepHistories writes o's histories, gzipped, into dir/reliability as
// <backend>.json.gz (one lane) or <backend>.laneN.json.gz, after removing
// the ones an earlier soak of that backend left. It returns their paths
// relative to dir.
func keepHistories(dir string, o *outcome) ([]string, error) {
	hd := filepath.Join(dir, historiesDir)
	old, err := filepath.Glob(filepath.Join(hd, o.Backend+".lane*.json.gz"))
	if err != nil {
		return nil, err
	}
	for _, p := range append(old, filepath.Join(hd, o.Backend+".json.gz")) {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return nil, err
		}
	}
	if len(o.Histories) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(hd, 0o755); err != nil {
		return nil, err
	}
	var out []string
	for i, h := range o.Histories {
		name := o.Backend + ".json.gz"
		if len(o.Histories) > 1 {
			name = fmt.Sprintf("%s.lane%d.json.gz", o.Backend, i+1)
		}
		var b bytes.Buffer
		zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
		if err != nil {
			return nil, err
		}
		if _, err := zw.Write(h); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(hd, name), b.Bytes(), 0o644); err != nil {
			return nil, err
		}
		out = append(out, filepath.Join(historiesDir, name))
	}
	return out, nil
}

// historiesNote is the section's line on where its histories are kept.
func historiesNote(files []string) string {
	if len(files) == 0 {
		return ""
	}
	links := make([]string, len(files))
	for i, f := range files {
		links[i] = fmt.Sprintf("[%s](%s)", filepath.Base(f), f)
	}
	return fmt.Sprintf("\nThe checker's input, kept to judge this run again: %s. Recheck one from the repository root with `BATON_E2E_RECHECK=$PWD/docs/%s go test -count=1 -run TestRecheck ./e2e`.\n",
		strings.Join(links, ", "), files[0])
}

// readHistory reads a history file, gzipped or not.
func readHistory(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		return b, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

func TestKeepHistories(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "reliability.md")
	lane := func(h string) *outcome {
		return &outcome{Backend: "redis", Profile: "long", Lanes: 1, Faults: map[string]int{}, Histories: [][]byte{[]byte(h)}}
	}
	if err := writeReport(path, []*outcome{mergeLanes([]*outcome{lane(`{"A":1}`), lane(`{"B":2}`), lane(`{"C":3}`)})}); err != nil {
		t.Fatal(err)
	}
	if b, err := readHistory(filepath.Join(dir, "reliability", "redis.lane2.json.gz")); err != nil || string(b) != `{"B":2}` {
		t.Fatalf("lane 2's history: %q, %v", b, err)
	}
	// A later soak of the backend with one lane replaces all three.
	if err := writeReport(path, []*outcome{lane(`{"D":4}`)}); err != nil {
		t.Fatal(err)
	}
	got, _ := filepath.Glob(filepath.Join(dir, "reliability", "*"))
	if len(got) != 1 || filepath.Base(got[0]) != "redis.json.gz" {
		t.Fatalf("files after the second soak: %v", got)
	}
	if b, err := readHistory(got[0]); err != nil || string(b) != `{"D":4}` {
		t.Fatalf("history: %q, %v", b, err)
	}
	report, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "[redis.json.gz](reliability/redis.json.gz)"; !strings.Contains(string(report), want) {
		t.Errorf("report lacks %q:\n%s", want, report)
	}
	// Plain JSON reads as it is.
	plain := filepath.Join(dir, "h.json")
	if err := os.WriteFile(plain, []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := readHistory(plain); err != nil || string(b) != `{}` {
		t.Errorf("plain: %q, %v", b, err)
	}
}
