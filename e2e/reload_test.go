package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/e2e/internal/history"
	"github.com/batonhq/baton/internal/envtest"
)

// TestReload: on every backend of BATON_E2E_BACKENDS, real `demo node`
// processes; while one leads, its jobs file is rewritten and reloaded,
// once with SIGHUP (job a removed, b added), once with a bad file (POST
// /reload: 400 naming the line, the old set goes on), once with POST
// /reload (b removed, c added). The removed jobs stop, the added ones
// run, and the leader's term (token) is the same throughout: no node
// logs a new term, and the job kept throughout loses no tick.
func TestReload(t *testing.T) {
	skipUnlessLong(t, "starts servers and node processes")
	eachBackend(t, "etcd,postgres,mysql,consul,redis", runReload)
}

// reloadJobs is a jobs file whose jobs (each every second) append their
// start and end lines to runs, as jobsFile's do; bad puts first a job
// whose schedule is invalid.
func reloadJobs(be *backend, runs string, bad bool, jobs ...string) string {
	rec := func(kind string) string { return runLine(kind, runs, "$BATON_CATCH_UP") }
	var b strings.Builder
	b.WriteString(electionHead(be))
	if bad {
		b.WriteString("  - name: broken\n    schedule: \"61 * * * * *\"\n    builtin: log\n")
	}
	for _, j := range jobs {
		fmt.Fprintf(&b, "  - name: %s\n    schedule: \"* * * * * *\"\n    command: |\n      %s\n      %s\n    misfire: run-once\n    misfire_grace: %v\n",
			j, rec("S"), rec("E"), be.grace)
	}
	return b.String()
}

