package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// requestState is a node's answer to GET /runs/ID, in part.
type requestState struct {
	State, Result, Error, Instance string
	Token                          uint64
}

// requestWait asks the nodes, once the faults are over, what became of
// each run-now request the operator made.
//
// The leader keeps the newest kept done requests of the job and forgets
// the older ones: a request that no node knows (404) and that may have
// been forgotten (forgettable) was done and forgotten. Its runs are still
// counted from the run log.
type requestWait struct {
	reqs     []runNow
	kept     int
	runsPath string // the jobs' run log
	deadline time.Time
	// ask returns one live node's answer for request id: the node, and
	// the code, body and error of its answer; "" when no node is live.
	ask func(id string) (node string, code int, body string, err error)

	runs map[string][]time.Time // the run log as last read
}

// await asks for reqs[i] until it is done, or until a 404 while the
// request may have been forgotten, or until the deadline. It returns the
// last state read, whether the request was forgotten, and the last
// answer (for a request found not done).
func (w *requestWait) await(i int) (requestState, bool, string) {
	var st requestState
	var forgotten bool
	last, tries := "", 0
	id := w.reqs[i].id
	waitFor(time.Until(w.deadline), func() bool {
		tries++
		p, code, body, err := w.ask(id)
		if p == "" {
			last = fmt.Sprintf("no live node (%d tries)", tries)
			return false
		}
		last = fmt.Sprintf("%s answered %d %v %.120s (%d tries)", p, code, err, body, tries)
		if err == nil && code == http.StatusNotFound && w.forgettable(i) {
			forgotten = true
			return true
		}
		return err == nil && code == http.StatusOK && json.Unmarshal([]byte(body), &st) == nil && st.State == "done"
	})
	return st, forgotten, last
}

// forgettable reports whether the leader may have forgotten reqs[i],
// judged on the run log as it is now: the newer request that made the
// leader forget it may have run during the wait. It reads the log again
// only when the last reading does not show the request forgettable.
func (w *requestWait) forgettable(i int) bool {
	if w.runs != nil && forgettable(w.reqs, i, w.runs, w.kept) {
		return true
	}
	w.runs = manualRuns(w.runsPath)
	return forgettable(w.reqs, i, w.runs, w.kept)
}

// manualRuns reads the start lines of "manual" in the run log: for each
// request id (their last field), the times its runs began (their fifth
// field, in nanoseconds), in the log's order.
func manualRuns(path string) map[string][]time.Time {
	out := map[string][]time.Time{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 7 && f[0] == "S" && f[1] == "manual" {
			ns, _ := strconv.ParseInt(f[5], 10, 64)
			out[f[6]] = append(out[f[6]], time.Unix(0, ns))
		}
	}
	return out
}

// forgettable reports whether the leader may have forgotten reqs[i], done:
// kept other requests are newer than it, by the operator's list (accepted
// after it, as the operator heard) or by the job's own records (run after
// it), the two counted together.
func forgettable(reqs []runNow, i int, runs map[string][]time.Time, kept int) bool {
	if kept <= 0 {
		return false
	}
	newer := runAfter(runs, reqs[i].id)
	for _, r := range reqs[i+1:] {
		newer[r.id] = true
	}
	return len(newer) >= kept
}

// runAfter returns the request ids other than id whose runs, in the job's
// own records, all began after the last run of id began. The leader
// forgets a done request once RunNowKeptPerJob newer ones are done, and
// these are newer by the job's own account, also those whose acceptance
// the operator never heard of (its answer lost to a fault).
func runAfter(runs map[string][]time.Time, id string) map[string]bool {
	out := map[string]bool{}
	mine := runs[id]
	if len(mine) == 0 {
		return out
	}
	last := mine[len(mine)-1]
	for other, ts := range runs {
		if other != id && ts[0].After(last) {
			out[other] = true
		}
	}
	return out
}

// The leader forgets a done run-now request once kept newer ones are
// done. The operator may not have heard of every one it made: a fault
// can lose the answer to a request that the leader accepted. Here the
// operator heard of 45 requests after r0, and the job's records show 50
// run after it: r0 may be forgotten. Judged by the operator's list alone
// (before this rule), a 404 for r0 was a problem ("still \"\" 20 s after
// the faults ended").
func TestForgettable_CountsRequestsWhoseAnswerWasLost(t *testing.T) {
	const kept = 50
	t0 := time.Date(2026, 11, 28, 7, 0, 0, 0, time.UTC)
	reqs, runs := requestsWithLostAnswers(t0, func(int) bool { return true })
	if i := len(reqs) - kept; i > 0 {
		t.Fatalf("the operator heard of %d requests: r0 is old by its list alone", len(reqs))
	}
	if !forgettable(reqs, 0, runs, kept) {
		t.Errorf("r0, with 50 requests run after it: not forgettable, want forgettable")
	}
	if forgettable(reqs, 1, runs, kept) {
		t.Errorf("r1, with 49 run after it and 44 heard of: forgettable, want not")
	}

	// A request run again after the others (twice) is not old by its
	// first run.
	runs["r0"] = append(runs["r0"], t0.Add(300*time.Second))
	if forgettable(reqs, 0, runs, kept) {
		t.Errorf("r0 run again after all the others: forgettable, want not")
	}
	// With no run of it in the records, only the operator's list counts.
	delete(runs, "r0")
	if forgettable(reqs, 0, runs, kept) {
		t.Errorf("r0 with no run: forgettable, want not")
	}
}

