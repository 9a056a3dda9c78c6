// Package killtest checks, with real processes on a real backend, that a
// command job of a lost term is gone before the next leader starts it:
// the command traps SIGTERM and keeps working, and the leader is cut off
// from the backend. Backend test packages call RunLostTerm.
package killtest

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/execjob"
	"github.com/batonhq/baton/schedulerhost"
)

// Script is the command of the tests, run by /bin/sh with F, the file it
// writes to, and P, a directory of pid files, in its environment. It
// traps SIGTERM and keeps working until a file P/stop exists (the end of
// a trial). It writes, with BATON_TOKEN:
//
//	start TOKEN PID ALIVE   when it starts; ALIVE lists the pids of the
//	                        other tokens' commands still running then
//	hb TOKEN NANOS          every 20 ms, NANOS the Unix time
//	term TOKEN NANOS        when it gets SIGTERM
const Script = `mine="$P/$BATON_TOKEN.pid"
alive=""
for f in "$P"/*.pid; do
	[ -e "$f" ] || continue
	p=$(cat "$f")
	st=$(cut -d' ' -f3 "/proc/$p/stat" 2>/dev/null)
	if [ -n "$st" ] && [ "$st" != Z ]; then alive="${alive:+$alive,}$p"; fi
done
echo $$ > "$mine"
echo "start $BATON_TOKEN $$ ${alive:-none}" >> "$F"
trap 'echo "term $BATON_TOKEN $(date +%s%N)" >> "$F"' TERM
while [ ! -e "$P/stop" ]; do echo "hb $BATON_TOKEN $(date +%s%N)" >> "$F"; sleep 0.02; done`

// EscapeScript is Script whose command, once started, leaves two
// processes outside its process group that beat as it does, under its
// token, and ignore SIGTERM: one started with setsid (a session of its
// own, still the shell's child), and one that double-forks into a new
// session, as a daemon does (its parent exits, so it is nobody's child in
// the run). Each writes its pid to P/TOKEN-setsid.pid or
// P/TOKEN-daemon.pid, so that a later command's start sees it alive.
// They end with the trial (P/stop), or when P is gone (a failed trial).
var EscapeScript = strings.Replace(Script, "\ntrap 'echo", "\n"+escapees+"trap 'echo", 1)

const escapees = `esc='trap "" TERM HUP INT; echo $$ > "$P/$BATON_TOKEN-$1.pid"; while [ ! -e "$P/stop" ] && [ -d "$P" ]; do echo "hb $BATON_TOKEN $(date +%s%N)" >> "$F"; sleep 0.02; done'
setsid sh -c "$esc" sh setsid </dev/null >/dev/null 2>&1 &
(setsid sh -c 'sh -c "$1" sh daemon & exit 0' sh "$esc" </dev/null >/dev/null 2>&1 &)
`

// Record is what one trial's file says about each token's command.
type Record struct {
	PID            int
	AliveAtStart   string    // other tokens' pids running at its start, or "none"
	First, Last    time.Time // its first and last heartbeat
	Term           time.Time // when it got SIGTERM, zero if it did not
	Started, Beats bool
}

// Read parses the file the script wrote, by token.
func Read(t testing.TB, file string) map[uint64]*Record {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatalf("heartbeats: %v", err)
	}
	defer f.Close()
	recs := map[uint64]*Record{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		w := strings.Fields(sc.Text())
		if len(w) < 3 {
			continue // a line cut by SIGKILL
		}
		tok, err := strconv.ParseUint(w[1], 10, 64)
		if err != nil {
			continue
		}
		r := recs[tok]
		if r == nil {
			r = &Record{}
			recs[tok] = r
		}
		switch w[0] {
		case "start":
			if len(w) == 4 {
				r.PID, _ = strconv.Atoi(w[2])
				r.AliveAtStart, r.Started = w[3], true
			}
		case "hb", "term":
			ns, err := strconv.ParseInt(w[2], 10, 64)
			if err != nil {
				continue
			}
			at := time.Unix(0, ns)
			if w[0] == "term" {
				r.Term = at
				continue
			}
			if !r.Beats || at.Before(r.First) {
				r.First = at
			}
			if at.After(r.Last) {
				r.Last = at
			}
			r.Beats = true
		}
	}
	return recs
}

