package appcheck

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The verdict needs UnhealthyAfter failures in a row to go down and
// HealthyAfter successes in a row to come back; the first check decides
// alone. The campaign gate is stricter: it closes on the first failed
// check (an instance whose app may be down does not take over) and opens
// with the verdict's next good check. A change of either is reported.
func TestRecord_Hysteresis(t *testing.T) {
	c, err := New(Config{URL: "http://127.0.0.1:1/healthz", UnhealthyAfter: 3, HealthyAfter: 2})
	if err != nil {
		t.Fatal(err)
	}
	bad := errors.New("GET http://127.0.0.1:1/healthz: connection refused")
	now := time.Unix(1000, 0)
	steps := []struct {
		err     error
		healthy bool
		gate    string // "" while the instance may campaign
		changed bool
	}{
		{nil, true, "", true}, // the first check decides
		{bad, true, "app suspect: " + bad.Error() + " (1 failed check in a row)", true},
		{bad, true, "app suspect: " + bad.Error() + " (2 failed checks in a row)", false},
		{nil, true, "", true}, // a success resets the failures
		{bad, true, "app suspect: " + bad.Error() + " (1 failed check in a row)", true},
		{bad, true, "app suspect: " + bad.Error() + " (2 failed checks in a row)", false},
		{bad, false, "app unhealthy: " + bad.Error() + " (3 checks)", true}, // third failure in a row
		{nil, false, "app unhealthy: " + bad.Error() + " (then 1 good check)", false},
		{bad, false, "app unhealthy: " + bad.Error() + " (1 check)", false}, // a failure resets the successes
		{nil, false, "app unhealthy: " + bad.Error() + " (then 1 good check)", false},
		{nil, true, "", true}, // second success in a row
	}
	for i, s := range steps {
		now = now.Add(time.Second)
		st, changed := c.record(s.err, now)
		if st.Healthy != s.healthy || st.Gate() != s.gate || changed != s.changed {
			t.Fatalf("step %d (err %v): healthy %v gate %q changed %v, want %v %q %v", i, s.err, st.Healthy, st.Gate(), changed, s.healthy, s.gate, s.changed)
		}
	}
	c2, _ := New(Config{Addrs: []string{"127.0.0.1:1"}})
	if st := c2.State(); st.Healthy || st.Why() != "app unhealthy: tcp 127.0.0.1:1: not checked yet" {
		t.Errorf("before the first check: %+v %q", st, st.Why())
	}
	if st, _ := c2.record(bad, now); st.Healthy || st.Why() != "app unhealthy: "+bad.Error()+" (1 check)" {
		t.Errorf("first check failed: %q", st.Why())
	}
}

// Real checks against a real server: a 2xx is healthy, a 503 and a
// refused connection are not, with the reason a person reads.
func TestRun_RealServer(t *testing.T) {
	var code atomic.Int32
	code.Store(200)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(int(code.Load())) }))
	defer srv.Close()
	c, err := New(Config{URL: srv.URL + "/healthz", Interval: 20 * time.Millisecond, UnhealthyAfter: 2, HealthyAfter: 2})
	if err != nil {
		t.Fatal(err)
	}
	changes := make(chan State, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx, func(s State) { changes <- s }) }()
	defer func() { cancel(); <-done }()
	want := func(healthy bool, reason string) {
		t.Helper()
		// A healthy app's first failed check closes the gate before
		// the verdict turns: the suspect state comes first.
		for {
			select {
			case s := <-changes:
				if s.Healthy && strings.HasPrefix(s.Gate(), "app suspect: ") {
					continue
				}
				if s.Healthy != healthy || !strings.Contains(s.Reason, reason) || (healthy && s.Gate() != "") {
					t.Fatalf("change: %+v, want healthy %v, reason with %q", s, healthy, reason)
				}
				return
			case <-time.After(10 * time.Second):
				t.Fatalf("no change to healthy=%v within 10 s", healthy)
			}
		}
	}
	want(true, "")
	code.Store(503)
	want(false, "GET "+srv.URL+"/healthz: HTTP 503")
	code.Store(204)
	want(true, "")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	tc, _ := New(Config{Addrs: []string{addr}, Interval: 20 * time.Millisecond})
	if err := tc.check(context.Background()); err == nil || err.Error() != "tcp "+addr+": connection refused" {
		t.Errorf("tcp check of a closed port: %v", err)
	}
}

// Bad configurations name the field and the value.
func TestNew_Errors(t *testing.T) {
	_, err := New(Config{URL: "http://x/", Addrs: []string{"x:1"}, Interval: -time.Second, HealthyAfter: -1})
	for _, want := range []string{"set exactly one of URL and Addrs", "Interval -1s: must not be negative", "HealthyAfter -1: must not be negative"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v: want %q", err, want)
		}
	}
}
