// Package httpjob runs a scheduled job as one HTTP request to a service,
// typically the local instance of an application written in any language:
// the run's identity travels in request headers, a 2xx answer is success,
// and anything else (another status, a transport error) is a failure. The
// job's retries apply to a transport error and to the statuses of
// Request.RetryStatuses; any other status is final (not retried).
//
// A request that never reached the service, because no connection could
// be made (refused, no route, no such host) and nothing was written on
// any, fails with an error that starts "not delivered: "
// (audit.ErrTextNotDelivered). If the term ends before the retry, the
// tick is accounted lost, not-delivered; a request that was written and
// then lost its connection (reset, EOF: the service may have done the
// work) is lost, retry-cut. Neither is run again by the next leader.
//
// The request is bound to the run's context: a run cancelled because the
// term ended aborts it, and a graceful stop, which leaves runs to finish
// within the shutdown timeout, waits for it.
package httpjob

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/schedulerhost"
	"github.com/batonhq/baton/tracing"
)

// Request headers set on every request. They mirror the environment of a
// command job (BATON_JOB and so on).
const (
	HeaderJob      = "Baton-Job"      // the job's name
	HeaderToken    = "Baton-Token"    // the term's fencing token, decimal
	HeaderTick     = "Baton-Tick"     // the nominal time of the tick, RFC 3339, UTC
	HeaderAttempt  = "Baton-Attempt"  // the attempt of the tick's run, from 1
	HeaderInstance = "Baton-Instance" // the identity of the instance sending it
	HeaderElection = "Baton-Election" // the election's name
	HeaderRunKind  = "Baton-Run-Kind" // "scheduled", "catch-up" or "manual"
	// HeaderCatchUpFrom is, on a catch-up run, the earliest missed tick
	// it stands for (RFC 3339, UTC): the missed ticks from it through
	// Baton-Tick. Absent on other runs.
	HeaderCatchUpFrom = "Baton-Catch-Up-From"
	HeaderRequestID   = "Baton-Request-Id"   // a run now's request id (manual runs only)
	HeaderRequestedBy = "Baton-Requested-By" // who asked for a run now (manual runs only)
	HeaderRunID       = "Baton-Run-Id"       // the run: the same on every attempt of one tick or run now
	// HeaderIdempotencyKey carries the run id as a quoted string, as in
	// draft-ietf-httpapi-idempotency-key-header.
	HeaderIdempotencyKey = "Idempotency-Key"
)

// DefaultTimeout is the timeout of an HTTP job that has none of its own:
// an HTTP job never waits for an answer forever. The node makes it the
// job's Timeout, so that reaching it is a timeout (recorded and counted
// as one, and not retried), not a failure.
const DefaultTimeout = time.Minute

// maxErrorBody is how much of a failed answer's body goes into the error.
const maxErrorBody = 512

// Request is the request a job sends, as configured.
type Request struct {
	Method string // default POST
	URL    string // http or https only
	Header http.Header
	Body   string

	// BearerTokenFile, if set, is read at every run (so that a rotated
	// token is picked up) and sent as "Authorization: Bearer TOKEN".
	BearerTokenFile string
	// CACert, Cert and Key are PEM files: the CA that signed the server's
	// certificate (default: the system roots), and a client certificate.
	CACert, Cert, Key string

	// RetryStatuses are the statuses the job's retries apply to: codes
	// ("503") and classes ("5xx"). Nil means DefaultRetryStatuses; an
	// empty, non-nil list retries no status. Any other status is final.
	RetryStatuses []string
}

// Job is one HTTP job. Its Run method is a schedulerhost.Job.Run.
type Job struct {
	Name, Election, Instance string

	method string
	url    string
	header http.Header
	body   string
	token  string
	retry  statusSet
	client *http.Client
}

// New checks r and prepares the job: the URL must be absolute, http or
// https, and the TLS files must load. Errors name the field.
func New(name, electionName, instance string, r Request) (*Job, error) {
	method := r.Method
	if method == "" {
		method = http.MethodPost
	}
	if err := CheckMethod(method); err != nil {
		return nil, err
	}
	if err := CheckURL(r.URL); err != nil {
		return nil, err
	}
	for k := range r.Header {
		if err := CheckHeader(k); err != nil {
			return nil, err
		}
	}
	retry, err := parseStatuses(r.RetryStatuses)
	if err != nil {
		return nil, err
	}
	tc, err := TLSConfig(r.CACert, r.Cert, r.Key)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // a job calls its own service: never through an environment proxy
	tr.TLSClientConfig = tc
	return &Job{
		Name: name, Election: electionName, Instance: instance,
		method: method, url: r.URL, header: r.Header.Clone(), body: r.Body, token: r.BearerTokenFile, retry: retry,
		client: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a redirect is an answer, not 2xx: the job failed
		}},
	}, nil
}

// CheckMethod reports a method that is not an HTTP token.
func CheckMethod(m string) error {
	if m == "" || strings.IndexFunc(m, func(r rune) bool { return r <= ' ' || r >= 0x7f || strings.ContainsRune("()<>@,;:\\\"/[]?={}", r) }) >= 0 {
		return fmt.Errorf("method %q: not an HTTP method", m)
	}
	return nil
}

// CheckURL reports a URL that is not absolute http:// or https:// with a
// host.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("url %q: %v", raw, errors.Unwrap(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("url %q: scheme %q: want http or https", raw, u.Scheme)
	}
	if u.Host == "" {
		return fmt.Errorf("url %q: no host", raw)
	}
	return nil
}

