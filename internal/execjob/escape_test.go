package execjob_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/execjob"
	"github.com/batonhq/baton/internal/execjob/killtest"
)

// escapeScript leaves two processes that ignore SIGTERM outside the
// job's process group, one by setsid, one by a double fork into a new
// session (its parent exits), then prints its cgroup v2 line and "ready".
const escapeScript = `esc='trap "" TERM HUP INT; while :; do sleep 0.05; done'
setsid sh -c "$esc" </dev/null >/dev/null 2>&1 &
(setsid sh -c 'sh -c "$1" & exit 0' sh "$esc" </dev/null >/dev/null 2>&1 &)
grep '^0::' /proc/self/cgroup
echo ready
`

// modes runs f in the cgroup mode (skipped where no cgroup can be made,
// saying why) and in the fallback (BATON_CGROUPS=off).
func modes(t *testing.T, f func(t *testing.T, cgroup bool)) {
	t.Run("cgroup", func(t *testing.T) {
		if _, err := execjob.CgroupSupport(); err != nil {
			t.Skipf("no cgroup per run here: %v", err)
		}
		f(t, true)
	})
	t.Run("fallback", func(t *testing.T) {
		t.Setenv(execjob.EnvCgroups, "off")
		f(t, false)
	})
}

// marker is an environment entry unique to one test's commands. What
// carries it is killed when the test ends, failed or not.
func marker(t *testing.T) string {
	m := "BATON_TEST_RUN=" + strconv.Itoa(os.Getpid()) + "-" + strings.ReplaceAll(t.Name(), "/", "-")
	t.Cleanup(func() {
		for _, p := range killtest.Survivors(t, m) {
			pid, _ := strconv.Atoi(strings.Fields(p)[0])
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return m
}

// waitEscaped waits until the job's two escaped processes and its shell
// run (three processes with the marker).
func waitEscaped(t *testing.T, mark string) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); len(killtest.Survivors(t, mark)) < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the job's processes did not start: %v", killtest.Survivors(t, mark))
		}
	}
}

// checkCgroup checks the cgroup line the job printed: a cgroup of the
// run's (baton-...) in the cgroup mode, none in the fallback.
func checkCgroup(t *testing.T, l *lines, cgroup bool) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.got {
		if strings.HasPrefix(s, "0::") {
			if got := strings.Contains(s, "/baton-"); got != cgroup {
				t.Errorf("the job ran in cgroup %q; want one of its own: %v", s, cgroup)
			}
			return
		}
	}
	t.Errorf("no cgroup line in the output %q", l.got)
}

// Every process a command job started, in a session of its own or after
// a double fork, is gone by /proc when Run returns: on a lost term
// (SIGKILL at once), after the kill grace of a graceful stop, and when
// the shell exits on its own. Three trials each.
func TestCommand_EscapedProcessesGone(t *testing.T) {
	ends := map[string]struct {
		script string
		end    func(t *testing.T, l *lines, mark string, cmd *execjob.Command) error
	}{
		"lost term": {escapeScript + "while :; do sleep 0.05; done", func(t *testing.T, l *lines, mark string, cmd *execjob.Command) error {
			term := election.NewTerm(context.Background(), 1)
			done := make(chan error, 1)
			go func() { done <- cmd.Run(term.Context()) }()
			l.wait(t, "ready")
			waitEscaped(t, mark)
			term.Lose(errors.New("claim refused: stale token"))
			return <-done
		}},
		"graceful stop": {escapeScript + "trap '' TERM; while :; do sleep 0.05; done", func(t *testing.T, l *lines, mark string, cmd *execjob.Command) error {
			cmd.KillGrace = 300 * time.Millisecond
			cancel, done := runReady(t, cmd, l)
			waitEscaped(t, mark)
			cancel()
			return <-done
		}},
		"shell exits": {escapeScript + "sleep 0.3", func(t *testing.T, l *lines, mark string, cmd *execjob.Command) error {
			return cmd.Run(context.Background())
		}},
	}
	modes(t, func(t *testing.T, cgroup bool) {
		for name, e := range ends {
			t.Run(strings.ReplaceAll(name, " ", "-"), func(t *testing.T) {
				mark := marker(t)
				for trial := range 3 {
					l := newLines()
					cmd := &execjob.Command{Job: "escape", Script: e.script, Logger: slog.New(l), Env: append(os.Environ(), mark)}
					start := time.Now()
					err := e.end(t, l, mark, cmd)
					took := time.Since(start)
					if left := killtest.Survivors(t, mark); len(left) > 0 {
						t.Fatalf("trial %d: processes of the job alive after Run returned (%v): %v", trial, err, left)
					}
					checkCgroup(t, l, cgroup)
					t.Logf("trial %d: Run returned %v after %v, nothing of the job left", trial, err, took.Round(time.Millisecond))
				}
			})
		}
	})
}