func runReload(t *testing.T, name string) {
	sc := &scenario{}
	l := startCluster(t, name, sc, clusterOpts{label: "reload", nodes: 2, token: "e2e-reload",
		jobs: func(be *backend, sc *scenario) string { return reloadJobs(be, sc.runsPath, false, "keep", "a") }})
	be := sc.be
	write := func(bad bool, jobs ...string) {
		t.Helper()
		// Written aside and renamed, as an editor or a config manager
		// would: a node never reads half a file.
		tmp := sc.jobsPath + ".tmp"
		if err := os.WriteFile(tmp, []byte(reloadJobs(be, sc.runsPath, bad, jobs...)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, sc.jobsPath); err != nil {
			t.Fatal(err)
		}
	}
	_, tm := sc.leader()
	token := tm.Token
	from := time.Now()
	time.Sleep(2 * time.Second)

	// 1. SIGHUP: a removed, b added.
	write(false, "keep", "b")
	if err := l.signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	sc.note("info-reload", l.id, "SIGHUP: a removed, b added")
	r1 := waitReloaded(t, l, 1)
	time.Sleep(4 * time.Second)

	// 2. A bad file: refused, the old set goes on.
	write(true, "keep", "c")
	code, body := reloadPost(t, l)
	line := 9 // broken's schedule
	if be.poll > 0 {
		line = 10
	}
	if want := fmt.Sprintf("%s:%d: jobs[0].schedule: \"61 * * * * *\"", sc.jobsPath, line); code != http.StatusBadRequest || !strings.Contains(body, want) {
		t.Errorf("POST /reload of a bad file: %d %q, want 400 with %q", code, body, want)
	}
	bad := time.Now()
	time.Sleep(3 * time.Second)

	// 3. POST /reload: b removed, c added.
	write(false, "keep", "c")
	code, body = reloadPost(t, l)
	var sum struct {
		Added, Removed, Changed, Unchanged []string
		Token                              uint64
	}
	if err := json.Unmarshal([]byte(body), &sum); err != nil || code != http.StatusOK {
		t.Fatalf("POST /reload: %d %v %s", code, err, body)
	}
	if !slices.Equal(sum.Added, []string{"c"}) || !slices.Equal(sum.Removed, []string{"b"}) || len(sum.Changed) != 0 ||
		!slices.Equal(sum.Unchanged, []string{"keep"}) || sum.Token != token {
		t.Errorf("POST /reload: %s; want c added, b removed, keep unchanged, token %d", body, token)
	}
	sc.note("info-reload", l.id, "POST /reload: b removed, c added")
	r3 := waitReloaded(t, l, 2)
	time.Sleep(4 * time.Second)
	to := time.Now().Add(-1500 * time.Millisecond)

	if _, tm := sc.leader(); tm.Token != token || tm.Instance != l.id {
		t.Errorf("leader after the reloads: %s token %d, want %s token %d (the same term)", tm.Instance, tm.Token, l.id, token)
	}
	sc.stopAll()

	starts := readStarts(t, sc.runsPath)
	byJob := map[string][]history.Start{}
	for _, s := range starts {
		byJob[s.Job] = append(byJob[s.Job], s)
		if s.Token != token || s.Instance != l.id {
			t.Errorf("runs.log:%d: %s ran %s with token %d, want only %s's term %d", s.Line, s.Instance, s.Job, s.Token, l.id, token)
		}
	}
	// A removed job has no tick after its reload; an added one has none
	// before it (its first tick is its schedule's first after the reload,
	// which a reload logged just after a second boundary may precede).
	for _, c := range []struct {
		job              string
		added, removed   time.Time
		minRuns, maxRuns int
	}{
		{"a", time.Time{}, r1, 3, 1000},
		{"b", r1, r3, 6, 1000},
		{"c", r3, time.Time{}, 2, 1000},
	} {
		ss := byJob[c.job]
		if len(ss) < c.minRuns {
			t.Errorf("job %s ran %d times, want at least %d", c.job, len(ss), c.minRuns)
		}
		for _, s := range ss {
			if !c.removed.IsZero() && s.Tick.After(c.removed) {
				t.Errorf("runs.log:%d: %s tick %s after its removal at %s", s.Line, c.job, s.Tick.Format(time.RFC3339), c.removed.Format(time.RFC3339Nano))
			}
			if !c.added.IsZero() && !s.Tick.After(c.added.Add(-time.Second)) || s.CatchUp {
				t.Errorf("runs.log:%d: %s tick %s (catch-up %v) before its addition at %s", s.Line, c.job, s.Tick.Format(time.RFC3339), s.CatchUp, c.added.Format(time.RFC3339Nano))
			}
		}
	}
	// b went on through the refused reload.
	if !slices.ContainsFunc(byJob["b"], func(s history.Start) bool { return s.At.After(bad.Add(time.Second)) && s.At.Before(r3) }) {
		t.Errorf("b did not run after the refused reload at %s", bad.Format(time.RFC3339Nano))
	}
	// Every node logged one term in all, the leader's; keep lost no tick.
	var terms []history.Term
	for _, p := range sc.procs {
		p.poll()
		terms = append(terms, p.terms()...)
	}
	if len(terms) != 1 || terms[0].Token != token {
		t.Errorf("terms: %+v, want one, token %d", terms, token)
	}
	// The node's word for a tick of keep it did not start (a run still
	// going when the next tick came, on a loaded machine) goes to the
	// checker with the job's own start and end lines, which must back it.
	var misfires []history.Misfire
	for _, p := range sc.procs {
		p.mu.Lock()
		misfires = append(misfires, p.misfires...)
		p.mu.Unlock()
	}
	ends, records := keepLines(t, sc.runsPath)
	r := history.Check(history.Input{Starts: byJob["keep"], Ends: ends, Records: records, Terms: terms, Misfires: misfires,
		Jobs: map[string]history.Policy{"keep": {Every: time.Second, Misfire: "run-once", Grace: be.grace}},
		From: from, To: to, HandoverBound: be.handoverBound, Slack: slack})
	for _, v := range r.Violations {
		t.Errorf("keep: %s", v)
	}
	// Printed, not logged: make test runs the suite without -v, and CI's
	// output should carry the figures.
	fmt.Printf("e2e reload %s: token %d throughout (%d term(s) logged); runs: keep %d, a %d (removed by SIGHUP), b %d (added, then removed by POST /reload), c %d; bad file refused with 400; keep: duplicates %d, overlaps %d, missed %d\n",
		name, token, len(terms), len(byJob["keep"]), len(byJob["a"]), len(byJob["b"]), len(byJob["c"]), r.Duplicates, r.Overlaps, r.LostTicks)
}

// keepLines reads the end lines and the records of job keep from the run
// log at path.
func keepLines(t *testing.T, path string) ([]history.End, []history.Record) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ends, err := history.ParseEnds(f)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Seek(0, 0)
	records, err := history.ParseRecords(f)
	if err != nil {
		t.Fatal(err)
	}
	ends = slices.DeleteFunc(ends, func(e history.End) bool { return e.Job != "keep" })
	records = slices.DeleteFunc(records, func(r history.Record) bool { return r.Job != "keep" })
	return ends, records
}

// waitReloaded waits for p's n-th "jobs reloaded" record and returns its
// time.
func waitReloaded(t *testing.T, p *proc, n int) time.Time {
	t.Helper()
	var at time.Time
	ok := waitFor(15*time.Second, func() bool {
		p.poll()
		p.mu.Lock()
		defer p.mu.Unlock()
		seen := 0
		for _, ev := range p.events {
			if ev.Msg == "jobs reloaded" {
				if seen++; seen == n {
					at = ev.Time
					return true
				}
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("%s logged no reload #%d within 15 s (log %s)", p.id, n, p.logPath)
	}
	return at
}

// reloadPost sends POST /reload to p with the admin token.
func reloadPost(t *testing.T, p *proc) (int, string) {
	t.Helper()
	var url string
	p.mu.Lock()
	for _, ev := range p.events {
		if ev.Msg == "node started" {
			url = ev.HTTP
		}
	}
	p.mu.Unlock()
	return envtest.Post(t, url+"/reload", "Bearer e2e-reload")
}

func readStarts(t *testing.T, path string) []history.Start {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	starts, err := history.ParseRunLog(f)
	if err != nil {
		t.Fatal(err)
	}
	return starts
}
