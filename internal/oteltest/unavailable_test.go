package oteltest

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
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

// start calls Start on a TB of its own, in a goroutine that Fatalf or
// Skipf may end.
func start(t *testing.T) (*Collector, *stopTB) {
	r := &stopTB{TB: t}
	var c *Collector
	done := make(chan struct{})
	go func() {
		defer close(done)
		c = Start(r)
	}()
	<-done
	return c, r
}

// TestStart_NoBinary: with OTELCOL_BIN naming no file, Start skips the
// test, naming the binary and the build script; under
// BATON_TEST_REQUIRE=1 it fails it instead.
func TestStart_NoBinary(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "otelcol")
	t.Setenv("OTELCOL_BIN", missing)
	if _, err := Binary(); !errors.Is(err, ErrNoBinary) {
		t.Fatalf("Binary() error = %v, want one wrapping ErrNoBinary", err)
	}

	t.Setenv("BATON_TEST_REQUIRE", "")
	c, r := start(t)
	if c != nil || r.fatal != "" || !strings.Contains(r.skip, "no otelcol binary") || !strings.Contains(r.skip, "tools/otelcol/build.sh") {
		t.Errorf("without a binary: collector %v, fatal %q, skip %q; want a skip naming the binary and its build", c, r.fatal, r.skip)
	}

	t.Setenv("BATON_TEST_REQUIRE", "1")
	c, r = start(t)
	if c != nil || r.skip != "" || !strings.Contains(r.fatal, "BATON_TEST_REQUIRE=1") || !strings.Contains(r.fatal, "no otelcol binary") {
		t.Errorf("without a binary, required: collector %v, fatal %q, skip %q; want the failure", c, r.fatal, r.skip)
	}
}

// TestStart_ExitedFails: a binary that exits at once fails the test with
// its exit, without waiting out ReadyTimeout.
func TestStart_ExitedFails(t *testing.T) {
	bin, err := exec.LookPath("false")
	if err != nil {
		t.Skipf("no false(1): %v", err)
	}
	t.Setenv("OTELCOL_BIN", bin)
	began := time.Now()
	c, r := start(t)
	if c != nil || r.skip != "" || !strings.Contains(r.fatal, "otelcol exited: exit status 1") {
		t.Errorf("a collector that exits: collector %v, fatal %q, skip %q; want the failure naming its exit", c, r.fatal, r.skip)
	}
	if d := time.Since(began); d > ReadyTimeout/2 {
		t.Errorf("Start took %v to see the exit", d)
	}
}
