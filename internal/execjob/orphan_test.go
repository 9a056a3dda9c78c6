package execjob_test

import (
	"bufio"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/execjob"
)

// orphanHelperEnv makes the test binary a parent that runs one command
// job and blocks, so that the test can SIGKILL it.
const orphanHelperEnv = "BATON_EXECJOB_ORPHAN_HELPER"

// TestCommand_OrphanHelper is not a test: with orphanHelperEnv set to a
// script, it runs the script as a command job until it is killed.
func TestCommand_OrphanHelper(t *testing.T) {
	script := os.Getenv(orphanHelperEnv)
	if script == "" {
		t.Skip("the helper process of TestCommand_ParentKilled")
	}
	if os.Getenv(dieAtStartEnv) != "" {
		execjob.SetAfterStart(func() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) })
	}
	c := &execjob.Command{Job: "orphan", Script: script}
	_ = c.Run(context.Background())
}

// dieAtStartEnv makes the helper SIGKILL itself the moment its job's
// process has started.
const dieAtStartEnv = "BATON_EXECJOB_DIE_AT_START"

// A parent killed at the very moment its job started leaves no job
// behind either: the guard must be in place before the job runs. The
// job waits 300 ms, then writes its pid and runs on; it must be gone
// (or never have written) 2 s after its parent died.
func TestCommand_ParentKilledAsTheJobStarts(t *testing.T) {
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	script := `trap '' TERM
sleep 0.3
echo "$$" > '` + pids + `.tmp' && mv '` + pids + `.tmp' '` + pids + `'
while :; do sleep 0.05; done`
	for trial := 1; trial <= 3; trial++ {
		_ = os.Remove(pids)
		cmd := exec.Command(os.Args[0], "-test.run=^TestCommand_OrphanHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), orphanHelperEnv+"="+script, dieAtStartEnv+"=1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait() // it kills itself as the job starts
		died := time.Now()
		var alive []int
		for time.Since(died) < 2*time.Second {
			alive = alive[:0]
			if b, err := os.ReadFile(pids); err == nil {
				if p, _ := strconv.Atoi(strings.TrimSpace(string(b))); p > 0 && running(p) {
					alive = append(alive, p)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		for _, p := range alive {
			_ = syscall.Kill(-p, syscall.SIGKILL)
		}
		if len(alive) > 0 {
			t.Fatalf("trial %d: the job (pid %v) still runs 2 s after its parent was killed as it started", trial, alive)
		}
	}
}

// A command job must not outlive the process that runs it: when baton is
// killed with SIGKILL (a crash, the OOM killer, kill -9 in a failover
// test), nothing in it can stop the job, and the next leader would start
// the same job beside it once the lease expires. The job here traps
// SIGTERM and starts a background child; both must be gone soon after
// their parent's death.
func TestCommand_ParentKilled(t *testing.T) {
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	script := `trap '' TERM
sleep 600 &
echo "$$ $!" > '` + pids + `.tmp' && mv '` + pids + `.tmp' '` + pids + `'
while :; do sleep 0.05; done`
	for trial := 1; trial <= 3; trial++ {
		_ = os.Remove(pids)
		cmd := exec.Command(os.Args[0], "-test.run=^TestCommand_OrphanHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), orphanHelperEnv+"="+script)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var procs []int
		deadline := time.Now().Add(20 * time.Second)
		for procs == nil && time.Now().Before(deadline) {
			if b, err := os.ReadFile(pids); err == nil {
				for _, f := range strings.Fields(string(b)) {
					p, _ := strconv.Atoi(f)
					procs = append(procs, p)
				}
			} else {
				time.Sleep(20 * time.Millisecond)
			}
		}
		if len(procs) != 2 {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("trial %d: the job did not write its pids", trial)
		}
		killed := time.Now()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		var alive []int
		for time.Since(killed) < 2*time.Second {
			alive = alive[:0]
			for _, p := range procs {
				if running(p) {
					alive = append(alive, p)
				}
			}
			if len(alive) == 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		for _, p := range alive {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		if len(alive) > 0 {
			t.Fatalf("trial %d: the job's processes %v still run 2s after their parent was killed", trial, alive)
		}
		t.Logf("trial %d: the job's processes were gone %v after their parent was killed", trial, time.Since(killed).Round(time.Millisecond))
	}
}

// running reports whether process pid exists and is not a zombie.
func running(pid int) bool {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	// pid (comm) state ...
	i := strings.LastIndex(line, ")")
	return i >= 0 && len(line) > i+2 && line[i+2] != 'Z'
}

// warnings is a slog.Handler that keeps the messages of Warn records.
type warnings struct {
	mu  sync.Mutex
	got []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler           { return w }
func (w *warnings) WithGroup(string) slog.Handler                { return w }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	w.got = append(w.got, r.Message)
	w.mu.Unlock()
	return nil
}

// The guard is released and reaped with the job: a job that leaves
// nothing behind logs no leftovers, and one that does is still told
// apart.
func TestCommand_GuardLeavesNothing(t *testing.T) {
	for script, want := range map[string]string{
		"true":           "",
		"sleep 600 &":    "killed processes left in the job's process group",
		"echo a; exit 3": "",
	} {
		w := &warnings{}
		c := &execjob.Command{Job: "j", Script: script, Logger: slog.New(w)}
		_ = c.Run(context.Background())
		got := strings.Join(w.got, "; ")
		if got != want {
			t.Errorf("%q: warnings %q, want %q", script, got, want)
		}
	}
}
