package envtest

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
)

// stopTB records the Fatalf or Skipf that ends a call, as testing would.
type stopTB struct {
	testing.TB
	fatal, skip string
}

func (r *stopTB) Helper() {}
func (r *stopTB) Fatalf(f string, a ...any) {
	r.fatal = fmt.Sprintf(f, a...)
	runtime.Goexit()
}
func (r *stopTB) Skipf(f string, a ...any) {
	r.skip = fmt.Sprintf(f, a...)
	runtime.Goexit()
}

// get calls s.Get on a TB of its own, in a goroutine that Fatalf or
// Skipf may end.
func get[S any](t *testing.T, s *Shared[S]) (S, *stopTB) {
	r := &stopTB{TB: t}
	var got S
	done := make(chan struct{})
	go func() {
		defer close(done)
		got = s.Get(r)
	}()
	<-done
	return got, r
}

func TestShared_StartsOnceStopsAndRemoves(t *testing.T) {
	starts, stops := 0, 0
	var dir string
	s := &Shared[string]{What: "thing", Dir: "envtest-shared-",
		Start: func(d string) (string, error) { starts++; dir = d; return "srv:" + d, nil },
		Stop:  func(string) { stops++ }}
	a, r1 := get(t, s)
	b, r2 := get(t, s)
	if a != b || a != "srv:"+dir || starts != 1 || r1.fatal+r1.skip+r2.fatal+r2.skip != "" {
		t.Fatalf("Get twice = %q, %q after %d starts (%+v %+v)", a, b, starts, r1, r2)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the server's directory: %v", err)
	}
	s.Close()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) || stops != 1 {
		t.Errorf("after Close: %d stops, directory %v; want 1 stop and no directory", stops, err)
	}
}

func TestShared_StartErrorSkipsOrFails(t *testing.T) {
	boom := func(string) (string, error) { return "", errors.New("boom") }
	t.Setenv("BATON_TEST_REQUIRE", "")
	s := &Shared[string]{What: "thing", Dir: "envtest-shared-", Start: boom, Stop: func(string) { t.Error("stopped a server that never started") }}
	if _, r := get(t, s); r.fatal != "" || !strings.Contains(r.skip, "thing: boom") {
		t.Errorf("a server that cannot start: fatal %q, skip %q; want a skip naming it", r.fatal, r.skip)
	}
	s.Close()
	f := &Shared[string]{What: "go build", Dir: "envtest-shared-", Start: boom, Fail: true}
	if _, r := get(t, f); r.skip != "" || r.fatal != "go build: boom" {
		t.Errorf("with Fail: fatal %q, skip %q; want the failure", r.fatal, r.skip)
	}
	f.Close()
}
