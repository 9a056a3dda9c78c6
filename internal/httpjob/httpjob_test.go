package httpjob

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/certtest"
	"github.com/batonhq/baton/schedulerhost"
)

var tick = time.Date(2026, 11, 24, 7, 0, 0, 0, time.UTC)

// runCtx is the context a Host gives a run: term token, tick, attempt.
func runCtx(token uint64, attempt int) context.Context {
	ctx := election.NewTerm(context.Background(), token).Context()
	ctx = schedulerhost.ContextWithTick(ctx, schedulerhost.Tick{Job: "report", Time: tick})
	return schedulerhost.ContextWithAttempt(ctx, attempt)
}

// The request carries the configured method, headers and body, the bearer
// token read from its file, and the run's identity in Baton-* headers.
func TestRun_RequestCarriesTheRun(t *testing.T) {
	type seen struct {
		method, body string
		h            http.Header
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, string(b), r.Header.Clone()}
	}))
	defer srv.Close()
	tokFile := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(tokFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	j, err := New("report", "orders", "node-a", Request{Method: "PUT", URL: srv.URL + "/jobs/report",
		Header: http.Header{"X-Team": {"billing"}}, Body: `{"full":true}`, BearerTokenFile: tokFile})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Run(runCtx(42, 2)); err != nil {
		t.Fatalf("Run: %v", err)
	}
	s := <-got
	if s.method != "PUT" || s.body != `{"full":true}` {
		t.Errorf("request %s %q", s.method, s.body)
	}
	for k, want := range map[string]string{
		"X-Team": "billing", "Authorization": "Bearer s3cret",
		HeaderJob: "report", HeaderToken: "42", HeaderTick: "2026-11-24T07:00:00Z", HeaderAttempt: "2",
		HeaderInstance: "node-a", HeaderElection: "orders", HeaderRunKind: "scheduled",
		HeaderRunID: "orders/report/2026-11-24T07:00:00Z", HeaderIdempotencyKey: `"orders/report/2026-11-24T07:00:00Z"`,
	} {
		if v := s.h.Get(k); v != want {
			t.Errorf("header %s = %q, want %q", k, v, want)
		}
	}
	if v := s.h.Get(HeaderRequestID); v != "" {
		t.Errorf("scheduled run has %s %q", HeaderRequestID, v)
	}
	if v := s.h.Get(HeaderCatchUpFrom); v != "" {
		t.Errorf("scheduled run has %s %q", HeaderCatchUpFrom, v)
	}

	// A catch-up run says the first missed tick it stands for.
	ctx := schedulerhost.ContextWithTick(runCtx(42, 1), schedulerhost.Tick{Job: "report", Time: tick, CatchUp: true, CatchUpFrom: tick.Add(-3 * time.Minute)})
	if err := j.Run(ctx); err != nil {
		t.Fatal(err)
	}
	s = <-got
	if s.h.Get(HeaderRunKind) != "catch-up" || s.h.Get(HeaderCatchUpFrom) != "2026-11-24T06:57:00Z" {
		t.Errorf("catch-up run headers: kind %q from %q", s.h.Get(HeaderRunKind), s.h.Get(HeaderCatchUpFrom))
	}

	// A run now names its request and who asked.
	ctx = schedulerhost.ContextWithManual(runCtx(43, 1), schedulerhost.Manual{RequestID: "r-7", By: "ops"})
	if err := j.Run(ctx); err != nil {
		t.Fatal(err)
	}
	s = <-got
	if s.h.Get(HeaderRunKind) != "manual" || s.h.Get(HeaderRequestID) != "r-7" || s.h.Get(HeaderRequestedBy) != "ops" ||
		s.h.Get(HeaderRunID) != "orders/report/manual/r-7" {
		t.Errorf("manual run headers: kind %q id %q by %q run %q", s.h.Get(HeaderRunKind), s.h.Get(HeaderRequestID), s.h.Get(HeaderRequestedBy), s.h.Get(HeaderRunID))
	}
}

// 2xx is success; any other status, a redirect included, is a failure
// naming the status and the start of the body; so is a transport error.
func TestRun_Outcomes(t *testing.T) {
	var status atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := int(status.Load()); s == http.StatusFound {
			http.Redirect(w, r, "/elsewhere", s)
		} else {
			w.WriteHeader(s)
			io.WriteString(w, "database is down\n")
		}
	}))
	defer srv.Close()
	j, err := New("report", "e", "n", Request{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		status int
		ok     bool
		final  bool // by DefaultRetryStatuses
	}{{200, true, false}, {204, true, false}, {299, true, false}, {302, false, true}, {404, false, true}, {409, false, true},
		{408, false, false}, {429, false, false}, {500, false, false}, {503, false, false}} {
		status.Store(int32(c.status))
		err := j.Run(runCtx(1, 1))
		if c.ok != (err == nil) {
			t.Errorf("status %d: err %v", c.status, err)
		}
		var se *StatusError
		if !c.ok && (!errors.As(err, &se) || se.Status != c.status) {
			t.Errorf("status %d: err %v, want a StatusError", c.status, err)
		}
		if !c.ok && (se.Final != c.final || errors.Is(err, schedulerhost.ErrFinal) != c.final) {
			t.Errorf("status %d: final %v, wraps ErrFinal %v; want %v", c.status, se.Final, errors.Is(err, schedulerhost.ErrFinal), c.final)
		}
		if c.status == 500 && err.Error() != "HTTP 500 Internal Server Error: database is down" {
			t.Errorf("status 500: %v", err)
		}
		if c.status == 409 && err.Error() != "HTTP 409 Conflict: database is down (final status: not retried)" {
			t.Errorf("status 409: %v", err)
		}
	}
	srv.Close()
	if err := j.Run(runCtx(1, 1)); err == nil || !strings.Contains(err.Error(), "POST "+srv.URL) {
		t.Errorf("server gone: %v", err)
	}
}

