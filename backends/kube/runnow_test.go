package kube_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/kube"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/kubetest"
	"github.com/batonhq/baton/schedulerhost"
)

// takeMarker marks the writes that take a run-now request, while they
// are being made, so that the network in front of the client can tell
// the take's PUT from the rest.
type takeMarker struct {
	control.Store
	taking atomic.Bool
}

func (s *takeMarker) Put(ctx context.Context, p control.Put) (int64, error) {
	take := p.Token != 0 && bytes.Contains(p.Value, []byte(`"state":"taken"`))
	if take {
		s.taking.Store(true)
		defer s.taking.Store(false)
	}
	return s.Store.Put(ctx, p)
}

// onFirst calls hook before the store's first read of the run-now
// requests, or, if atFence, before its first fence, if it has one.
type onFirst struct {
	control.Store
	atFence bool
	once    sync.Once
	hook    func()
}

func (s *onFirst) List(ctx context.Context, prefix string) ([]control.Entry, error) {
	if prefix == "run/" {
		s.once.Do(s.hook)
	}
	return s.Store.List(ctx, prefix)
}

// Put: with atFence, the first write of the term is where the hook
// runs, whichever comes first: the term's record (Host.Lead writes its
// start with the term's token, which raises the fence as Fence does) or
// the run-now loop's Fence.
func (s *onFirst) Put(ctx context.Context, p control.Put) (int64, error) {
	if s.atFence {
		s.once.Do(s.hook)
	}
	return s.Store.Put(ctx, p)
}

func (s *onFirst) Fence(ctx context.Context, token uint64) error {
	if s.atFence {
		s.once.Do(s.hook)
	}
	if f, ok := s.Store.(interface {
		Fence(context.Context, uint64) error
	}); ok {
		return f.Fence(ctx, token)
	}
	return nil
}

// runNowNode runs an Elector and a Host on b with store as the Host's
// control store, until t ends.
func runNowNode(t *testing.T, b *kube.Backend, id string, store control.Store, jobs ...schedulerhost.Job) *election.Elector {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	if os.Getenv("BATON_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", id)
	}
	e, err := election.New(election.Config{Backend: b, Identity: election.Identity{ID: id}, Logger: log, RetryPeriod: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h, err := schedulerhost.New(schedulerhost.Config{Jobs: jobs, Ledger: b.Ledger(), Control: store, Instance: id,
		Logger: log, ShutdownTimeout: 2 * time.Second, RunNowPoll: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.Run(ctx, h.Lead)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("%s: Run did not return within 30s of cancel", id)
		}
	})
	return e
}

// A deposed leader's take of a run-now request, sent before its term
// ended and held on the network until the next leader led, reaches the
// server after the next term began. The next term raises the control
// store's fence before it reads the requests: a take that lands after
// that is refused; one that lands before it is read as a take without a
// start, put back to pending. Either way the next term runs the request,
// once. Before, the take landed, and the next term closed the request as
// cancelled although no run of it ever started.
//
// a leads; its take's PUT of the control ConfigMap (after its read of
// the Lease) is held and a's path cut behind it, so that a's term ends
// unrenewed; b then takes the Lease, and the held PUT is let through,
// its answer awaited, at b's first read of the requests (after its
// fence) or at b's fence.
func TestControl_ADeposedTermsTakeInFlight(t *testing.T) {
	server(t)
	for _, tc := range []struct {
		name    string
		atFence bool
	}{{"arrives after the next term's fence", false}, {"arrives before the next term's fence", true}} {
		t.Run(tc.name, func(t *testing.T) { testTakeInFlight(t, tc.atFence) })
	}
}

