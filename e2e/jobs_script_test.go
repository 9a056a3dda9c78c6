package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/e2e/internal/history"
)

// TestDrainScript_SIGTERMDuringDate sends SIGTERM to the drain job's
// process group, as baton does on a loss, while the job's date runs. A
// date on PATH that waits 100 ms widens the window; the signal kills it
// and the trap writes on. Every line the job wrote must still parse, and
// the trap's end line must be there.
func TestDrainScript_SIGTERMDuringDate(t *testing.T) {
	realDate, err := exec.LookPath("date")
	if err != nil {
		t.Fatalf("date: %v", err)
	}
	dir := t.TempDir()
	mark := filepath.Join(dir, "date-running")
	fake := "#!/bin/sh\n: > '" + mark + "'\nsleep 0.1\nrm -f '" + mark + "'\nexec '" + realDate + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "date"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	for trial := range 2 {
		runs := filepath.Join(dir, "runs")
		os.Remove(runs)
		cmd := exec.Command("sh", "-c", drainScript(runs))
		cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"),
			"BATON_JOB=drain", "BATON_TICK=2026-01-01T00:00:03Z", "BATON_TOKEN=4", "BATON_INSTANCE=node-1", "BATON_CATCH_UP=0")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait for a heartbeat's date: the start line is written, and the
		// mark says a date is running now.
		ok := waitFor(10*time.Second, func() bool {
			b, _ := os.ReadFile(runs)
			_, err := os.Stat(mark)
			return strings.Count(string(b), "\n") >= 1+trial && err == nil
		})
		if !ok {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
			t.Fatalf("trial %d: no heartbeat's date ran within 10 s", trial)
		}
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("trial %d: the job exited %v after SIGTERM, want 0 from its trap", trial, err)
			}
		case <-time.After(20 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			t.Fatalf("trial %d: the job still ran 20 s after SIGTERM", trial)
		}
		f, err := os.Open(runs)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := history.ParseRecords(f)
		f.Close()
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if n := len(recs); n == 0 || recs[n-1].Kind != "E" {
			t.Fatalf("trial %d: %d records, the last not the trap's end line", trial, n)
		}
	}
}
