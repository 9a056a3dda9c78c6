package node

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/election/electiontest"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/schedulerhost"
)

func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var waitUntil = testenv.WaitUntil

// TestServer_HealthAfterLoss: /healthz is 200 while leading, 503 while a
// run that ignores its context still goes after the lease was lost, and 200
// again once it returned; /status tells who leads.
func TestServer_HealthAfterLoss(t *testing.T) {
	mem := electiontest.NewMemory(election.Timing{})
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	// Lead waits a minute for the stubborn run: no new campaign meanwhile.
	el, host := memParts(t, mem, "n1", schedulerhost.Job{Name: "stubborn", Schedule: "@every 1s", Run: func(ctx context.Context) error {
		started <- struct{}{}
		<-release // ignores ctx: keeps running after the loss
		return nil
	}}, time.Minute)
	n, err := New(Config{Elector: el, Host: host, Election: "e", Backend: "memory", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	defer srv.Close()

	if code, _ := get(t, srv, "/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz before the loop runs: %d, want 503", code)
	}
	startNode(t, n)

	<-started
	if code, body := get(t, srv, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while leading: %d %s", code, body)
	}
	if code, _ := get(t, srv, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz while leading: %d", code)
	}
	code, body := get(t, srv, "/status")
	var st Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || code != http.StatusOK {
		t.Fatalf("/status: %d %v\n%s", code, err, body)
	}
	if !st.Leading || st.Term == nil || st.Leader == nil || st.Leader.Identity.ID != "n1" || st.Term.Token != st.Leader.Token ||
		len(st.Jobs) != 1 || st.Jobs[0].Name != "stubborn" || st.Jobs[0].Next.IsZero() || st.Running != 1 {
		t.Errorf("/status while leading:\n%s", body)
	}

	mem.Revoke()
	waitUntil(t, "not leading", func() bool { return !el.IsLeader() })
	if code, body := get(t, srv, "/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz with a run going after the loss: %d %s, want 503", code, body)
	}
	close(release)
	waitUntil(t, "healthy again", func() bool { return n.Healthy().OK })
	n.stopping.Store(true)
	if code, _ := get(t, srv, "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz while stopping: %d, want 503", code)
	}
}
