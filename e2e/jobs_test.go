package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/e2e/internal/history"
	"github.com/batonhq/baton/internal/envtest"
)

// jobsFile is the nodes' jobs file: a job every second and a sleeping job
// every 5 s, each appending a start and an end line to runs (O_APPEND;
// the start line ends with 0, or with BATON_CATCH_UP_FROM on a catch-up
// run);
// "drain", every 3 s, which works 2.5 s and traps SIGTERM to keep working
// 3 s after it, appending a heartbeat line ("H") every 250 ms, as a
// draining script does (kill_grace 2 s cuts it; on a loss, the margin;
// on kill -9 of its node, the job's guard); and the operator's jobs
// (operator_test.go):
// "paused", every 3 s with a jitter of 2.5 s, and "manual", run only when
// asked, whose start line ends with the run-now request's id; "session",
// whose work runs in a new session (sessionScript); and "interval", an
// @every job on the epoch (intervalEvery).
func jobsFile(be *backend, runs string) string {
	rec := func(kind string) string { return runLine(kind, runs, "${BATON_CATCH_UP_FROM:-$BATON_CATCH_UP}") }
	return electionHead(be) + fmt.Sprintf(`  - name: tick
    schedule: "* * * * * *"
    command: |
      %[1]s
      %[2]s
    misfire: run-once
    misfire_grace: %[3]v
  - name: nap
    schedule: "*/5 * * * * *"
    command: |
      %[1]s
      sleep 1.5
      %[2]s
    misfire: run-once
    misfire_grace: %[3]v
  - name: drain
    schedule: "*/3 * * * * *"
    command: |
%[4]s
    misfire: run-once
    misfire_grace: %[3]v
  - name: paused
    schedule: "*/3 * * * * *"
    jitter: 2500ms
    command: |
      %[1]s
      %[2]s
  - name: manual
    schedule: "0 0 0 1 1 *"
    command: |
      %[5]s
      %[2]s
  - name: session
    schedule: "*/4 * * * * *"
    command: |
      setsid sh -c '%[6]s' &
      wait $!
    misfire: run-once
    misfire_grace: %[3]v
  - name: interval
    schedule: "@every %[7]v"
    command: |
      %[1]s
      %[2]s
    misfire: run-once
    misfire_grace: %[3]v
`, rec("S"), rec("E"), be.grace, indent(drainScript(runs), "      "), runLine("S", runs, "${BATON_REQUEST_ID:--}"),
		sessionScript(runs), intervalEvery)
}

// sessionScript is the "session" job's work, which its command starts in
// a session of its own (setsid), out of the process group that a kill of
// the job's group reaches: a start line, 2.5 s of work, an end line. Only
// a kill of every descendant of the run (a cgroup, or the subreaper's
// search) keeps its end line from coming after the next term began.
func sessionScript(runs string) string {
	rec := func(kind string) string {
		return strings.ReplaceAll(runLine(kind, runs, "${BATON_CATCH_UP_FROM:-$BATON_CATCH_UP}"), "'", `'"'"'`)
	}
	return rec("S") + "; sleep 2.5; " + rec("E")
}

// intervalEvery is the "interval" job's @every period: longer than the
// time between two of the scenario's leadership changes, so that a phase
// that started over with each term would never fire. Its ticks are the
// multiples of the period since the Unix epoch, whoever leads.
const intervalEvery = 11 * time.Second

// runLine is the shell line with which a job appends its start (kind S)
// or end (E) line to runs: the job, tick, token, instance, the time in
// nanoseconds, and last, a shell word (a catch-up field, a request id).
func runLine(kind, runs, last string) string {
	return fmt.Sprintf(`printf '%s %%s %%s %%s %%s %%s %%s\n' "$BATON_JOB" "$BATON_TICK" "$BATON_TOKEN" "$BATON_INSTANCE" "$(date +%%s%%N)" "%s" >> '%s'`, kind, last, runs)
}

// electionHead is a jobs file's election section, down to "jobs:".
func electionHead(be *backend) string {
	poll := ""
	if be.poll > 0 {
		poll = fmt.Sprintf("  poll_interval: %v\n", be.poll)
	}
	return fmt.Sprintf("election:\n  ttl: %v\n  retry_period: 500ms\n  shutdown_timeout: 5s\n  kill_grace: 2s\n  release_timeout: 3s\n%sjobs:\n", be.ttl, poll)
}

// skipUnlessLong skips t unless the e2e suite is enabled
// (skipUnlessEnabled), and in -short mode, saying why (what the test
// starts).
func skipUnlessLong(t *testing.T, why string) {
	t.Helper()
	skipUnlessEnabled(t)
	if testing.Short() {
		t.Skip(why)
	}
}

// eachBackend runs run for each backend of BATON_E2E_BACKENDS (def when
// unset), in parallel subtests.
func eachBackend(t *testing.T, def string, run func(t *testing.T, name string)) {
	for _, name := range strings.Split(envtest.Getenv("BATON_E2E_BACKENDS", def), ",") {
		name = strings.TrimSpace(name)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			run(t, name)
		})
	}
}

// drainScript is the "drain" job's command. The SIGTERM that baton
// sends the job's process group reaches a date that is running too: with
// "$(date)" among printf's arguments, /bin/sh (dash) printed the line
// with an empty time before it ran the trap. So rec takes the time in a
// command of its own, and again if date printed nothing.
func drainScript(runs string) string {
	return fmt.Sprintf(`rec() {
  t=$(date +%%s%%N)
  printf '%%s %%s %%s %%s %%s %%s %%s\n' "$1" "$BATON_JOB" "$BATON_TICK" "$BATON_TOKEN" "$BATON_INSTANCE" "$t" "$2" >> '%s'
}
cleanup() { i=0; while [ $i -lt 12 ]; do rec H term; sleep %[2]g; i=$((i+1)); done; rec E term; exit 0; }
trap cleanup TERM
rec S "${BATON_CATCH_UP_FROM:-$BATON_CATCH_UP}"
i=0
while [ $i -lt 10 ]; do
  rec H work; sleep %[2]g; i=$((i+1))
done
rec E 0`, runs, drainHeartbeat.Seconds())
}

// drainHeartbeat is the drain job's sleep between two heartbeat lines.
const drainHeartbeat = 250 * time.Millisecond

// heartbeats gives the checker the jobs' sleep between two heartbeat
// lines (history.Input.Heartbeats).
func heartbeats() map[string]time.Duration {
	return map[string]time.Duration{"drain": drainHeartbeat}
}

// indent puts pre before every line of s.
func indent(s, pre string) string {
	return pre + strings.ReplaceAll(s, "\n", "\n"+pre)
}

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