// CheckHandover asserts that the command of token old was gone before
// that of token next started: its last heartbeat is before next's first,
// and next found no other token's process running at its start. It
// returns the gap (next's first heartbeat less old's last).
func CheckHandover(t testing.TB, recs map[uint64]*Record, old, next uint64) time.Duration {
	t.Helper()
	o, n := recs[old], recs[next]
	if o == nil || n == nil || !o.Beats || !n.Beats || !n.Started {
		t.Fatalf("want heartbeats of tokens %d and %d, got %+v", old, next, recs)
	}
	gap := n.First.Sub(o.Last)
	if gap <= 0 {
		t.Errorf("old command (token %d) alive %v after the new start (token %d): last heartbeat %s, new first %s",
			old, -gap.Round(time.Millisecond), next, o.Last.Format("15:04:05.000"), n.First.Format("15:04:05.000"))
	}
	if n.AliveAtStart != "none" {
		t.Errorf("new command (token %d) started while pids %s of another term still ran (old pid %d)", next, n.AliveAtStart, o.PID)
	}
	return gap
}

// ReportHandover reads file 100 ms after the old command's process has
// gone (its last heartbeats written), checks the handover from token old
// to token next (CheckHandover), logs how the old command ended and when
// each command beat, counted from cut, the time the old holder was cut
// off, and returns the gap.
func ReportHandover(t testing.TB, file string, old, next uint64, cut time.Time) time.Duration {
	t.Helper()
	time.Sleep(100 * time.Millisecond)
	recs := Read(t, file)
	gap := CheckHandover(t, recs, old, next)
	o, n := recs[old], recs[next]
	termed := "no SIGTERM"
	if !o.Term.IsZero() {
		termed = fmt.Sprintf("SIGTERM %v after the cut", o.Term.Sub(cut).Round(time.Millisecond))
	}
	t.Logf("old command (token %d): %s, last heartbeat %v after the cut; new command (token %d) first heartbeat %v after the cut: gap %v",
		old, termed, o.Last.Sub(cut).Round(time.Millisecond), next, n.First.Sub(cut).Round(time.Millisecond), gap.Round(time.Millisecond))
	return gap
}

// Candidate is one candidate of a trial's election: its Backend, and Cut
// and Heal, which cut its path to the backend and heal it. A trial calls
// Cut on the leader while its command runs, and Heal (if not nil) when
// the candidate's node stops.
type Candidate struct {
	Backend   election.Backend
	Cut, Heal func()
}

// RunLostTerm runs trials: two Hosts, each with a command job running
// Script every second (it never ends on its own; KillGrace is the default
// 5 s), lead on a fresh election from newElection; the leader's path to
// the backend is cut while its command runs. In every trial the old
// command must be gone before the new leader's starts.
func RunLostTerm(t *testing.T, trials int, newElection func(t *testing.T) func(t *testing.T, name string) Candidate) {
	runLostTerm(t, trials, newElection, Script)
}

// RunLostTermEscaping is RunLostTerm with EscapeScript: the processes the
// command leaves in a session of their own must be gone too, by /proc,
// when the next leader's command starts.
func RunLostTermEscaping(t *testing.T, trials int, newElection func(t *testing.T) func(t *testing.T, name string) Candidate) {
	runLostTerm(t, trials, newElection, EscapeScript)
}

func runLostTerm(t *testing.T, trials int, newElection func(t *testing.T) func(t *testing.T, name string) Candidate, script string) {
	var gaps []string
	for i := range trials {
		t.Run(fmt.Sprintf("trial-%d", i), func(t *testing.T) {
			gaps = append(gaps, lostTermTrial(t, newElection(t), script).Round(time.Millisecond).String())
		})
	}
	t.Logf("new start less the old command's last heartbeat, by trial: %s", strings.Join(gaps, ", "))
}

