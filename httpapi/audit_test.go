package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/schedulerhost"
)

// saveHourly writes job's Account: an hourly job that ran ok for 48
// hours but for the tick failedAgo before this hour, which failed.
func saveHourly(t *testing.T, s control.Store, job string, failedAgo time.Duration) {
	t.Helper()
	hour := time.Now().UTC().Truncate(time.Hour)
	ok := audit.Range{Class: audit.Ran, Reason: audit.ReasonOK, Token: 3, Instance: "a"}
	before, failed, after := ok, ok, ok
	before.First, before.Last, before.Count = hour.Add(-48*time.Hour), hour.Add(-failedAgo-time.Hour), int64(48-failedAgo/time.Hour)
	failed.Reason, failed.First, failed.Last, failed.Count, failed.Error = audit.ReasonFailed, hour.Add(-failedAgo), hour.Add(-failedAgo), 1, "HTTP 500"
	after.First, after.Last, after.Count = hour.Add(-failedAgo+time.Hour), hour.Add(time.Hour), int64(failedAgo/time.Hour)+1
	ctx := context.Background()
	st, err := audit.Load(ctx, s, job)
	if err != nil {
		t.Fatal(err)
	}
	st.Account = audit.Account{Job: job, Specs: []audit.Spec{{At: hour.Add(-49 * time.Hour), Schedule: "@hourly", Zone: "UTC"}},
		Ranges: []audit.Range{before, failed, after}}
	if _, err := audit.Save(ctx, s, st, 0); err != nil {
		t.Fatal(err)
	}
}

func decodeAudit(t *testing.T, c *ctlNode, path string) []audit.Report {
	t.Helper()
	code, body := c.call(t, "GET", path, "", nil)
	var rep AuditReply
	if err := json.Unmarshal([]byte(body), &rep); err != nil || code != http.StatusOK {
		t.Fatalf("GET /audit: %d %v\n%s", code, err, body)
	}
	return rep.Reports
}

// GET /audit on a follower (nobody runs): every job's report, or one
// job's, over the window asked; a bad window or job is a 400 naming it.
func TestAudit_Endpoint(t *testing.T) {
	mem := memory.New(election.Timing{})
	var rs jobRuns
	a := newCtlNode(t, mem, "a", "", rs.job("report", "@hourly"), rs.job("other", "0 0 0 1 1 *"))
	saveHourly(t, mem.Control(), "report", 2*time.Hour)

	reps := decodeAudit(t, a, "/audit")
	if len(reps) != 2 || reps[0].Job != "report" || reps[1].Job != "other" {
		t.Fatalf("GET /audit: %d reports, want report and other: %+v", len(reps), reps)
	}
	r := reps[0]
	if r.Due != 24 || r.Classes[audit.Ran] != 24 || len(r.NotOK) != 1 || r.NotOK[0].Reason != audit.ReasonFailed || r.NotOK[0].Error != "HTTP 500" {
		t.Errorf("report's last 24 h: due %d, classes %v, not ok %+v; want 24 ran, one failed", r.Due, r.Classes, r.NotOK)
	}
	reps = decodeAudit(t, a, "/audit?job=report&window=48h")
	if len(reps) != 1 || reps[0].Due != 48 || reps[0].To.Sub(reps[0].From).Round(time.Second) != 48*time.Hour {
		t.Errorf("?job=report&window=48h: %+v, want one report of 48 ticks", reps)
	}
	for _, tc := range []struct{ query, want string }{
		{"window=bogus", `window \"bogus\"`},
		{"window=-1h", `window \"-1h\"`},
		{"window=0s", `window \"0s\"`},
		{"window=800h", `window \"800h\"`},
		{"job=nope", `job \"nope\": not in this node's job set`},
		{"job=", `job \"\"`},
	} {
		if code, body := a.call(t, "GET", "/audit?"+tc.query, "", nil); code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("GET /audit?%s: %d %s, want 400 with %s", tc.query, code, body, tc.want)
		}
	}
}

// failingList is a control store whose reads fail.
type failingList struct{ control.Store }

func (failingList) List(context.Context, string) ([]control.Entry, error) {
	return nil, errors.New("control store down")
}

