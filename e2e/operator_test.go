package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton/e2e/internal/history"
)

// operatorToken is the admin token of the fault suite's nodes.
const operatorToken = "e2e-control"

// operator is an operator driving the nodes' HTTP API during the faults:
// it pauses the job "paused" through a node picked at random (frozen or
// cut off ones too: the answer may then be lost), runs "manual" now with
// a request id of its own, and resumes "paused", again and again. Each
// pause answered 200 goes to the checker (history.Pause: no run of the
// job may start after it until the resume is sent); each run-now
// answered 202 or 200 must run at most once and, once the faults are
// over, be done.
type operator struct {
	sc    *scenario
	rng   *rand.Rand
	quit  chan struct{}
	once  sync.Once // closes quit
	done  chan struct{}
	label string

	mu       sync.Mutex
	asked    int // pauses sent
	failed   int // pauses not answered 200
	requests []runNow
	// keptPerJob is how many done requests of a job the leader keeps
	// (the 202's id_kept_per_job); it forgets older ones.
	keptPerJob int
}

// runNow is a run-now request the operator sent and a node accepted.
type runNow struct {
	id  string
	via string
	at  time.Time // answer received
}

// startOperator starts the operator of sc; stop ends it.
func (sc *scenario) startOperator() *operator {
	h := fnv.New64a()
	h.Write([]byte("operator " + sc.be.name))
	op := &operator{sc: sc, rng: rand.New(rand.NewPCG(sc.seed, h.Sum64()+uint64(sc.lane))), quit: make(chan struct{}),
		done: make(chan struct{}), label: strings.ReplaceAll(sc.label(), " ", "-")}
	go op.loop()
	// A scenario that stops early (t.Fatal) still ends the operator.
	sc.t.Cleanup(func() {
		op.once.Do(func() { close(op.quit) })
		<-op.done
	})
	return op
}

// sleep waits d, or less if the operator is stopped; false then.
func (op *operator) sleep(lo, hi time.Duration) bool {
	select {
	case <-op.quit:
		return false
	case <-time.After(lo + time.Duration(op.rng.Int64N(int64(hi-lo)+1))):
		return true
	}
}

// node returns a live node at random (nil if none has an HTTP address).
func (op *operator) node() *proc {
	ps := op.sc.live()
	op.rng.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
	for _, p := range ps {
		if nodeURL(p) != "" {
			return p
		}
	}
	return nil
}

// post sends POST path to p with the admin token; it gives up after 5 s.
func (op *operator) post(p *proc, path string, header map[string]string) (int, string, error) {
	return opCall(p, http.MethodPost, path, header)
}

func opCall(p *proc, method, path string, header map[string]string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, nodeURL(p)+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b)), nil
}

func (op *operator) loop() {
	defer close(op.done)
	sc := op.sc
	for n := 1; ; n++ {
		if !op.sleep(500*time.Millisecond, 2*time.Second) {
			return
		}
		paused := op.pause()
		if !op.sleep(time.Second, 3*time.Second) {
			if paused {
				op.resume()
			}
			return
		}
		if p := op.node(); p != nil {
			id := fmt.Sprintf("e2e-%s-%d", op.label, n)
			code, body, err := op.post(p, "/jobs/manual/run?by=e2e-operator", map[string]string{"Idempotency-Key": id})
			if err == nil && (code == http.StatusAccepted || code == http.StatusOK) {
				var reply struct {
					KeptPerJob int `json:"id_kept_per_job"`
				}
				_ = json.Unmarshal([]byte(body), &reply)
				op.mu.Lock()
				op.requests = append(op.requests, runNow{id: id, via: p.id, at: time.Now()})
				op.keptPerJob = max(op.keptPerJob, reply.KeptPerJob)
				op.mu.Unlock()
				sc.note("info-run-now", p.id, "run now %s accepted (%d)", id, code)
			} else {
				sc.note("info-run-now", p.id, "run now %s not accepted: %d %v %.80s", id, code, err, body)
			}
		}
		if !op.sleep(time.Second, 2*time.Second) {
			if paused {
				op.resume()
			}
			return
		}
		if paused {
			op.resume()
		}
	}
}

// pause pauses "paused" through a node; true if a node answered 200.
func (op *operator) pause() bool {
	p := op.node()
	if p == nil {
		return false
	}
	op.mu.Lock()
	op.asked++
	op.mu.Unlock()
	code, body, err := op.post(p, "/jobs/paused/pause?by=e2e-operator", nil)
	acked := time.Now()
	if err != nil || code != http.StatusOK {
		op.mu.Lock()
		op.failed++
		op.mu.Unlock()
		op.sc.note("info-pause", p.id, "pause not acknowledged: %d %v %.80s", code, err, body)
		return false
	}
	op.sc.mu.Lock()
	op.sc.pauses = append(op.sc.pauses, history.Pause{Job: "paused", Acked: acked, Via: p.id})
	op.sc.mu.Unlock()
	op.sc.note("info-pause", p.id, "pause acknowledged (200)")
	return true
}

