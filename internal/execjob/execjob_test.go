package execjob_test

import (
	"bufio"
	"context"
	"errors"
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

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/execjob"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// lines is a slog.Handler that collects the "line" attribute of output
// records and signals each one.
type lines struct {
	mu  sync.Mutex
	got []string
	c   chan string
}

func newLines() *lines { return &lines{c: make(chan string, 100)} }

func (l *lines) Enabled(context.Context, slog.Level) bool { return true }
func (l *lines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *lines) WithGroup(string) slog.Handler            { return l }
func (l *lines) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "output" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "line" {
			l.mu.Lock()
			l.got = append(l.got, a.Value.String())
			l.mu.Unlock()
			select {
			case l.c <- a.Value.String():
			default:
			}
		}
		return true
	})
	return nil
}

func (l *lines) wait(t *testing.T, want string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case s := <-l.c:
			if s == want {
				return
			}
		case <-timeout:
			t.Fatalf("no output line %q", want)
		}
	}
}

// TestCommand_Env runs a command job under a real Host and checks the six
// variables against what the Host recorded for the run, and that the
// parent's environment is passed on.
func TestCommand_Env(t *testing.T) {
	out := filepath.Join(t.TempDir(), "env")
	t.Setenv("BATON_TEST_PARENT", "inherited")
	cmd := &execjob.Command{
		Job:      "envjob",
		Script:   `printf '%s\n' "$BATON_JOB" "$BATON_TOKEN" "$BATON_TICK" "$BATON_INSTANCE" "$BATON_ELECTION" "$BATON_CATCH_UP" "$BATON_TEST_PARENT" > "$OUT.tmp" && mv "$OUT.tmp" "$OUT"`,
		Election: "reports",
		Instance: "node-7",
		Env:      append(os.Environ(), "OUT="+out),
		Logger:   slog.New(newLines()),
	}
	host, err := schedulerhost.New(schedulerhost.Config{
		Jobs:   []schedulerhost.Job{{Name: "envjob", Schedule: "* * * * * *", Run: cmd.Run}},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	// A real term (the in-memory backend), as a node runs it.
	mem := memory.New(election.Timing{})
	el, stop := lead(t, mem, "node-7", host)
	deadline := time.Now().Add(10 * time.Second)
	var data []byte
	var token uint64
	for time.Now().Before(deadline) {
		if ti, ok := el.Term(); ok {
			token = ti.Token
		}
		if data, err = os.ReadFile(out); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if data == nil || token == 0 {
		t.Fatalf("the job did not run within 10 s (token %d)", token)
	}
	st := host.Status()
	var tick time.Time
	for _, r := range st[0].Recent {
		if r.Result == ledger.ResultOK {
			tick = r.Tick
		}
	}
	got := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	want := []string{"envjob", strconv.FormatUint(token, 10), tick.UTC().Format(time.RFC3339), "node-7", "reports", "0", "inherited"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("env:\n got %q\nwant %q", got, want)
	}
	if tick.IsZero() || !strings.HasSuffix(got[2], "Z") {
		t.Errorf("BATON_TICK %q: want the nominal tick in UTC (recorded tick %v)", got[2], tick)
	}
}

func TestCommand_OutputLinePerRecord(t *testing.T) {
	l := newLines()
	cmd := &execjob.Command{Job: "out", Script: `echo one; echo two >&2; printf 'no newline'`, Logger: slog.New(l)}
	if err := cmd.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	got := strings.Join(l.got, "|")
	if !strings.Contains(got, "one") || !strings.Contains(got, "two") || !strings.Contains(got, "no newline") || len(l.got) != 3 {
		t.Errorf("lines = %q", l.got)
	}
}

func TestCommand_ExitStatus(t *testing.T) {
	cmd := &execjob.Command{Job: "fail", Script: "exit 3", Logger: slog.New(newLines())}
	err := cmd.Run(context.Background())
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("Run = %v, want exit status 3", err)
	}
}

// wantSIGKILL checks that err, what Run returned, says its process was
// killed by SIGKILL.
func wantSIGKILL(t *testing.T, err error) {
	t.Helper()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("Run = %v, want an exit error", err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("Run = %v, want killed by SIGKILL", err)
	}
}

// runReady runs cmd on a goroutine of its own and returns once cmd has
// logged "ready" to l. cancel ends Run's context; done receives Run's
// result.
func runReady(t *testing.T, cmd *execjob.Command, l *lines) (cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	go func() { ch <- cmd.Run(ctx) }()
	l.wait(t, "ready")
	return cancel, ch
}

// TestCommand_CancelExitsOnSIGTERM: a command that exits on SIGTERM returns
// promptly after cancellation, long before the kill grace.
func TestCommand_CancelExitsOnSIGTERM(t *testing.T) {
	l := newLines()
	const grace = 5 * time.Second
	cmd := &execjob.Command{Job: "polite", KillGrace: grace, Logger: slog.New(l),
		Script: `trap 'echo got TERM; exit 7' TERM; echo ready; while :; do sleep 0.1; done`}
	cancel, done := runReady(t, cmd, l)
	start := time.Now()
	cancel()
	err := <-done
	took := time.Since(start)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Errorf("Run = %v, want exit status 7 from the TERM trap", err)
	}
	if took > grace/2 {
		t.Errorf("took %v after cancel, want well under the kill grace %v", took, grace)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !strings.Contains(strings.Join(l.got, "|"), "got TERM") {
		t.Errorf("the trap did not run: %q", l.got)
	}
	t.Logf("exited %v after cancellation", took.Round(time.Millisecond))
}

// TestCommand_CancelKillsAfterGrace: a command (and its children) ignoring
// SIGTERM is killed with SIGKILL once the kill grace has passed.
func TestCommand_CancelKillsAfterGrace(t *testing.T) {
	l := newLines()
	const grace = 1500 * time.Millisecond
	pidFile := filepath.Join(t.TempDir(), "child")
	cmd := &execjob.Command{Job: "stubborn", KillGrace: grace, Logger: slog.New(l),
		Env: append(os.Environ(), "PIDFILE="+pidFile),
		Script: `trap 'echo ignoring TERM' TERM; sleep 60 & echo $! > "$PIDFILE"; echo ready
while :; do sleep 0.1; done`}
	cancel, done := runReady(t, cmd, l)
	start := time.Now()
	cancel()
	l.wait(t, "ignoring TERM")
	err := <-done
	took := time.Since(start)
	wantSIGKILL(t, err)
	if took < grace || took > grace+2*time.Second {
		t.Errorf("killed %v after cancel, want just after the grace %v", took, grace)
	}
	// The background child got SIGTERM too (sleep does not trap it) or
	// was killed with the group: it must be gone.
	data, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatal(rerr)
	}
	var pid int
	for _, c := range strings.TrimSpace(string(data)) {
		pid = pid*10 + int(c-'0')
	}
	time.Sleep(50 * time.Millisecond) // let init reap it
	if err := syscall.Kill(pid, 0); err == nil {
		if b, _ := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(string(data)), "stat")); !strings.Contains(string(b), ") Z ") {
			t.Errorf("child %d still alive", pid)
		}
	}
	t.Logf("killed %v after cancellation (grace %v)", took.Round(time.Millisecond), grace)
}