// Without a control store GET /audit is a 501; with one that fails, a
// 503 with its error, and the status page's accounting says why.
func TestAudit_Unavailable(t *testing.T) {
	mem := memory.New(election.Timing{})
	job := schedulerhost.Job{Name: "j", Schedule: "@every 1s", Run: func(context.Context) error { return nil }}
	el, host := memParts(t, mem, "a", job, 0)
	n, err := New(Config{Elector: el, Host: host, Election: "e", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	defer srv.Close()
	if code, body := get(t, srv, "/audit"); code != http.StatusNotImplemented || !strings.Contains(body, "no control store") {
		t.Errorf("GET /audit without a control store: %d %s, want 501", code, body)
	}
	if st := statusAudit(t, srv); st.AuditErr == "" || st.Jobs[0].Audit != nil {
		t.Errorf("/status?audit=1 without a control store: audit_error %q, want the reason", st.AuditErr)
	}

	down := failingList{mem.Control()}
	b := newCtlNodeStore(t, mem, down, job)
	if code, body := b.call(t, "GET", "/audit", "", nil); code != http.StatusServiceUnavailable || !strings.Contains(body, "control store down") {
		t.Errorf("GET /audit with the store down: %d %s, want 503 with its error", code, body)
	}
	if st := statusAudit(t, b.srv); !strings.Contains(st.AuditErr, "control store down") {
		t.Errorf("/status?audit=1 with the store down: audit_error %q", st.AuditErr)
	}
}

func statusAudit(t *testing.T, srv *httptest.Server) Status {
	t.Helper()
	code, body := get(t, srv, "/status?audit=1")
	var st Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || code != http.StatusOK {
		t.Fatalf("/status?audit=1: %d %v\n%s", code, err, body)
	}
	return st
}

// newCtlNodeStore is newCtlNode with s as the Host's and the API's
// control store.
func newCtlNodeStore(t *testing.T, mem *memory.Server, s control.Store, jobs ...schedulerhost.Job) *ctlNode {
	t.Helper()
	discard := slog.New(slog.DiscardHandler)
	host, err := schedulerhost.New(schedulerhost.Config{Jobs: jobs, Ledger: mem.Ledger(), Control: s, Instance: "b", Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	el, err := election.New(election.Config{Backend: mem.Candidate(), Identity: election.Identity{ID: "b"}, Election: "e", Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{Elector: el, Host: host, Election: "e", Logger: discard, Control: s})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(srv.Close)
	return &ctlNode{n: n, srv: srv, el: el}
}

// /status?audit=1 gives each job its last 24 h, read again only after
// PageAuditTTL: a change of the Account within it shows later.
func TestAudit_StatusPageCache(t *testing.T) {
	mem := memory.New(election.Timing{})
	var rs jobRuns
	a := newCtlNode(t, mem, "a", "", rs.job("report", "@hourly"))
	saveHourly(t, mem.Control(), "report", 2*time.Hour)
	st := statusAudit(t, a.srv)
	r := st.Jobs[0].Audit
	if st.AuditWindow != "24h0m0s" || r == nil || r.Due != 24 || len(r.NotOK) != 1 || !r.NotOK[0].First.Equal(time.Now().UTC().Truncate(time.Hour).Add(-2*time.Hour)) {
		t.Fatalf("/status?audit=1: window %q, report %+v", st.AuditWindow, r)
	}
	saveHourly(t, mem.Control(), "report", 5*time.Hour)
	if r := statusAudit(t, a.srv).Jobs[0].Audit; r == nil || len(r.NotOK) != 1 || !r.NotOK[0].First.Equal(st.Jobs[0].Audit.NotOK[0].First) {
		t.Errorf("within PageAuditTTL: %+v, want the report read before", r)
	}
	a.n.pageAudit.mu.Lock()
	a.n.pageAudit.at = a.n.pageAudit.at.Add(-PageAuditTTL) // as if PageAuditTTL passed
	a.n.pageAudit.mu.Unlock()
	if r := statusAudit(t, a.srv).Jobs[0].Audit; r == nil || len(r.NotOK) != 1 || r.NotOK[0].First.Equal(st.Jobs[0].Audit.NotOK[0].First) {
		t.Errorf("after PageAuditTTL: %+v, want the failed tick 5 h ago", r)
	}
	if code, body := a.call(t, "GET", "/status?audit=maybe", "", nil); code != http.StatusBadRequest || !strings.Contains(body, `audit "maybe"`) {
		t.Errorf("/status?audit=maybe: %d %s, want 400", code, body)
	}
}