// resume resumes "paused", asking again (through any node) until a node
// answers 200, for up to a minute. The pause ends when the first resume
// is sent: any of them may have been applied.
func (op *operator) resume() {
	sc := op.sc
	var first time.Time
	unanswered := false
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if p := op.node(); p != nil {
			sent := time.Now()
			if first.IsZero() {
				first = sent
				sc.mu.Lock()
				sc.pauses[len(sc.pauses)-1].Resumed = first
				sc.mu.Unlock()
			}
			code, body, err := op.post(p, "/jobs/paused/resume?by=e2e-operator", nil)
			if err == nil && code == http.StatusOK {
				sc.note("info-resume", p.id, "resumed (200)")
				return
			}
			// An earlier resume whose outcome was unknown (no answer, or
			// a 5xx from a store write that failed after it was sent)
			// was applied: the job is no longer paused.
			if err == nil && code == http.StatusConflict && strings.Contains(body, "is not paused") && unanswered {
				sc.note("info-resume", p.id, "resumed: an earlier resume, unanswered, was applied (409 %.60s)", body)
				return
			}
			unanswered = unanswered || err != nil || code >= 500
			sc.note("info-resume", p.id, "resume not acknowledged: %d %v %.80s", code, err, body)
		}
		time.Sleep(500 * time.Millisecond)
	}
	sc.problem("job paused: no node acknowledged its resume within a minute")
}

// stop ends the operator (resuming what it paused), waits for every
// accepted run-now request to be done, and returns its summary; every
// request found not done, or run more than once, is a problem of the
// scenario. A nil operator returns "".
func (op *operator) stop() string {
	if op == nil {
		return ""
	}
	op.once.Do(func() { close(op.quit) })
	<-op.done
	sc := op.sc
	op.mu.Lock()
	reqs := append([]runNow(nil), op.requests...)
	asked, failed, kept := op.asked, op.failed, op.keptPerJob
	op.mu.Unlock()
	states := map[string]requestState{}
	forgotten := map[string]bool{}
	// One 20 s wait for all of them: a soak may have hundreds.
	deadline := time.Now().Add(20 * time.Second)
	// What the last answer was, for a request found not done.
	lastAnswer := map[string]string{}
	w := requestWait{reqs: reqs, kept: kept, runsPath: sc.runsPath, deadline: deadline, ask: func(id string) (string, int, string, error) {
		p := op.node()
		if p == nil {
			return "", 0, "", nil
		}
		code, body, err := opCall(p, http.MethodGet, "/runs/"+id, nil)
		return p.id, code, body, err
	}}
	for i, r := range reqs {
		states[r.id], forgotten[r.id], lastAnswer[r.id] = w.await(i)
	}
	runs := manualRuns(sc.runsPath) // with the runs begun during the wait
	var done, twice, notDone, phantom, gone int
	for _, r := range reqs {
		st, n := states[r.id], len(runs[r.id])
		switch {
		case n > 1:
			twice++
			sc.problem("run now %s (accepted by %s at %s) ran %d times", r.id, r.via, r.at.Format("15:04:05.000"), n)
		case forgotten[r.id]:
			gone++
		case st.State != "done":
			notDone++
			sc.problem("run now %s (accepted by %s at %s) still %q 20 s after the faults ended (ran %d times; last: %s)", r.id, r.via, r.at.Format("15:04:05.000"), st.State, n, lastAnswer[r.id])
		case n == 0 && st.Result == "ok":
			phantom++
			sc.problem("run now %s: done, %s by %s token %d, yet the job never started", r.id, st.Result, st.Instance, st.Token)
		case n == 0:
			// A term killed between its take and the start may leave
			// this (at most once); the next term's word for it is not
			// judged here, only shown.
			done++
			sc.note("info-run-now", r.id, "done without a run: %s %q by %s token %d", st.Result, st.Error, st.Instance, st.Token)
		default:
			done++
		}
	}
	sc.mu.Lock()
	acked := len(sc.pauses)
	sc.mu.Unlock()
	return fmt.Sprintf("    operator: %d pauses sent, %d acknowledged, %d not (each acknowledged one checked: after-pause); run now: %d accepted, %d done and run at most once, %d done and forgotten (older than the newest %d; run at most once), %d ran twice, %d not done, %d done ok without a run\n",
		asked, acked, failed, len(reqs), done, gone, kept, twice, notDone, phantom)
}