func testTakeInFlight(t *testing.T, atFence bool) {
	s := server(t)
	name := leaseName(t)
	timing := election.Timing{TTL: 3 * time.Second}
	// A's client waits long: the held write is sent, late, whatever a's
	// own timeout did meanwhile.
	ca, err := kube.NewClient(kube.ClientConfig{Server: s.URL, Token: kubetest.Token, CAFile: s.CAFile, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ca.CloseIdleConnections)
	a := newBackend(t, kube.Config{Client: ca, Name: name, Timing: timing})
	b := newBackend(t, kube.Config{Name: name, Timing: timing})
	aStore := &takeMarker{Store: a.Control()}

	var cut, heldOnce atomic.Bool
	held, release := make(chan struct{}), make(chan struct{})
	landed := make(chan string, 1)
	kube.Intercept(ca, func(req *http.Request, send func(*http.Request) (*http.Response, error)) (*http.Response, error) {
		if cut.Load() {
			return nil, errors.New("test: a's path is cut")
		}
		if req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, "/configmaps/"+name+"-control") && aStore.taking.Load() && heldOnce.CompareAndSwap(false, true) {
			cut.Store(true) // a's renewals fail from now on: its term ends
			close(held)
			<-release
			// The write was on the wire: it arrives, whether or not a
			// still waits for its answer.
			resp, err := send(req.Clone(context.WithoutCancel(req.Context())))
			if err != nil {
				landed <- err.Error()
			} else {
				landed <- resp.Status
			}
			return resp, err
		}
		return send(req)
	})

	var mu sync.Mutex
	runs := map[string][]uint64{} // request id -> tokens of its runs
	job := schedulerhost.Job{Name: "manual", Schedule: "@every 1h", Run: func(ctx context.Context) error {
		if m, ok := schedulerhost.ManualFromContext(ctx); ok {
			tok, _ := election.TokenFromContext(ctx)
			mu.Lock()
			runs[m.RequestID] = append(runs[m.RequestID], tok)
			mu.Unlock()
		}
		return nil
	}}

	// The request is there before a leads: a's take is then its first
	// write after its own fence, from the copy that write returned.
	jobs := control.NewJobs(b.Control())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, _, err := jobs.RequestRun(ctx, control.RunRequest{ID: "r1", Job: "manual", By: "test", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	ea := runNowNode(t, a, "a", aStore, job)
	waitFor(t, 30*time.Second, "a leads", ea.IsLeader)
	ta, _ := ea.Term()
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("a did not take the request within 20s")
	}
	var sawLanded string
	bStore := &onFirst{Store: b.Control(), atFence: atFence, hook: func() {
		close(release)
		select {
		case sawLanded = <-landed:
		case <-time.After(20 * time.Second):
			sawLanded = "no answer within 20s"
		}
	}}
	eb := runNowNode(t, b, "b", bStore, job)
	waitFor(t, 30*time.Second, "b leads", eb.IsLeader)
	tb, _ := eb.Term()

	var last control.RunRequest
	waitFor(t, 30*time.Second, "request r1 done", func() bool {
		r, ok, err := jobs.Request(ctx, "r1")
		if err == nil && ok {
			last = r
		}
		return last.State == control.StateDone
	})
	time.Sleep(500 * time.Millisecond) // a few more polls: no second run
	mu.Lock()
	got := append([]uint64(nil), runs["r1"]...)
	mu.Unlock()
	t.Logf("a (token %d) took r1; its take, held until b (token %d) led, was answered %s", ta.Token, tb.Token, sawLanded)
	// Each arrival takes its own path: refused by the fence, or landed
	// and settled.
	if want := map[bool]string{false: "409 Conflict", true: "200 OK"}[atFence]; sawLanded != want {
		t.Errorf("a's held take was answered %q, want %q", sawLanded, want)
	}
	if last.Result != "ok" || len(got) != 1 || got[0] != tb.Token {
		t.Fatalf("request r1 ended %s (%s) by token %d, run %d times (tokens %v): want ok, run once by the next term (token %d)",
			last.Result, last.Error, last.Token, len(got), got, tb.Token)
	}
	t.Logf("request r1 done %s, run once by token %d", last.Result, tb.Token)
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