func lostTermTrial(t *testing.T, candidate func(t *testing.T, name string) Candidate, script string) time.Duration {
	dir := t.TempDir()
	file, pids := filepath.Join(dir, "beats"), filepath.Join(dir, "pids")
	if err := os.Mkdir(pids, 0o755); err != nil {
		t.Fatal(err)
	}
	a := startNode(t, candidate(t, "a"), "a", file, pids, script)
	b := startNode(t, candidate(t, "b"), "b", file, pids, script)
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(pids, "stop"), nil, 0o644) }) // before the nodes stop
	var leader *node
	wait(t, 20*time.Second, "a leader's command to beat for 500 ms", func() bool {
		for _, n := range []*node{a, b} {
			if n.elector.IsLeader() {
				leader = n
			}
		}
		if leader == nil || !exists(file) {
			return false
		}
		for _, r := range Read(t, file) {
			if r.Beats && r.Last.Sub(r.First) >= 500*time.Millisecond {
				return true
			}
		}
		return false
	})
	recs := Read(t, file)
	if len(recs) != 1 {
		t.Fatalf("before the cut: commands of %d terms, want 1", len(recs))
	}
	var old uint64
	for tok := range recs {
		old = tok
	}
	leader.c.Cut()
	cut := time.Now()
	var next uint64
	wait(t, 30*time.Second, "the next leader's command to start", func() bool {
		for tok, r := range Read(t, file) {
			if tok > old && r.Beats {
				next = tok
				return true
			}
		}
		return false
	})
	// Nothing the old command started may run once the next one has
	// begun: by /proc, not by the heartbeats of what is left.
	if left := Survivors(t, "F="+file, "BATON_TOKEN="+strconv.FormatUint(old, 10)); len(left) > 0 {
		t.Errorf("processes of the old term (token %d) alive after the next leader's command started: %s", old, left)
	}
	// The old command's heartbeats after the new start, if any, are
	// written once its process is gone.
	if pid := recs[old].PID; pid > 0 {
		wait(t, 20*time.Second, "end of the old command", func() bool { return !Alive(pid) })
	}
	return ReportHandover(t, file, old, next, cut)
}

// Alive reports whether process pid exists and is not a zombie.
func Alive(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || !strings.HasPrefix(s[i+1:], " Z")
}

// Survivors lists the live processes (zombies aside) whose environment
// holds every one of entries (NAME=VALUE), each as "PID (COMM)": the
// processes of a run, however they left its process group or session.
func Survivors(t testing.TB, entries ...string) []string {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("survivors: %v", err)
	}
	var left []string
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !Alive(pid) {
			continue
		}
		env := map[string]bool{}
		for _, e := range strings.Split(string(raw), "\x00") {
			env[e] = true
		}
		all := true
		for _, e := range entries {
			all = all && env[e]
		}
		if all {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			left = append(left, fmt.Sprintf("%d (%s)", pid, strings.TrimSpace(string(comm))))
		}
	}
	return left
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func wait(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no %s within %v", what, d)
		}
	}
}

// node is one Elector + Host with the command job.
type node struct {
	name    string
	c       Candidate
	elector *election.Elector
	cancel  context.CancelFunc
	done    chan error
}

func startNode(t *testing.T, c Candidate, name, file, pids, script string) *node {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	if os.Getenv("BATON_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", name)
	}
	e, err := election.New(election.Config{Backend: c.Backend, Identity: election.Identity{ID: name}, Logger: log, RetryPeriod: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cmd := &execjob.Command{Job: "trap", Script: script, Instance: name, Logger: log,
		Env: append(os.Environ(), "F="+file, "P="+pids)} // KillGrace: the default, 5 s
	host, err := schedulerhost.New(schedulerhost.Config{Instance: name, Logger: log,
		ShutdownTimeout: time.Second, KillGrace: time.Second,
		Jobs: []schedulerhost.Job{{Name: "trap", Schedule: "@every 1s", Run: cmd.Run}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{name: name, c: c, elector: e, cancel: cancel, done: make(chan error, 1)}
	go func() { n.done <- e.Run(ctx, host.Lead) }()
	t.Cleanup(n.stop)
	return n
}

func (n *node) stop() {
	if n.c.Heal != nil {
		n.c.Heal()
	}
	n.cancel()
	select {
	case <-n.done:
	case <-time.After(30 * time.Second):
		panic(n.name + ": Run did not return within 30s of cancel")
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
