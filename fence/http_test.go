package fence_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/batonhq/baton/fence"
	"github.com/batonhq/baton/fence/fencetest"
	"github.com/batonhq/baton/internal/dbtest"
)

// post sends a request from baton with election and token to url and
// maps the answer to the kit's errors.
func post(ctx context.Context, url string, tok fence.Token) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/invoices", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Baton-Election", tok.Election)
	req.Header.Set("Baton-Token", strconv.FormatUint(tok.N, 10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	switch {
	case resp.StatusCode == http.StatusNoContent:
		return resp.StatusCode, nil
	case resp.StatusCode == http.StatusConflict && strings.Contains(string(body), "another election"):
		return resp.StatusCode, fmt.Errorf("%w: %s", fence.ErrOtherElection, body)
	case resp.StatusCode == http.StatusConflict:
		return resp.StatusCode, fmt.Errorf("%w: %s", fence.ErrStale, body)
	}
	return resp.StatusCode, fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
}

// server runs the middleware on store in front of a handler that checks
// it was given the token.
func server(t *testing.T, store fence.Store) string {
	t.Helper()
	h := fence.Middleware(store, "reports", func(r *http.Request) string { return r.URL.Path }, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := fence.TokenFromRequest(r)
		if !ok || tok.Election != "reports" || tok.N == 0 {
			http.Error(w, "no token in the request's context", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}

func TestMiddleware(t *testing.T) {
	pg := dbtest.OpenT(t, dbtest.Postgres)
	guard := &fence.SQL{Dialect: fence.Postgres, Table: dbtest.NewName("fence_http_"), Election: "reports"}
	if err := guard.Migrate(context.Background(), pg.Admin); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pg.Admin.Exec("DROP TABLE " + guard.Table) })
	for name, store := range map[string]fence.Store{
		"Memory":   &fence.Memory{Election: "reports"},
		"Postgres": fence.SQLStore{DB: pg.Admin, Guard: guard},
	} {
		t.Run(name, func(t *testing.T) {
			url := server(t, store)
			ctx := context.Background()
			if _, err := post(ctx, url, tok(10)); err != nil {
				t.Fatal(err)
			}
			if code, err := post(ctx, url, tok(9)); code != http.StatusConflict || !errors.Is(err, fence.ErrStale) {
				t.Errorf("token 9 after 10: %d %v; want 409, stale", code, err)
			}
			if code, err := post(ctx, url, fence.Token{Election: "billing", N: 11}); code != http.StatusConflict || !errors.Is(err, fence.ErrOtherElection) {
				t.Errorf("token of billing: %d %v; want 409, another election", code, err)
			}
			req, _ := http.NewRequest(http.MethodPost, url, nil)
			req.Header.Set("Baton-Token", "ten")
			req.Header.Set("Baton-Election", "reports")
			if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusBadRequest {
				t.Errorf("Baton-Token ten: %v %v; want 400", resp, err)
			} else {
				resp.Body.Close()
			}
			// The kit, through HTTP: a request that arrives after a newer
			// one was answered is refused.
			fencetest.Run(t, fencetest.Config{Election: "reports", Rounds: 5,
				Write: func(ctx context.Context, resource string, tok fence.Token) error {
					_, err := post(ctx, url+"/"+resource, tok)
					return err
				}})
		})
	}
}
