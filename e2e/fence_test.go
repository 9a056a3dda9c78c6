package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/fence"
	"github.com/batonhq/baton/internal/dbtest"
)

// TestFence: on etcd and PostgreSQL (BATON_E2E_BACKENDS), two real `demo
// node` processes run the command job "fenced" (e2e/internal/fencewriter),
// which writes its term's token to a PostgreSQL table in a transaction
// guarded by package fence's SQL guard. The leader's write is held in
// flight (the job has announced "about to write" and waits) and the
// leader is SIGSTOPped, job and node, until another node has taken the
// lease with a greater token and its own run has written. Then the old
// run resumes and its write reaches the table late.
//
//   - guarded: the guard refuses the late write; the table's writes log
//     holds no write of the old token and the state row holds the new
//     term's token.
//   - unguarded (the same job with -guard=false): the late write lands
//     over the new term's, as the writes log shows: what the guard
//     prevents.
//
// Everything is driven by observed events: the job's "about" line with
// the leader's token, the new leader's term in its node log, the job's
// "wrote" and "refused" lines. Both verdicts are read from the table.
func TestFence(t *testing.T) {
	skipUnlessLong(t, "starts servers and node processes")
	eachBackend(t, "etcd,postgres", func(t *testing.T, name string) {
		for _, guarded := range []bool{true, false} {
			label := map[bool]string{true: "guarded", false: "unguarded"}[guarded]
			t.Run(label, func(t *testing.T) { runFence(t, name, guarded, sqlRig(t)) })
		}
	})
}

var fenceWriter struct {
	once sync.Once
	path string
	err  error
}

// fenceWriterBin builds e2e/internal/fencewriter once.
func fenceWriterBin(t *testing.T) string {
	t.Helper()
	fenceWriter.once.Do(func() {
		gobin := os.Getenv("GO")
		if gobin == "" {
			gobin = "go"
		}
		fenceWriter.path = filepath.Join(filepath.Dir(demoBin), "fencewriter")
		out, err := exec.Command(gobin, "build", "-o", fenceWriter.path, "github.com/batonhq/baton/e2e/internal/fencewriter").CombinedOutput()
		if err != nil {
			fenceWriter.err = fmt.Errorf("go build fencewriter: %v\n%s", err, out)
		}
	})
	if fenceWriter.err != nil {
		t.Fatal(fenceWriter.err)
	}
	return fenceWriter.path
}

