package cli

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/jobsfile"
)

// FuzzSettings feeds any config file to `baton run`'s settings: the
// file's backend and node sections, then variables, onto its flags. No
// input panics, and every error about the file names it: each line of the
// error starts with the file's path.
func FuzzSettings(f *testing.F) {
	f.Add(config)
	f.Add("backend:\n  kind: redis\n  redis_sentinel: [a:1, b:2]\n  redis_master: m\njobs:\n  - {name: a, schedule: '@every 1s', builtin: log}\n")
	f.Add("node:\n  standby: maybe\n  step_down_cooldown: -1s\njobs:\n  - {name: a, schedule: '@every 1s', builtin: log}\n")
	f.Add("election:\n  name: ''\nbackend:\n  kind: ~\n  election: x\njobs:\n  - {name: a, schedule: '@every 1s', http: {url: 'http://x/'}}\n")
	f.Add("backend:\n  endpoints: {a: b}\nnode: [1, 2]\njobs: []\n")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, in string) {
		path := filepath.Join(dir, "baton.yaml")
		if err := os.WriteFile(path, []byte(in), 0o644); err != nil {
			t.Fatal(err)
		}
		file, err := jobsfile.Load(path)
		if err != nil {
			return // the jobs file's own fuzz target covers its errors
		}
		p := &Program{Name: "baton", Getenv: func(string) string { return "" }}
		_, _, _, err = p.nodeSettings("run", []string{"--config", path}, io.Discard)
		if err == nil {
			return
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if !strings.HasPrefix(line, file.Path+":") {
				t.Errorf("error line without the file: %q", line)
			}
		}
	})
}
