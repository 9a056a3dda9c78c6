package httpjob

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
	"github.com/batonhq/baton/schedulerhost"
)

// closedAddr returns the address of a listener that was open and is
// closed: a connection to it is refused.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// resetter is an application that dies mid-request: it answers the
// first ok requests with 200 on one kept-alive connection, and on the
// next one, once it has read the request, closes its listener (so that a
// new connection is refused) and resets the connection.
type resetter struct {
	l    net.Listener
	seen atomic.Int32 // requests read
	done chan struct{}
}

func newResetter(t *testing.T, ok int) *resetter {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &resetter{l: l, done: make(chan struct{})}
	go s.serve(ok)
	t.Cleanup(func() { l.Close(); <-s.done })
	return s
}

func (s *resetter) serve(ok int) {
	defer close(s.done)
	c, err := s.l.Accept()
	if err != nil {
		return
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		s.seen.Add(1)
		if int(s.seen.Load()) > ok {
			s.l.Close()
			c.(*net.TCPConn).SetLinger(0) // a reset, not a FIN
			return
		}
		req.Body.Close()
		if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")); err != nil {
			return
		}
	}
}

// A request that never reached the application (its connection was
// refused) fails with an error that says it was not delivered, so that a
// run cut short after it is accounted lost, not-delivered; one that
// reached it and then lost its connection (outcome unknown) does not,
// even when the connection was a kept-alive one and the transport's own
// second try on a new connection was refused.
func TestRun_NotDelivered(t *testing.T) {
	refused := "http://" + closedAddr(t) + "/jobs/report"
	fresh := newResetter(t, 0)
	reused := newResetter(t, 1)
	for _, tc := range []struct {
		name      string
		url       string
		before    int // runs that succeed first
		delivered bool
		seen      *atomic.Int32
	}{
		{"refused", refused, 0, false, nil},
		{"reset mid-request", "http://" + fresh.l.Addr().String() + "/jobs/report", 0, true, &fresh.seen},
		{"reset mid-request, kept-alive connection", "http://" + reused.l.Addr().String() + "/jobs/report", 1, true, &reused.seen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := New("report", "orders", "node-a", Request{URL: tc.url})
			if err != nil {
				t.Fatal(err)
			}
			for range tc.before {
				if err := j.Run(runCtx(1, 1)); err != nil {
					t.Fatalf("Run before the reset: %v", err)
				}
			}
			err = j.Run(runCtx(1, 1))
			if err == nil {
				t.Fatal("Run: no error")
			}
			if tc.seen != nil && int(tc.seen.Load()) != tc.before+1 {
				t.Errorf("the application read %d requests, want %d", tc.seen.Load(), tc.before+1)
			}
			marked := strings.HasPrefix(err.Error(), audit.ErrTextNotDelivered+"POST "+tc.url+": ")
			if marked == tc.delivered {
				t.Errorf("Run: %v; want it marked %q: %v", err, audit.ErrTextNotDelivered, !tc.delivered)
			}
			if !tc.delivered && !strings.Contains(err.Error(), "connection refused") {
				t.Errorf("Run: %v; want the dial's error kept", err)
			}
		})
	}
}

// The same three, run by a Host with retries whose term is lost in the
// backoff after the first attempt: the tick's entry is failed, one
// attempt, and the accounting calls it lost, not-delivered when the
// request never reached the application and retry-cut when it did.
func TestHost_RetryCutAfterHTTPJob(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
		want audit.Reason
	}{
		{"refused", func(t *testing.T) string { return "http://" + closedAddr(t) + "/jobs/report" }, audit.ReasonNotDelivered},
		{"reset mid-request", func(t *testing.T) string {
			return "http://" + newResetter(t, 0).l.Addr().String() + "/jobs/report"
		}, audit.ReasonRetryCut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := cutRun(t, tc.url(t))
			if e.Result != ledger.ResultFailed || e.Attempts != 1 || !strings.Contains(e.Error, audit.ErrTextRetryCut) {
				t.Errorf("entry %+v; want failed, 1 attempt, %q", e, audit.ErrTextRetryCut)
			}
			if c, r := audit.Classify(e); c != audit.Lost || r != tc.want {
				t.Errorf("Classify(%q) = %s/%s, want %s/%s", e.Error, c, r, audit.Lost, tc.want)
			}
		})
	}
}

// cutRun runs an HTTP job to url, with retries, on a Host that leads a
// memory backend; it revokes the term once the first attempt failed,
// during its backoff, and returns the entry of that attempt's tick.
func cutRun(t *testing.T, url string) ledger.Run {
	t.Helper()
	m := memory.New(election.Timing{TTL: 5 * time.Second})
	j, err := New("report", "orders", "a", Request{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	// The term is revoked once the Host logs that the attempt failed
	// and it waits to retry: the attempt's outcome is settled by then.
	// (Revoked when the job function returned its error, the revoke could
	// land before the Host judged the attempt, which then read as
	// cancelled by the loss.)
	failed := make(chan time.Time, 1)
	quiet := slog.New(retryWatch{failed})
	h, err := schedulerhost.New(schedulerhost.Config{Logger: quiet, Ledger: m.Ledger(), Instance: "a",
		Jobs: []schedulerhost.Job{{
			Name: "report", Schedule: "@every 1s", Retries: 2, RetryBackoff: 10 * time.Second, Timeout: 5 * time.Second,
			Run: j.Run,
		}}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := election.New(election.Config{Backend: m.Candidate(), Identity: election.Identity{ID: "a"}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, h.Lead) }()
	var tick time.Time
	select {
	case tick = <-failed:
	case <-time.After(10 * time.Second):
		cancel()
		<-done
		t.Fatal("no failed attempt within 10s")
	}
	if !m.Revoke() {
		t.Error("no lease to revoke")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		hist, err := m.Ledger().History(context.Background(), "report", 20)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range hist {
			if r.Tick.Equal(tick) && r.Result != ledger.ResultRunning && r.Result != ledger.ResultSettling {
				cancel()
				<-done
				return r
			}
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("the tick of %v not ended within 10s of the loss: history %+v", tick, hist)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// retryWatch is a log handler that sends the tick of the first "attempt
// failed: retrying" it sees, and drops every record.
type retryWatch struct{ ch chan time.Time }

func (w retryWatch) Enabled(context.Context, slog.Level) bool { return true }

func (w retryWatch) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "attempt failed: retrying" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "tick" && a.Value.Kind() == slog.KindTime {
			select {
			case w.ch <- a.Value.Time():
			default:
			}
			return false
		}
		return true
	})
	return nil
}

func (w retryWatch) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w retryWatch) WithGroup(string) slog.Handler      { return w }
