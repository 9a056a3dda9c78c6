// Package fencetest is a kit to run against your own guarded resource: it
// proves that a write with an older token after a newer one is refused,
// in order and under concurrent writers.
//
//	func TestInvoicesFenced(t *testing.T) {
//		fencetest.Run(t, fencetest.Config{Election: "billing", Write: writeInvoice})
//	}
//
// Write is your write with its guard, on a resource named by the kit (a
// fresh name per run, so that earlier runs' fences do not interfere).
package fencetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/fence"
)

// Config is what Run needs.
type Config struct {
	// Election is the election your guard accepts.
	Election string
	// Write performs your guarded write of resource with tok: nil when
	// written, an error wrapping fence.ErrStale when the guard refused
	// it, fence.ErrRetry when the transaction must run again (Run
	// retries it, up to 100 times), any other error fails the test.
	Write func(ctx context.Context, resource string, tok fence.Token) error
	// Read, optional, returns the token of the write that resource holds
	// now (as your write stored it): Run then checks that the resource
	// holds the newest token written, not only that errors were returned.
	Read func(ctx context.Context, resource string) (uint64, error)
	// Writers is how many concurrent writers the concurrent part runs
	// (8 when 0), Rounds how many rounds (20 when 0).
	Writers, Rounds int
	// Timeout bounds each write (30 s when 0).
	Timeout time.Duration
}

// Run runs the kit's parts as subtests of t: Ordered (token n+1 written,
// then n refused, then n+1 again accepted) and Concurrent (writers with
// tokens in a random order: a write that starts after a newer token's
// write has returned must be refused).
func Run(t *testing.T, c Config) {
	t.Helper()
	if c.Write == nil || c.Election == "" {
		t.Fatalf("fencetest: Config.Write and Config.Election are required (Election %q)", c.Election)
	}
	if c.Writers <= 0 {
		c.Writers = 8
	}
	if c.Rounds <= 0 {
		c.Rounds = 20
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	t.Run("Ordered", func(t *testing.T) { ordered(t, c) })
	t.Run("Concurrent", func(t *testing.T) { concurrent(t, c) })
}

// Resource returns a fresh resource name with prefix.
func Resource(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// maxRetries bounds the retries of one write after fence.ErrRetry.
const maxRetries = 100

// write calls c.Write until it returns anything but fence.ErrRetry, at
// most 1+maxRetries times.
func (c Config) write(resource string, n uint64) error {
	var err error
	for range 1 + maxRetries {
		ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
		err = c.Write(ctx, resource, fence.Token{Election: c.Election, N: n})
		cancel()
		if !errors.Is(err, fence.ErrRetry) {
			return err
		}
	}
	return fmt.Errorf("token %d: still fence.ErrRetry after %d retries: %w", n, maxRetries, err)
}

func (c Config) holds(t *testing.T, resource string, want uint64) {
	t.Helper()
	if c.Read == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	got, err := c.Read(ctx, resource)
	if err != nil {
		t.Fatalf("Read %s: %v", resource, err)
	}
	if got != want {
		t.Errorf("resource %s holds the write of token %d; want %d, the newest written", resource, got, want)
	}
}

func ordered(t *testing.T, c Config) {
	r := Resource("fencetest-ordered-")
	if err := c.write(r, 7); err != nil {
		t.Fatalf("write token 7: %v", err)
	}
	if err := c.write(r, 8); err != nil {
		t.Fatalf("write token 8 after 7: %v", err)
	}
	err := c.write(r, 7)
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("write token 7 after 8: %v; want an error wrapping fence.ErrStale", err)
	}
	c.holds(t, r, 8)
	if err := c.write(r, 8); err != nil {
		t.Errorf("token 8 again (a term writes many times): %v", err)
	}
	err = c.Write(context.Background(), r, fence.Token{Election: c.Election + "-other", N: 9})
	if !errors.Is(err, fence.ErrOtherElection) {
		t.Errorf("a token of election %q: %v; want an error wrapping fence.ErrOtherElection", c.Election+"-other", err)
	}
	c.holds(t, r, 8)
}

func concurrent(t *testing.T, c Config) {
	var refused, written atomic.Int64
	for round := range c.Rounds {
		r := Resource(fmt.Sprintf("fencetest-%d-", round))
		perm := mrand.Perm(c.Writers)
		var done atomic.Uint64 // the newest token whose write has returned nil
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, p := range perm {
			n := uint64(p + 1)
			wg.Go(func() {
				before := done.Load()
				err := c.write(r, n)
				switch {
				case err == nil:
					written.Add(1)
					if n < before {
						t.Errorf("round %d: token %d written after token %d's write had returned", round, n, before)
					}
					mu.Lock()
					if n > done.Load() {
						done.Store(n)
					}
					mu.Unlock()
				case errors.Is(err, fence.ErrStale):
					refused.Add(1)
				default:
					t.Errorf("round %d: token %d: %v", round, n, err)
				}
			})
		}
		wg.Wait()
		if done.Load() != uint64(c.Writers) {
			t.Errorf("round %d: the newest token written is %d; want %d: the newest write must pass", round, done.Load(), c.Writers)
		}
		c.holds(t, r, uint64(c.Writers))
	}
	t.Logf("%d rounds of %d writers: %d written, %d refused as stale", c.Rounds, c.Writers, written.Load(), refused.Load())
}