// A request is forgotten once the 50th newer one is done, and that one
// may run during the wait itself: in a 60-minute kube soak, request 503
// had 49 requests run after it when the wait began, the 50th (555)
// began 0.2 s later, and 503 was forgotten. Judged on the run log read
// before the wait, its 404 was a problem ("still \"\" 20 s after the
// faults ended"); judged on the log as it is at the 404, it is done and
// forgotten. A request with 49 newer runs still is not.
func TestRequestWait_RunLogReadAtEachAnswer(t *testing.T) {
	const kept = 50
	t0 := time.Date(2026, 11, 29, 16, 15, 43, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "runs.log")
	logRun := func(id string, at time.Time) {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fmt.Fprintf(f, "S manual %s 7 node-1 %d %s\n", at.Truncate(time.Second).Format(time.RFC3339), at.UnixNano(), id)
	}
	reqs, runs := requestsWithLostAnswers(t0, func(i int) bool { return i < 50 })
	for i := range 50 { // in the order they ran
		id := fmt.Sprintf("r%d", i)
		logRun(id, runs[id][0])
	}
	answers := 0
	w := requestWait{reqs: reqs, kept: kept, runsPath: path, deadline: time.Now().Add(2 * time.Second),
		ask: func(id string) (string, int, string, error) {
			answers++
			if answers == 3 { // r50 runs during the wait
				logRun("r50", t0.Add(250*time.Second))
			}
			return "node-1", http.StatusNotFound, `{"error":"request ` + id + `: none"}`, nil
		}}
	if _, forgotten, last := w.await(0); !forgotten {
		t.Errorf("r0, with the 50th newer run begun during the wait: not forgotten (last answer: %s), want forgotten", last)
	}
	if _, forgotten, _ := w.await(1); forgotten {
		t.Errorf("r1, with 49 newer runs: forgotten, want a problem")
	}
}

// A request done without a run (its term killed between the take and
// the start) counts among the leader's newer done requests, and is known
// to the operator only if it heard the answer. In a 60-minute kube soak
// request 465 ran once, 49 requests ran after it and one more, 473, was
// done without a run: the leader forgot 465, and neither the operator's
// list (answers lost) nor the runs alone showed 50 newer. Together they
// do: a request is newer if it was heard accepted after r or run after r.
func TestForgettable_CountsHeardAndRunTogether(t *testing.T) {
	const kept = 50
	t0 := time.Date(2026, 11, 29, 18, 7, 29, 0, time.UTC)
	// r7: done without a run.
	reqs, runs := requestsWithLostAnswers(t0, func(i int) bool { return i != 7 })
	if !forgettable(reqs, 0, runs, kept) {
		t.Errorf("r0, with 45 heard after it and 49 run after it, 50 in all: not forgettable, want forgettable")
	}
	// Had the answer to r7 been lost too, nothing shows 50 newer.
	var heard []runNow
	for _, r := range reqs {
		if r.id != "r7" {
			heard = append(heard, r)
		}
	}
	if forgettable(heard, 0, runs, kept) {
		t.Errorf("r0, with 49 newer by any record: forgettable, want not")
	}
}

// requestsWithLostAnswers makes 51 run-now requests, r0 to r50, 5 s
// apart from t0. The operator heard the answer to every one but each
// tenth (r9, r19, ...): 46 in its list, r0 first. Those for which ran
// says so have one run each, at their own time.
func requestsWithLostAnswers(t0 time.Time, ran func(i int) bool) ([]runNow, map[string][]time.Time) {
	runs := map[string][]time.Time{}
	var reqs []runNow
	for i := range 51 {
		id := fmt.Sprintf("r%d", i)
		if ran(i) {
			runs[id] = []time.Time{t0.Add(time.Duration(i) * 5 * time.Second)}
		}
		if i%10 != 9 {
			reqs = append(reqs, runNow{id: id})
		}
	}
	return reqs, runs
}
