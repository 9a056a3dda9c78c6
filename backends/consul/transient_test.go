package consul_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/backends/consul"
	"github.com/batonhq/baton/backendtest"
)

// TestLease_Transient500KeepsTerm answers renewals and the watch's
// blocking queries with 500 for a while: the term must survive (the
// renew loop retries until the local deadline; api.Lock with
// MonitorRetries 0 would drop it on one 500).
func TestLease_Transient500KeepsTerm(t *testing.T) {
	a := sharedAgent(t)
	target, _ := url.Parse("http://" + a.HTTPAddr)
	rp := httputil.NewSingleHostReverseProxy(target)
	var failRenews, failedRenews, failedWatches, okRenews atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/session/renew/") {
			if failRenews.Add(-1) >= 0 {
				failedRenews.Add(1)
				http.Error(w, "injected", http.StatusInternalServerError)
				return
			}
			okRenews.Add(1)
		}
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/kv/") && r.URL.Query().Get("index") != "" && failRenews.Load() > 0 {
			failedWatches.Add(1)
			http.Error(w, "injected", http.StatusInternalServerError)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer srv.Close()
	cfg := api.DefaultNonPooledConfig()
	cfg.Address = srv.Listener.Addr().String()
	client, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := consul.New(consul.Config{Client: client, Key: newKey(t), Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	l := backendtest.Acquire(t, b, "a", 30*time.Second)
	defer backendtest.Release(t, l)
	failRenews.Store(2)
	waitFor(t, 3*consul.DefaultTTL, "two failed renewals and a good one", func() bool {
		return failedRenews.Load() >= 2 && okRenews.Load() >= 1
	})
	select {
	case <-l.Done():
		t.Fatalf("term ended after transient 500s: %v", l.Err())
	default:
	}
	t.Logf("term survived %d renewals and %d blocking queries answered 500", failedRenews.Load(), failedWatches.Load())
}
