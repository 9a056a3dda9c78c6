package backendtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
)

// The helpers below are the ones every backend's tests need around a
// single Acquire: take a lease or fail, release it and report an error,
// campaign in the background, look at a lease without blocking.

// TestIdentity is the identity the helpers campaign with: ID id, host
// "test" and the test process's PID.
func TestIdentity(id string) election.Identity {
	return election.Identity{ID: id, Host: "test", PID: os.Getpid()}
}

// Acquire campaigns on b as TestIdentity(id) and returns the lease. It
// blocks until b.Acquire returns or within has passed, and stops the test
// (t.Fatalf) if that is an error or a nil lease. Call it from the test's
// own goroutine.
func Acquire(t testing.TB, b election.Backend, id string, within time.Duration) election.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	l, err := b.Acquire(ctx, TestIdentity(id))
	if err != nil {
		t.Fatalf("%s: Acquire: %v", id, err)
	}
	if l == nil {
		t.Fatalf("%s: Acquire returned a nil lease and no error", id)
	}
	return l
}

// ReleaseTimeout bounds each Release call of the helpers.
const ReleaseTimeout = 5 * time.Second

// Release releases l, bounded by ReleaseTimeout, and reports an error with
// t.Errorf: the test goes on. It blocks until Release returns; use it
// in defer or t.Cleanup too.
func Release(t testing.TB, l election.Lease) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ReleaseTimeout)
	defer cancel()
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// Result is the outcome of an Acquire started by AcquireAsync.
type Result struct {
	// Lease and Err are what Acquire returned.
	Lease election.Lease
	Err   error
	// At is when Acquire returned, for measuring handovers.
	At time.Time
}

// AcquireAsync campaigns on b as TestIdentity(id) on a goroutine of its own
// and returns at once. The outcome arrives on the returned channel, which
// holds it (buffer of one) until it is received. ctx bounds the campaign;
// the goroutine ends when Acquire returns, so a test that cancels ctx and
// receives leaves nothing running. A lease received is the caller's to
// release.
func AcquireAsync(ctx context.Context, b election.Backend, id string) <-chan Result {
	ch := make(chan Result, 1)
	go func() {
		l, err := b.Acquire(ctx, TestIdentity(id))
		ch <- Result{Lease: l, Err: err, At: time.Now()}
	}()
	return ch
}

// Await receives the outcome of an AcquireAsync from ch, waiting at most
// within, and stops the test (t.Fatal with msg) if none arrives by then.
// It blocks; call it from the test's own goroutine.
func Await(t testing.TB, ch <-chan Result, within time.Duration, msg string) Result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(within):
		t.Fatal(msg)
		return Result{}
	}
}

// IsOpen reports whether l's term is still open (Done not closed). It
// does not block.
func IsOpen(l election.Lease) bool {
	select {
	case <-l.Done():
		return false
	default:
		return true
	}
}

// CheckFails runs c.Check, bounded by 10 s, for a backend that cannot
// work (wrong credentials, missing permissions, an unreachable server) and
// returns its error. It stops t (t.Fatal) if Check succeeds, and reports
// with t.Errorf a failure that took longer than within: such a backend
// must fail at start, quickly and clearly, not after a timeout.
func CheckFails(t testing.TB, c driver.Checker, within time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	err := c.Check(ctx)
	took := time.Since(start)
	if err == nil {
		t.Fatal("Check succeeded")
	}
	t.Logf("Check failed after %v: %v", took.Round(time.Millisecond), err)
	if took > within {
		t.Errorf("Check took %v, want a failure within %v", took.Round(time.Millisecond), within)
	}
	return err
}
