package backendtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/schedulerhost"
)

// testCrashManyJobs is the crash failover with n jobs due at each instant,
// so that claims, finishes and the catch-up read go in batches across a
// real loss: no tick of any job starts twice, and each job gets exactly
// one catch-up run in each of b's terms (MisfireRunOnce; b has one term
// but on a machine so loaded that it lost its lease).
func testCrashManyJobs(t *testing.T, h FailoverHarness, n int) {
	newC := h.NewElection(t, h.Timing)
	var rec runRecord
	ttl := h.Timing.TTL
	jobs := func(name string) []schedulerhost.Job {
		js := make([]schedulerhost.Job, n)
		for i := range js {
			js[i] = schedulerhost.Job{Name: fmt.Sprintf("job-%04d", i), Schedule: "@every 1s", Misfire: schedulerhost.MisfireRunOnce,
				MisfireGrace: time.Minute, Run: rec.job(name)}
		}
		return js
	}
	a := startHostNode(t, newC(t, "a"), "a", jobs("a")...)
	waitLeader(t, 10*ttl, a)
	b := startHostNode(t, newC(t, "b"), "b", jobs("b")...)
	// a runs every job at least once before the cut: on a loaded machine,
	// with the race detector, its first instants can take seconds.
	ranByA := func() bool {
		seen := map[string]bool{}
		for _, r := range rec.snapshot() {
			if r.by == "a" {
				seen[r.job] = true
			}
		}
		return len(seen) == n
	}
	for deadline := time.Now().Add(60 * time.Second); !ranByA() && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // and one instant more
	if a.c.Cut == nil {
		t.Skip("harness cannot cut a candidate off")
	}
	a.c.Cut()
	waitLeader(t, 3*ttl+10*time.Second, b)
	// b runs the catch-up runs, then regular ticks: wait until every job
	// has had both (on a loaded machine, with the race detector, 1,000
	// runs a second can fall seconds behind; that is not what is tested
	// here), then 2 s more for anything that would start twice.
	settled := func() bool {
		catchUp, regular := map[string]bool{}, map[string]bool{}
		for _, r := range rec.snapshot() {
			if r.by == "b" {
				if r.catchUp {
					catchUp[r.job] = true
				} else {
					regular[r.job] = true
				}
			}
		}
		return len(catchUp) == n && len(regular) == n
	}
	for deadline := time.Now().Add(60 * time.Second); !settled() && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)

	type key struct {
		job  string
		tick int64
	}
	seen := map[key]recordedRun{}
	// A loaded machine can end b's term and give b another: each of its
	// terms runs one catch-up per job, so they are counted per term.
	type termKey struct {
		job   string
		token uint64
	}
	catchUps, termCatchUps := map[string]int{}, map[termKey]int{}
	byA, byB := map[string]int{}, map[string]int{}
	for _, r := range rec.snapshot() {
		tk := r.job
		k := key{tk, r.tick.UnixNano()}
		if prev, dup := seen[k]; dup {
			t.Errorf("job %s: tick %v started twice: by %s (token %d) and %s (token %d)", tk, r.tick, prev.by, prev.token, r.by, r.token)
		}
		seen[k] = r
		switch {
		case r.by == "b" && r.catchUp:
			catchUps[tk]++
			if termCatchUps[termKey{tk, r.token}]++; termCatchUps[termKey{tk, r.token}] == 2 {
				t.Errorf("job %s: two catch-up runs in b's term with token %d", tk, r.token)
			}
		case r.by == "b":
			byB[tk]++
		default:
			byA[tk]++
		}
	}
	bad := 0
	for i := range n {
		job := fmt.Sprintf("job-%04d", i)
		if catchUps[job] == 0 || byA[job] == 0 || byB[job] == 0 {
			if bad++; bad <= 5 {
				t.Errorf("job %s: %d catch-up runs (want one per term of b), %d runs by a, %d regular runs by b (want some of each)", job, catchUps[job], byA[job], byB[job])
			}
		}
	}
	if bad > 5 {
		t.Errorf("... and %d more jobs like these", bad-5)
	}
	t.Logf("%d jobs: %d runs recorded, %d jobs with one catch-up run each", n, len(seen), len(catchUps))
}
