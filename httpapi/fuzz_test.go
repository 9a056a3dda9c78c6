package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/schedulerhost"
)

// FuzzHTTP sends garbage to a node's HTTP API (on the in-memory backend
// with its control store, admin token "tok", not running, so /healthz and
// /readyz say 503): any
// method, path, query, Authorization header and body. No handler panics;
// the only 5xx is the 503 of /healthz and /readyz, which a clean GET of
// the same path gives too; every 4xx says why in its body; a 2xx of
// /status is JSON naming the node's job; and whatever came before, a clean
// GET /status?history=3 still gives 200 and JSON.
func FuzzHTTP(f *testing.F) {
	mem := memory.New(election.Timing{})
	discard := slog.New(slog.DiscardHandler)
	host, err := schedulerhost.New(schedulerhost.Config{
		Jobs:   []schedulerhost.Job{{Name: "j", Schedule: "@every 1h", Run: func(context.Context) error { return nil }}},
		Ledger: mem.Ledger(), Control: mem.Control(), Instance: "a", Logger: discard,
	})
	if err != nil {
		f.Fatal(err)
	}
	el, err := election.New(election.Config{Backend: mem.Candidate(), Identity: election.Identity{ID: "a"}, Election: "e", Logger: discard})
	if err != nil {
		f.Fatal(err)
	}
	n, err := New(Config{Elector: el, Host: host, Election: "e", Backend: "memory", Registry: NewRegistry(),
		AdminToken: []byte("tok"), StepDownCooldown: time.Hour, Logger: discard, Control: mem.Control()})
	if err != nil {
		f.Fatal(err)
	}
	h := n.Handler()
	methods := []string{"GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS", "PATCH", "get", "X\x00"}
	do := func(method, path, query, auth string, body []byte) *httptest.ResponseRecorder {
		u := &url.URL{Path: path, RawQuery: query}
		req := &http.Request{Method: method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{},
			Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Host: "node", RequestURI: u.RequestURI(),
			RemoteAddr: "192.0.2.1:1234"}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req.WithContext(context.Background()))
		return rec
	}
	for _, s := range []struct {
		m             uint8
		path, q, auth string
	}{
		{0, "/status", "history=5", ""}, {0, "/status", "history=-1", ""}, {0, "/status", "history=99999999999999999999", ""},
		{0, "/healthz", "", ""}, {0, "/readyz", "x=%zz", ""}, {0, "/", "", ""}, {0, "/metrics", "", ""}, {0, "/nope", "", ""},
		{1, "/step-down", "cooldown=1h", "Bearer tok"}, {1, "/step-down", "cooldown=-1s", "Bearer tok"},
		{1, "/step-down", "cooldown=soon", "bearer tok"}, {1, "/standby", "", "Bearer tok"}, {1, "/eligible", "", "Bearer  tok "},
		{1, "/eligible", "", "Basic tok"}, {0, "/step-down", "", ""}, {2, "/status", "", ""}, {0, "//status/../healthz", "", ""},
		{1, "/jobs/j/pause", "by=al&note=n%20b", "Bearer tok"}, {1, "/jobs/j/resume", "run_missed=1", "Bearer tok"},
		{1, "/jobs/j/run", "request_id=r-1", "Bearer tok"}, {1, "/jobs/j/run", "request_id=%00", "Bearer tok"},
		{1, "/jobs/nope/pause", "", "Bearer tok"}, {1, "/jobs/j%2Fx/run", "", "Bearer tok"}, {0, "/runs/r-1", "", ""},
		{0, "/runs/", "", ""}, {0, "*", "", ""}, {5, "*", "", ""},
		{0, "/audit", "job=j&window=744h", ""}, {0, "/audit", "window=1e9h", ""}, {0, "/audit", "job=%00", ""},
		{0, "/status", "history=3&audit=1", ""}, {0, "/status", "audit=yes", ""},
	} {
		f.Add(s.m, s.path, s.q, s.auth, []byte(`{"cooldown":"1h"}`))
	}
	f.Fuzz(func(t *testing.T, m uint8, path, query, auth string, body []byte) {
		method := methods[int(m)%len(methods)]
		rec := do(method, path, query, auth, body)
		code, out := rec.Code, rec.Body.String()
		switch {
		case code >= 500:
			if code != http.StatusServiceUnavailable || (path != "/healthz" && path != "/readyz") {
				t.Fatalf("%s %q ?%q: %d %q", method, path, query, code, out)
			}
			if clean := do("GET", path, "", "", nil); clean.Code != code {
				t.Fatalf("%s %q ?%q: %d, but a clean GET %d", method, path, query, code, clean.Code)
			}
		case code >= 400:
			if strings.TrimSpace(out) == "" && method != "HEAD" {
				t.Fatalf("%s %q ?%q: %d without a message", method, path, query, code)
			}
		case code >= 200 && code < 300 && path == "/status" && method == "GET":
			var st Status
			if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Jobs) != 1 || st.Jobs[0].Name != "j" {
				t.Fatalf("GET /status ?%q: %d %v\n%s", query, code, err, out)
			}
		}
		rec = do("GET", "/status", "history=3", "", nil)
		var st Status
		if err := json.Unmarshal(rec.Body.Bytes(), &st); rec.Code != http.StatusOK || err != nil {
			t.Fatalf("after %s %q ?%q: GET /status: %d %v\n%s", method, path, query, rec.Code, err, rec.Body)
		}
	})
}