// TestCommand_EnvCatchUp checks BATON_CATCH_UP: "1" on the catch-up run a
// new term makes for a tick missed while nobody led, "0" on the regular
// runs after it; and BATON_CATCH_UP_FROM: on the catch-up run (run-once)
// the first tick missed after the last claim, empty on the others.
func TestCommand_EnvCatchUp(t *testing.T) {
	out := filepath.Join(t.TempDir(), "catchup")
	cmd := &execjob.Command{
		Job:    "cu",
		Script: `echo "$BATON_CATCH_UP $BATON_TICK ${BATON_CATCH_UP_FROM:--}" >> "$OUT"`,
		Env:    append(os.Environ(), "OUT="+out),
		Logger: slog.New(slog.DiscardHandler),
	}
	mem := memory.New(election.Timing{})
	// An earlier term claimed a tick 3 s ago and died.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := mem.Candidate().Acquire(ctx, election.Identity{ID: "old"})
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-3 * time.Second).Truncate(time.Second)
	if err := mem.Ledger().Claim(ctx, []ledger.Claim{{Job: "cu", Tick: old, Token: lease.Token(), Instance: "old"}})[0]; err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	host, err := schedulerhost.New(schedulerhost.Config{
		Jobs: []schedulerhost.Job{{Name: "cu", Schedule: "* * * * * *", Run: cmd.Run,
			Misfire: schedulerhost.MisfireRunOnce, MisfireGrace: time.Minute}},
		Ledger:   mem.Ledger(),
		Instance: "new",
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, stop := lead(t, mem, "new", host)
	var got []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		data, _ := os.ReadFile(out)
		if got = strings.Split(strings.TrimSpace(string(data)), "\n"); len(got) >= 2 {
			break
		}
	}
	stop()
	if len(got) < 2 || !strings.HasPrefix(got[0], "1 ") || !strings.HasPrefix(got[1], "0 ") {
		t.Fatalf("runs (BATON_CATCH_UP BATON_TICK BATON_CATCH_UP_FROM): %q; want a catch-up run (1) then a regular one (0)", got)
	}
	f := strings.Fields(got[0])
	if want := old.Add(time.Second).UTC().Format(time.RFC3339); len(f) != 3 || f[2] != want || f[1] <= want {
		t.Errorf("catch-up run %q: want BATON_CATCH_UP_FROM %s, the tick after the last claim, before its own tick", got[0], want)
	}
	if f := strings.Fields(got[1]); len(f) != 3 || f[2] != "-" {
		t.Errorf("regular run %q: want no BATON_CATCH_UP_FROM", got[1])
	}
}