// A command job whose parent dies (SIGKILL) leaves nothing either: the
// guard kills the run's cgroup and removes it, or, in the fallback, kills
// every process with the run's tag.
func TestCommand_ParentKilledTakesEscapedProcesses(t *testing.T) {
	modes(t, func(t *testing.T, cgroup bool) {
		mark := marker(t)
		for trial := 1; trial <= 3; trial++ {
			cmd := exec.Command(os.Args[0], "-test.run=^TestCommand_OrphanHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), orphanHelperEnv+"="+escapeScript+"while :; do sleep 0.05; done", mark)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitEscaped(t, mark)
			killed := time.Now()
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			var left []string
			for time.Since(killed) < 5*time.Second {
				if left = killtest.Survivors(t, mark); len(left) == 0 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if len(left) > 0 {
				t.Fatalf("trial %d: the job's processes %v still run 5 s after their parent was killed", trial, left)
			}
			t.Logf("trial %d: gone %v after the parent was killed", trial, time.Since(killed).Round(time.Millisecond))
			if cgroup { // the guard removes the run's cgroup too
				base, _ := execjob.CgroupSupport()
				pattern := filepath.Join(base, fmt.Sprintf("baton-%d-*", cmd.Process.Pid))
				var dirs []string
				for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
					if dirs, _ = filepath.Glob(pattern); len(dirs) == 0 {
						break
					}
				}
				if len(dirs) > 0 {
					t.Errorf("trial %d: the run's cgroup is left: %v", trial, dirs)
				}
			}
		}
	})
}

// subreaperHelperEnv makes the test binary a subreaper (as the baton
// command is in the fallback) that runs command jobs.
const subreaperHelperEnv = "BATON_EXECJOB_SUBREAPER_HELPER"

// TestCommand_SubreaperHelper is not a test: with subreaperHelperEnv set,
// it allows the subreaper, runs jobs that orphan processes beside jobs
// that exit 3, and prints what it saw.
func TestCommand_SubreaperHelper(t *testing.T) {
	if os.Getenv(subreaperHelperEnv) == "" {
		t.Skip("the helper process of TestCommand_SubreaperReapsOnlyOrphans")
	}
	execjob.AllowSubreaper()
	l := newLines()
	orphaning := &execjob.Command{Job: "orphans", Logger: slog.New(l),
		Env: append(os.Environ(), "H="+strconv.Itoa(os.Getpid())),
		// The orphan waits (up to 10 s) to be reparented, says to whom,
		// and lets the job end.
		Script: `M=$(mktemp -u); export M
(setsid sh -c 'i=0; while [ "$(cut -d" " -f4 /proc/$$/stat)" != "$H" ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done
echo "orphan ppid $(cut -d" " -f4 /proc/$$/stat)" >&2; : > "$M"' &)
i=0; until [ -e "$M" ] || [ $i -ge 1500 ]; do sleep 0.01; i=$((i+1)); done; rm -f "$M"`}
	statuses := make(chan error, 20)
	for range 10 {
		go func() { statuses <- orphaning.Run(context.Background()) }()
		go func() {
			c := &execjob.Command{Job: "three", Script: "sleep 0.1; exit 3", Logger: slog.New(slog.DiscardHandler)}
			statuses <- c.Run(context.Background())
		}()
	}
	threes, oks := 0, 0
	for range 20 {
		var ee *exec.ExitError
		switch err := <-statuses; {
		case err == nil:
			oks++
		case errors.As(err, &ee) && ee.ExitCode() == 3:
			threes++
		default:
			fmt.Printf("unexpected status: %v\n", err)
		}
	}
	fmt.Printf("oks %d threes %d\n", oks, threes)
	for end := time.Now().Add(10 * time.Second); len(children(os.Getpid())) > 0 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond) // the orphans' ends, and the reaper's
	}
	l.mu.Lock()
	for _, s := range l.got {
		fmt.Println(s)
	}
	l.mu.Unlock()
	fmt.Printf("children %q\n", strings.Join(children(os.Getpid()), " "))
}

// children lists the processes whose parent is pid, zombies too, as
// "PID:STATE".
func children(pid int) []string {
	dirs, _ := os.ReadDir("/proc")
	var out []string
	for _, d := range dirs {
		raw, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(raw)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, d.Name()+":"+f[0])
		}
	}
	return out
}

// In the fallback, the baton command is a child subreaper: a job's
// orphans are reparented to it, not init, and it reaps them by pid, never
// taking a command's exit status from os/exec: ten jobs that exit 3,
// beside ten that orphan a process each, all report status 3.
func TestCommand_SubreaperReapsOnlyOrphans(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCommand_SubreaperHelper$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), subreaperHelperEnv+"=1", execjob.EnvCgroups+"=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "oks 10 threes 10") {
		t.Errorf("want 10 jobs ok and 10 with status 3:\n%s", s)
	}
	if want := fmt.Sprintf("orphan ppid %d", cmd.Process.Pid); strings.Count(s, want) != 10 {
		t.Errorf("want 10 orphans reparented to the helper (%s):\n%s", want, s)
	}
	if !strings.Contains(s, `children ""`) {
		t.Errorf("the helper has children left (zombies not reaped):\n%s", s)
	}
}
