package e2e

import (
	"fmt"
	"strings"
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
	rec := func(kind string) string {
		return fmt.Sprintf(`printf '%s %%s %%s %%s %%s %%s %%s\n' "$BATON_JOB" "$BATON_TICK" "$BATON_TOKEN" "$BATON_INSTANCE" "$(date +%%s%%N)" "${BATON_CATCH_UP_FROM:-$BATON_CATCH_UP}" >> '%s'`, kind, runs)
	}
	poll := ""
	if be.poll > 0 {
		poll = fmt.Sprintf("  poll_interval: %v\n", be.poll)
	}
	return fmt.Sprintf(`election:
  ttl: %[1]v
  retry_period: 500ms
  shutdown_timeout: 5s
  kill_grace: 2s
  release_timeout: 3s
%[2]sjobs:
  - name: tick
    schedule: "* * * * * *"
    command: |
      %[3]s
      %[4]s
    misfire: run-once
    misfire_grace: %[5]v
  - name: nap
    schedule: "*/5 * * * * *"
    command: |
      %[3]s
      sleep 1.5
      %[4]s
    misfire: run-once
    misfire_grace: %[5]v
  - name: drain
    schedule: "*/3 * * * * *"
    command: |
%[6]s
    misfire: run-once
    misfire_grace: %[5]v
  - name: paused
    schedule: "*/3 * * * * *"
    jitter: 2500ms
    command: |
      %[3]s
      %[4]s
  - name: manual
    schedule: "0 0 0 1 1 *"
    command: |
      %[7]s
      %[4]s
`, be.ttl, poll, rec("S"), rec("E"), be.grace, indent(drainScript(runs), "      "), strings.Replace(rec("S"), `"${BATON_CATCH_UP_FROM:-$BATON_CATCH_UP}"`, `"${BATON_REQUEST_ID:--}"`, 1))
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
cleanup() { i=0; while [ $i -lt 12 ]; do rec H term; sleep 0.25; i=$((i+1)); done; rec E term; exit 0; }
trap cleanup TERM
rec S "${BATON_CATCH_UP_FROM:-$BATON_CATCH_UP}"
i=0
while [ $i -lt 10 ]; do
  rec H work; sleep 0.25; i=$((i+1))
done
rec E 0`, runs)
}

// indent puts pre before every line of s.
func indent(s, pre string) string {
	return pre + strings.ReplaceAll(s, "\n", "\n"+pre)
}