// retry_statuses replaces the default: listed codes and classes are
// retried, any other status is final; an empty list retries none.
func TestRun_RetryStatuses(t *testing.T) {
	var status atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(int(status.Load())) }))
	defer srv.Close()
	for _, c := range []struct {
		list  []string
		final map[int]bool
	}{
		{[]string{"409", "4xx"}, map[int]bool{409: false, 404: false, 302: true, 500: true}},
		{[]string{"503"}, map[int]bool{503: false, 500: true, 429: true}},
		{[]string{}, map[int]bool{503: true, 408: true}},
	} {
		j, err := New("r", "e", "n", Request{URL: srv.URL, RetryStatuses: c.list})
		if err != nil {
			t.Fatal(err)
		}
		for st, final := range c.final {
			status.Store(int32(st))
			if err := j.Run(runCtx(1, 1)); errors.Is(err, schedulerhost.ErrFinal) != final {
				t.Errorf("retry_statuses %q, status %d: %v; want final %v", c.list, st, err, final)
			}
		}
	}
}

// A run cancelled (the term ended) aborts the request at once, with the
// cause; without a deadline of its own, DefaultTimeout bounds it.
func TestRun_CancelAbortsRequest(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	aborted := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		select {
		case <-r.Context().Done():
			close(aborted)
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	j, err := New("report", "e", "n", Request{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	lost := errors.New("leadership lost")
	ctx, cancel := context.WithCancelCause(runCtx(5, 1))
	errc := make(chan error, 1)
	go func() { errc <- j.Run(ctx) }()
	<-arrived
	start := time.Now()
	cancel(lost)
	err = <-errc
	if !errors.Is(err, lost) {
		t.Errorf("Run after cancel: %v, want the cause", err)
	}
	select {
	case <-aborted:
	case <-time.After(5 * time.Second):
		t.Fatal("the server never saw the request aborted")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("abort took %v", d)
	}
}

// TLS: the CA file verifies the server, and the client certificate is
// presented to a server that requires one; without them the request fails.
func TestRun_TLS(t *testing.T) {
	set := certtest.New(t, "job", "baton")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	kp, err := tls.LoadX509KeyPair(set.Server.CertFile, set.Server.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{kp}, ClientCAs: set.CA.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	defer srv.Close()
	url := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	j, err := New("r", "e", "n", Request{URL: url, CACert: set.CA.CertFile, Cert: set.Client.CertFile, Key: set.Client.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Run(runCtx(1, 1)); err != nil {
		t.Errorf("with ca_cert and a client certificate: %v", err)
	}
	j, _ = New("r", "e", "n", Request{URL: url, CACert: set.CA.CertFile})
	if err := j.Run(runCtx(1, 1)); err == nil {
		t.Error("without a client certificate: ok, want a failure")
	}
	j, _ = New("r", "e", "n", Request{URL: url})
	if err := j.Run(runCtx(1, 1)); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without ca_cert: %v, want a certificate error", err)
	}
}

// Bad configuration is refused, naming the field and the value.
func TestNew_Refuses(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		r    Request
		want string
	}{
		{Request{URL: "ftp://x/y"}, `url "ftp://x/y": scheme "ftp": want http or https`},
		{Request{URL: "file:///etc/passwd"}, `scheme "file"`},
		{Request{URL: "/relative"}, `scheme ""`},
		{Request{URL: "http:///nohost"}, "no host"},
		{Request{URL: "http://x", Method: "GE T"}, `method "GE T"`},
		{Request{URL: "http://x", Header: http.Header{"Baton-Token": {"1"}}}, "set by baton"},
		{Request{URL: "http://x", Header: http.Header{"Authorization": {"Bearer x"}}}, "bearer_token_file"},
		{Request{URL: "http://x", CACert: filepath.Join(dir, "none.pem")}, "ca_cert: open"},
		{Request{URL: "http://x", Cert: "c.pem"}, "client_cert and client_key"},
		{Request{URL: "http://x", Header: http.Header{"Idempotency-Key": {"k"}}}, `header "Idempotency-Key": set by baton`},
		{Request{URL: "http://x", RetryStatuses: []string{"503", "2xx"}}, `retry_statuses "2xx": want a status from 300 to 599`},
		{Request{URL: "http://x", RetryStatuses: []string{"600"}}, `retry_statuses "600"`},
		{Request{URL: "http://x", RetryStatuses: []string{"0503"}}, `retry_statuses "0503"`},
	} {
		if _, err := New("j", "e", "n", c.r); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.r, err, c.want)
		}
	}
}