// CheckHeader reports a header name that is not a token, or one that baton
// sets itself (Baton-*, and Authorization, which bearer_token_file sets).
func CheckHeader(name string) error {
	if err := CheckMethod(name); err != nil {
		return fmt.Errorf("header %q: not a header name", name)
	}
	c := http.CanonicalHeaderKey(name)
	if strings.HasPrefix(c, "Baton-") {
		return fmt.Errorf("header %q: Baton-* headers are set by baton", name)
	}
	if c == HeaderIdempotencyKey {
		return fmt.Errorf("header %q: set by baton (the run id)", name)
	}
	if c == "Authorization" {
		return fmt.Errorf("header %q: secrets do not belong in the config; use bearer_token_file", name)
	}
	return nil
}

// TLSConfig loads the CA and client certificate files; nil when none is
// given.
func TLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("client_cert and client_key: give both or neither")
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("ca_cert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_cert %s: no PEM certificate in it", caFile)
		}
		tc.RootCAs = pool
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client_cert %s, client_key %s: %w", certFile, keyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// StatusError is the error of a run whose answer was not 2xx.
type StatusError struct {
	Status int
	Body   string // the start of the answer's body
	// Final is set when Status is not one of the job's retry statuses:
	// then the error wraps schedulerhost.ErrFinal and no retry follows.
	Final bool
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("HTTP %d %s", e.Status, http.StatusText(e.Status))
	if e.Body != "" {
		s += ": " + e.Body
	}
	if e.Final {
		s += " (final status: not retried)"
	}
	return s
}

// Unwrap returns schedulerhost.ErrFinal for a final status.
func (e *StatusError) Unwrap() error {
	if e.Final {
		return schedulerhost.ErrFinal
	}
	return nil
}

// Run sends the request and waits for the answer, or for ctx to end. The
// fencing token, tick, attempt and manual request come from ctx.
func (j *Job) Run(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, DefaultTimeout, schedulerhost.ErrJobTimeout)
		defer cancel()
	}
	// The transport may send a request again on a new connection when a
	// kept-alive one failed; then the error is the last connection's, and
	// an earlier one may have carried the request.
	var wrote atomic.Bool
	tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: func() { wrote.Store(true) }})
	req, err := http.NewRequestWithContext(tctx, j.method, j.url, strings.NewReader(j.body))
	if err != nil {
		return err
	}
	req.Header = j.header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	if j.body == "" {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	if j.token != "" {
		raw, err := os.ReadFile(j.token)
		if err != nil {
			return fmt.Errorf("bearer_token_file: %w", err)
		}
		tok := strings.TrimRight(string(raw), "\r\n")
		if tok == "" {
			return fmt.Errorf("bearer_token_file %s: empty", j.token)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	SetHeaders(ctx, req.Header, j.Name, j.Election, j.Instance)
	resp, err := j.client.Do(req)
	if err != nil {
		if c := context.Cause(ctx); c != nil {
			return fmt.Errorf("%s %s: aborted: %w", j.method, j.url, c)
		}
		if !wrote.Load() && dialFailed(err) {
			return fmt.Errorf("%s%s %s: %w", audit.ErrTextNotDelivered, j.method, j.url, err)
		}
		return fmt.Errorf("%s %s: %w", j.method, j.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // lets the connection be reused
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return &StatusError{Status: resp.StatusCode, Body: strings.TrimSpace(string(bytes.ToValidUTF8(b, []byte("?")))),
		Final: !j.retry.has(resp.StatusCode)}
}

// dialFailed reports whether err is a failure to connect (refused, no
// route, no such host): with no request written on any connection, the
// application never saw it.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &op) && op.Op == "dial"
}

// SetHeaders sets the Baton-* headers of the run in ctx on h, and the
// W3C traceparent (and tracestate) of its span when the run is traced.
func SetHeaders(ctx context.Context, h http.Header, job, electionName, instance string) {
	tracing.Inject(ctx, h)
	token, _ := election.TokenFromContext(ctx)
	tick, _ := schedulerhost.TickFromContext(ctx)
	h.Set(HeaderJob, job)
	h.Set(HeaderToken, strconv.FormatUint(token, 10))
	h.Set(HeaderTick, tick.Time.UTC().Format(time.RFC3339))
	h.Set(HeaderAttempt, strconv.Itoa(max(1, schedulerhost.AttemptFromContext(ctx))))
	h.Set(HeaderInstance, instance)
	h.Set(HeaderElection, electionName)
	kind := "scheduled"
	if tick.CatchUp {
		kind = "catch-up"
		if !tick.CatchUpFrom.IsZero() {
			h.Set(HeaderCatchUpFrom, tick.CatchUpFrom.UTC().Format(time.RFC3339))
		}
	}
	runID := electionName + "/" + job + "/" + tick.Time.UTC().Format(time.RFC3339Nano)
	if m, ok := schedulerhost.ManualFromContext(ctx); ok {
		kind = "manual"
		h.Set(HeaderRequestID, m.RequestID)
		h.Set(HeaderRequestedBy, m.By)
		runID = electionName + "/" + job + "/manual/" + m.RequestID
	}
	h.Set(HeaderRunKind, kind)
	h.Set(HeaderRunID, runID)
	h.Set(HeaderIdempotencyKey, quote(runID))
}

// quote returns s as a structured-field string (RFC 8941): quoted, with
// '"' and backslash escaped, and any byte outside printable ASCII as '?'.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
