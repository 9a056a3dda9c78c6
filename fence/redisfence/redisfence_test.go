package redisfence_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/fence"
	"github.com/batonhq/baton/fence/fencetest"
	"github.com/batonhq/baton/fence/redisfence"
	"github.com/batonhq/baton/internal/redistest"
)

func client(t *testing.T, s *redistest.Server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), PoolSize: 32})
	t.Cleanup(func() { c.Close() })
	return c
}

func tok(n uint64) fence.Token { return fence.Token{Election: "reports", N: n} }

// The kit on a guarded SET and a guarded HSET (the seed's lock owner
// check and write as one step).
func TestGuard_Kit(t *testing.T) {
	c := client(t, redistest.Start(t))
	g := &redisfence.Guard{Client: c, Election: "reports"}
	t.Run("Set", func(t *testing.T) {
		fencetest.Run(t, fencetest.Config{Election: "reports", Writers: 16, Rounds: 50,
			Write: func(ctx context.Context, r string, tok fence.Token) error {
				return g.Set(ctx, r, tok, "data:"+r, strconv.FormatUint(tok.N, 10), 0)
			},
			Read: func(ctx context.Context, r string) (uint64, error) {
				return c.Get(ctx, "data:"+r).Uint64()
			}})
	})
	t.Run("HSet", func(t *testing.T) {
		fencetest.Run(t, fencetest.Config{Election: "reports", Writers: 16, Rounds: 50,
			Write: func(ctx context.Context, r string, tok fence.Token) error {
				return g.HSet(ctx, r, tok, "lock:"+r, "owner", strconv.FormatUint(tok.N, 10))
			},
			Read: func(ctx context.Context, r string) (uint64, error) {
				return c.HGet(ctx, "lock:"+r, "owner").Uint64()
			}})
	})
}

// Two writers n and n+1 in each order; the older's write after the
// newer's leaves the key as the newer wrote it, TTL included.
func TestGuard_Orders(t *testing.T) {
	ctx := context.Background()
	c := client(t, redistest.Start(t))
	g := &redisfence.Guard{Client: c, Election: "reports"}
	if err := g.Set(ctx, "job", tok(4), "job:status", "RUNNING by 4", 0); err != nil {
		t.Fatal(err)
	}
	if err := g.Set(ctx, "job", tok(5), "job:status", "RUNNING by 5", 0); err != nil {
		t.Fatalf("newer after older: %v", err)
	}
	err := g.Set(ctx, "job", tok(4), "job:status", "COMPLETED by 4", 0)
	var se *fence.StaleError
	if !errors.As(err, &se) || se.Fence.N != 5 {
		t.Fatalf("older after newer: %v; want a StaleError naming token 5", err)
	}
	t.Log(err)
	if v, _ := c.Get(ctx, "job:status").Result(); v != "RUNNING by 5" {
		t.Errorf("job:status = %q; want the newer's write", v)
	}
	if err := g.HSet(ctx, "job", tok(3), "job:lock", "owner", "3"); !errors.Is(err, fence.ErrStale) {
		t.Errorf("HSet with token 3: %v; want ErrStale", err)
	}
	if n, _ := c.Exists(ctx, "job:lock").Result(); n != 0 {
		t.Errorf("a refused HSet wrote job:lock")
	}
	if err := g.Set(ctx, "job", fence.Token{Election: "billing", N: 99}, "job:status", "x", 0); !errors.Is(err, fence.ErrOtherElection) {
		t.Errorf("token of election billing: %v; want ErrOtherElection", err)
	}
	if err := g.Set(ctx, "ttl", tok(1), "job:ttl", "x", 60000*1e6); err != nil {
		t.Fatal(err)
	}
	if d, _ := c.PTTL(ctx, "job:ttl").Result(); d <= 0 {
		t.Errorf("Set with a TTL: PTTL %v", d)
	}
	// Tokens beyond 2^53 compare exactly.
	big := uint64(1)<<60 + 1
	if err := g.Advance(ctx, "big", tok(big)); err != nil {
		t.Fatal(err)
	}
	if err := g.Advance(ctx, "big", tok(big-1)); !errors.Is(err, fence.ErrStale) {
		t.Errorf("token 2^60 after 2^60+1: %v; want ErrStale", err)
	}
}

// The Redis guard is a Store for fence.Middleware: a request with an
// older token than one already answered gets 409.
func TestGuard_Middleware(t *testing.T) {
	g := &redisfence.Guard{Client: client(t, redistest.Start(t)), Election: "reports"}
	var store fence.Store = g
	s := httptest.NewServer(fence.Middleware(store, "reports", fence.Fixed("invoices"),
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })))
	defer s.Close()
	for _, c := range []struct {
		election, token string
		want            int
	}{{"reports", "3", 204}, {"reports", "2", 409}, {"billing", "9", 409}, {"reports", "3", 204}} {
		req, _ := http.NewRequest(http.MethodPost, s.URL, nil)
		req.Header.Set("Baton-Election", c.election)
		req.Header.Set("Baton-Token", c.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("election %s token %s: HTTP %d; want %d", c.election, c.token, resp.StatusCode, c.want)
		}
	}
}