// fenceTables creates the job's tables on the PostgreSQL test server and
// drops them when t ends.
func fenceTables(t *testing.T, srv *dbtest.Server, table string) {
	t.Helper()
	ctx := context.Background()
	mig, err := (&fence.SQL{Dialect: fence.Postgres, Table: table + "_fence", Election: "e2e"}).MigrationSQL()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE ` + table + ` (id int PRIMARY KEY, token bigint NOT NULL, instance text NOT NULL)`,
		`CREATE TABLE ` + table + `_writes (seq bigserial PRIMARY KEY, token bigint NOT NULL, instance text NOT NULL)`,
		mig,
	} {
		if _, err := srv.Admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		for _, s := range []string{"", "_writes", "_fence"} {
			_, _ = srv.Admin.ExecContext(context.Background(), `DROP TABLE IF EXISTS `+table+s)
		}
	})
}

// fenceEvent is a line of the job's events file.
type fenceEvent struct {
	kind   string // about, wrote, refused
	token  uint64
	pid    int
	detail string // about: the instance; refused: the guard's error
}

func readFenceEvents(t *testing.T, path string) []fenceEvent {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []fenceEvent
	for line := range strings.Lines(string(b)) {
		text, done := strings.CutSuffix(line, "\n")
		if !done {
			break // a line being written
		}
		fs := strings.SplitN(text, " ", 4)
		if len(fs) < 3 {
			t.Errorf("%s: %q: want KIND TOKEN PID", path, text)
			continue
		}
		tok, err1 := strconv.ParseUint(fs[1], 10, 64)
		pid, err2 := strconv.Atoi(fs[2])
		if err1 != nil || err2 != nil {
			t.Errorf("%s: %q: want KIND TOKEN PID", path, text)
			continue
		}
		ev := fenceEvent{kind: fs[0], token: tok, pid: pid}
		if len(fs) == 4 {
			ev.detail = fs[3]
		}
		out = append(out, ev)
	}
	return out
}

// waitFenceEvent waits up to d for the first event of kind (any kind
// when "") that match accepts.
func waitFenceEvent(t *testing.T, path, kind string, d time.Duration, match func(fenceEvent) bool) (fenceEvent, bool) {
	var found fenceEvent
	ok := waitFor(d, func() bool {
		for _, ev := range readFenceEvents(t, path) {
			if (kind == "" || ev.kind == kind) && match(ev) {
				found = ev
				return true
			}
		}
		return false
	})
	return found, ok
}

// fenceWrite is one write the resource holds: the token and the instance
// that wrote it.
type fenceWrite struct {
	token    uint64
	instance string
}

// fenceRig is what runFence drives: the job that writes, and the
// resource it writes to.
type fenceRig struct {
	label string // the job's kind, in the artifacts directory's name
	// setup prepares the nodes (sc.dir and sc.be are set) and returns the
	// jobs file; the job appends its lines to events.
	setup func(t *testing.T, sc *scenario, events string, guarded bool) string
	// read returns the resource's writes, oldest first, and its current
	// value.
	read func(t *testing.T) (log []fenceWrite, state fenceWrite)
}

// sqlRig is the command job e2e/internal/fencewriter writing to a
// PostgreSQL table of its own.
func sqlRig(t *testing.T) fenceRig {
	srv := dbtest.OpenT(t, dbtest.Postgres)
	table := dbtest.NewName("fence_e2e_")
	fenceTables(t, srv, table)
	bin := fenceWriterBin(t)
	return fenceRig{
		label: "sql",
		setup: func(t *testing.T, sc *scenario, events string, guarded bool) string {
			return electionHead(sc.be) + fmt.Sprintf("  - name: fenced\n    schedule: \"*/2 * * * * *\"\n    command: |\n      exec '%s' -dsn '%s' -table %s -events '%s' -hold '%s' -guard=%t\n",
				bin, srv.DSN, table, events, sc.dir, guarded)
		},
		read: func(t *testing.T) ([]fenceWrite, fenceWrite) { return readFenceTable(t, srv, table) },
	}
}

// runFence runs the scenario once on the backend name, with the guard or
// without it.
func runFence(t *testing.T, name string, guarded bool, rig fenceRig) {
	label := map[bool]string{true: "fence-", false: "nofence-"}[guarded] + rig.label
	sc := &scenario{}
	var events string
	l := startCluster(t, name, sc, clusterOpts{label: label, nodes: 2, jobs: func(be *backend, sc *scenario) string {
		events = filepath.Join(sc.dir, "fence-events.log")
		return rig.setup(t, sc, events, guarded)
	}})
	release := func(tok uint64) {
		if err := os.WriteFile(filepath.Join(sc.dir, fmt.Sprintf("go.%d", tok)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tm, ok := l.openTerm()
	if !ok {
		t.Fatalf("%s: leader %s has no open term", name, l.id)
	}
	t1 := tm.Token

	// 1. The leader's run has announced its write: freeze job and node.
	old, ok := waitFenceEvent(t, events, "about", time.Minute, func(ev fenceEvent) bool { return ev.token == t1 })
	if !ok {
		t.Fatalf("%s: no run of token %d announced its write within 1 min", name, t1)
	}
	var resumed bool
	t.Cleanup(func() { // the held job after a t.Fatal: it is not the node's any more
		if !resumed {
			_ = syscall.Kill(old.pid, syscall.SIGCONT)
			_ = syscall.Kill(old.pid, syscall.SIGKILL)
		}
	})
	l.mu.Lock()
	l.frozen = true
	l.mu.Unlock()
	_ = syscall.Kill(old.pid, syscall.SIGSTOP)
	_ = l.signal(syscall.SIGSTOP)
	sc.note(fStopLeader, l.id, "node pid %d and its writer's pid %d (token %d: the job, or the app behind a sidecar), its write in flight", l.pid(), old.pid, t1)

	// 2. A new leader, with a greater token, runs the job and writes.
	l2 := sc.waitNewLeader(l)
	if l2 == nil {
		t.Fatalf("%s: no new leader while %s was stopped", name, l.id)
	}
	tm2, _ := l2.openTerm()
	t2 := tm2.Token
	if t2 <= t1 {
		t.Fatalf("%s: new leader %s has token %d, not above the old term's %d", name, l2.id, t2, t1)
	}
	sc.note("info-new-leader", l2.id, "token %d", t2)
	if _, ok := waitFenceEvent(t, events, "about", time.Minute, func(ev fenceEvent) bool { return ev.token == t2 }); !ok {
		t.Fatalf("%s: no run of token %d announced its write within 1 min", name, t2)
	}
	release(t2)
	if _, ok := waitFenceEvent(t, events, "wrote", time.Minute, func(ev fenceEvent) bool { return ev.token == t2 }); !ok {
		t.Fatalf("%s: the run of token %d did not write within 1 min (events in %s)", name, t2, events)
	}
	sc.note("info-new-write", l2.id, "token %d written", t2)

	// 3. The old run resumes first (its node still stopped, so nothing
	// cancels it): its write reaches the table late. Then its node.
	release(t1)
	resumed = true
	_ = syscall.Kill(old.pid, syscall.SIGCONT)
	outcome, ok := waitFenceEvent(t, events, "", time.Minute, func(ev fenceEvent) bool {
		return ev.pid == old.pid && (ev.kind == "wrote" || ev.kind == "refused")
	})
	_ = l.signal(syscall.SIGCONT)
	l.mu.Lock()
	l.frozen = false
	l.mu.Unlock()
	if !ok {
		t.Fatalf("%s: the resumed run (pid %d, token %d) neither wrote nor was refused within 1 min", name, old.pid, t1)
	}
	sc.note("info-late-write", l.id, "token %d: %s %s", t1, outcome.kind, outcome.detail)
	log, state := rig.read(t)
	checkFence(t, sc, log, state, guarded, t1, t2)
	sc.stopAll()
}

// readFenceTable reads the job's table: its writes log, in commit order,
// and the state row.
func readFenceTable(t *testing.T, srv *dbtest.Server, table string) ([]fenceWrite, fenceWrite) {
	t.Helper()
	ctx := context.Background()
	rows, err := srv.Admin.QueryContext(ctx, `SELECT token, instance FROM `+table+`_writes ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var log []fenceWrite
	for rows.Next() {
		var w fenceWrite
		if err := rows.Scan(&w.token, &w.instance); err != nil {
			t.Fatal(err)
		}
		log = append(log, w)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var state fenceWrite
	if err := srv.Admin.QueryRowContext(ctx, `SELECT token, instance FROM `+table+` WHERE id = 1`).Scan(&state.token, &state.instance); err != nil {
		t.Fatalf("%s: state row: %v", table, err)
	}
	return log, state
}

// checkFence gives the verdict from the resource's own contents: its
// writes, oldest first, and its current value. Guarded: no write of the
// old token t1 at all, and the value is the new term's. Unguarded: a
// write of t1 after one of t2, the stale write landing.
func checkFence(t *testing.T, sc *scenario, log []fenceWrite, state fenceWrite, guarded bool, t1, t2 uint64) {
	t.Helper()
	var oldWrites, oldAfterNew int
	var sawNew bool
	var shown []string
	for _, w := range log {
		shown = append(shown, fmt.Sprintf("%d/%s", w.token, w.instance))
		switch w.token {
		case t2:
			sawNew = true
		case t1:
			oldWrites++
			if sawNew {
				oldAfterNew++
			}
		}
	}
	sc.note("info-resource", sc.be.name, "writes (token/instance) %v; value token %d by %s", shown, state.token, state.instance)
	if !sawNew {
		t.Errorf("%s: the resource has no write of the new token %d: %v", sc.be.name, t2, shown)
	}
	if guarded {
		if oldWrites > 0 {
			t.Errorf("%s: guarded: %d write(s) of the old token %d reached the resource (%d after token %d's): %v",
				sc.be.name, oldWrites, t1, oldAfterNew, t2, shown)
		}
		if state.token < t2 {
			t.Errorf("%s: guarded: the resource holds token %d (by %s), older than the new term's %d", sc.be.name, state.token, state.instance, t2)
		}
		return
	}
	if oldAfterNew == 0 {
		t.Errorf("%s: unguarded: no write of the old token %d after the new token %d's: %v (the scenario did not deliver the late write)",
			sc.be.name, t1, t2, shown)
	}
}
