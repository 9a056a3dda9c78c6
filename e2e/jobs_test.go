package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/testenv"
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
// asked, whose start line ends with the run-now request's id.
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
`, rec("S"), rec("E"), be.grace, indent(drainScript(runs), "      "), runLine("S", runs, "${BATON_REQUEST_ID:--}"))
}

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

// eachBackend runs run for each backend of BATON_E2E_BACKENDS (def when
// unset), in parallel subtests.
func eachBackend(t *testing.T, def string, run func(t *testing.T, name string)) {
	for _, name := range strings.Split(testenv.Getenv("BATON_E2E_BACKENDS", def), ",") {
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