// lead runs an Elector for a candidate of mem named id, leading with
// host, on a goroutine of its own, and returns it with a stop function.
// stop cancels the Elector, waits for Run to return and stops t
// (t.Fatalf) if Run returned an error; call it from the test's goroutine.
func lead(t *testing.T, mem *memory.Server, id string, host *schedulerhost.Host) (*election.Elector, func()) {
	t.Helper()
	el, err := election.New(election.Config{Backend: mem.Candidate(), Identity: election.Identity{ID: id},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- el.Run(ctx, host.Lead) }()
	return el, func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
}

// TestCommand_EnvAttempt: a command job with retries sees its attempt in
// BATON_ATTEMPT, under one tick.
func TestCommand_EnvAttempt(t *testing.T) {
	out := filepath.Join(t.TempDir(), "attempts")
	cmd := &execjob.Command{
		Job:    "retrying",
		Script: `echo "$BATON_ATTEMPT $BATON_TICK" >> "$OUT"; [ "$BATON_ATTEMPT" -ge 3 ]`,
		Env:    append(os.Environ(), "OUT="+out),
		Logger: slog.New(newLines()),
	}
	host, err := schedulerhost.New(schedulerhost.Config{
		Jobs: []schedulerhost.Job{{Name: "retrying", Schedule: "@every 1s", Run: cmd.Run, Overlap: schedulerhost.OverlapSkip,
			Retries: 3, RetryBackoff: 10 * time.Millisecond}},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, stop := lead(t, memory.New(election.Timing{}), "node-1", host)
	deadline := time.Now().Add(10 * time.Second)
	var lines []string
	for time.Now().Before(deadline) {
		data, _ := os.ReadFile(out)
		if lines = strings.Split(strings.TrimSpace(string(data)), "\n"); len(lines) >= 3 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if len(lines) < 3 {
		t.Fatalf("attempts: %q, want 3 within 10 s", lines)
	}
	tick := strings.Fields(lines[0])[1]
	for i, l := range lines[:3] {
		if want := strconv.Itoa(i+1) + " " + tick; l != want {
			t.Errorf("attempt %d: BATON_ATTEMPT BATON_TICK %q, want %q", i+1, l, want)
		}
	}
}

// TestCommand_LostTermKilledAtOnce: when the term is lost by the backend's
// word or a stale claim (Term.Lose), another leader may run already: the
// process group gets SIGKILL at once, not SIGTERM and the kill grace. The
// bound on a loss at the local deadline is checked on real backends
// (killtest.RunLostTerm).
func TestCommand_LostTermKilledAtOnce(t *testing.T) {
	l := newLines()
	cmd := &execjob.Command{Job: "stubborn", KillGrace: 5 * time.Second, Logger: slog.New(l),
		Script: `trap 'echo ignoring TERM' TERM; echo ready; while :; do sleep 0.1; done`}
	term := election.NewTerm(context.Background(), 1)
	done := make(chan error, 1)
	go func() { done <- cmd.Run(term.Context()) }()
	l.wait(t, "ready")
	start := time.Now()
	term.Lose(errors.New("claim refused: stale token"))
	err := <-done
	took := time.Since(start)
	wantSIGKILL(t, err)
	l.mu.Lock()
	got := strings.Join(l.got, "\n")
	l.mu.Unlock()
	if strings.Contains(got, "ignoring TERM") {
		t.Errorf("the command got SIGTERM on a loss by Lose; output:\n%s", got)
	}
	if took > time.Second {
		t.Errorf("killed %v after the loss, want at once (kill grace 5s)", took)
	}
	t.Logf("killed %v after the loss", took.Round(time.Millisecond))
}

// TestGoneBy: a term lost by Lose must have its processes gone at once; a
// graceful end of a run's context (a step-down, a job's timeout) is no
// loss, and the kill grace applies.
func TestGoneBy(t *testing.T) {
	term := election.NewTerm(context.Background(), 1)
	if _, lost := election.GoneBy(term.Context()); lost {
		t.Error("live term: lost")
	}
	run, cancel := context.WithCancelCause(term.Context())
	cancel(schedulerhost.ErrJobTimeout)
	if _, lost := election.GoneBy(run); lost {
		t.Error("a job's timeout: lost")
	}
	run2, cancel2 := context.WithCancel(term.Context())
	defer cancel2()
	before := time.Now()
	term.Lose(errors.New("stale"))
	goneBy, lost := election.GoneBy(run2)
	if !lost || goneBy.Before(before) || goneBy.After(time.Now()) {
		t.Errorf("after Lose: GoneBy = %v, %v; want now, true", goneBy, lost)
	}
}

// TestCommand_LossDuringGracefulGrace: a run cancelled gracefully (its
// job's timeout) gets SIGTERM and the kill grace; when the term is lost
// during that grace (the leader cut off from the backend), SIGKILL comes
// by the lease's GoneBy, long before the grace ends.
func TestCommand_LossDuringGracefulGrace(t *testing.T) {
	m := memory.New(election.Timing{TTL: 2 * time.Second, RenewInterval: 500 * time.Millisecond, SafetyMargin: 500 * time.Millisecond})
	c := m.Candidate()
	e, err := election.New(election.Config{Backend: c, Identity: election.Identity{ID: "a"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	l := newLines()
	const grace = 10 * time.Second
	cmd := &execjob.Command{Job: "stubborn", KillGrace: grace, Logger: slog.New(l),
		Script: `trap 'echo ignoring TERM' TERM; echo ready; while :; do sleep 0.05; done`}
	graceful := make(chan func(), 1)
	ended := make(chan error, 1)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	runErr := make(chan error, 1)
	go func() {
		runErr <- e.Run(ctx, func(_ context.Context, term election.Term) error {
			run, cancel := context.WithCancelCause(term.Context())
			defer cancel(nil)
			graceful <- func() { cancel(schedulerhost.ErrJobTimeout) } // the lease is held
			ended <- cmd.Run(run)
			return nil
		})
	}()
	defer func() { stop(); c.Heal(); <-runErr }()
	var cancelRun func()
	select {
	case cancelRun = <-graceful:
	case <-time.After(10 * time.Second):
		t.Fatal("not leading within 10 s")
	}
	l.wait(t, "ready")
	cancelRun()
	l.wait(t, "ignoring TERM")
	c.Cut()
	cut := time.Now()
	var r struct {
		took time.Duration
		err  error
	}
	select {
	case r.err = <-ended:
		r.took = time.Since(cut)
	case <-time.After(20 * time.Second):
		t.Fatal("the command still ran 20 s after the cut")
	}
	wantSIGKILL(t, r.err)
	// The local deadline comes at most TTL - SafetyMargin (1.5 s) after
	// the cut, GoneBy 250 ms after it.
	if r.took > 3*time.Second {
		t.Errorf("killed %v after the cut, want by the lease's GoneBy (under 1.75 s), not the 10 s grace", r.took)
	}
	t.Logf("killed %v after the cut (kill grace %v)", r.took.Round(time.Millisecond), grace)
}

// A term lost before the command's start (its node frozen between the
// Host's "run started" and the fork, and thawed past its deadline, as in
// the kube soak) starts no process: nothing of a lost term may begin
// after the loss. Run returns the loss as its cause.
func TestCommand_LostBeforeStartStartsNothing(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := &execjob.Command{Job: "late", Logger: slog.New(newLines()), Script: "touch '" + marker + "'"}
	term := election.NewTerm(context.Background(), 1)
	lost := errors.New("local deadline passed while frozen")
	term.Lose(lost)
	err := cmd.Run(term.Context())
	if !errors.Is(err, lost) {
		t.Errorf("Run = %v, want the term's loss as its cause", err)
	}
	time.Sleep(100 * time.Millisecond)
	if _, serr := os.Stat(marker); serr == nil {
		t.Errorf("the command ran after its term was lost")
	}
}

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
		"sleep 600 &":    "killed processes the job left running",
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
