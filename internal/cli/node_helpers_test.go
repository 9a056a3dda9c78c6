package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/node"
)

// The helpers of the tests that run a node on a jobs file.

var (
	waitUntil = testenv.WaitUntil
	post      = testenv.Post
)

// startNode runs n until the test ends.
func startNode(t *testing.T, n *node.Node) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = n.Run(ctx, nil) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// memStatus reads srv's /status.
func memStatus(t *testing.T, srv *httptest.Server) node.Status {
	t.Helper()
	resp, err := http.Get(srv.URL + "/status?history=5")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var st node.Status
	if err := json.Unmarshal(b, &st); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/status: %d %v\n%s", resp.StatusCode, err, b)
	}
	return st
}
