package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/internal/proxytest"
)

// clusterOpts says how startCluster sets up a test's cluster.
type clusterOpts struct {
	label string // in the artifacts directory's name and message, after "e2e"
	nodes int    // node slots; 0 means the backend's own number
	// standby is how many of the last slots run their nodes with
	// --standby: they follow and never campaign.
	standby int
	// token, if set, is the admin token the nodes read from a file.
	token string
	// jobs returns the jobs file's content, once sc.runsPath is set.
	jobs func(be *backend, sc *scenario) string
	// be, if set, is a backend already running (shared by lanes), which
	// the caller stops.
	be *backend
}

// startCluster sets sc up on the backend name and starts its nodes: an
// artifacts directory (kept when the test fails or BATON_E2E_KEEP=1), the
// backend, the jobs file, one fault proxy per node slot and a node on
// each. It returns once a leader has run a job, and fails t if none does
// within the start-up bound. Everything is stopped when t ends.
func startCluster(t *testing.T, name string, sc *scenario, o clusterOpts) *proc {
	t.Helper()
	label := "e2e"
	if o.label != "" {
		label += " " + o.label
	}
	dir, err := os.MkdirTemp("", "baton-"+filepath.Base(label)+"-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	keep := os.Getenv("BATON_E2E_KEEP") == "1"
	t.Cleanup(func() {
		if t.Failed() || keep {
			fmt.Printf("%s %s: artifacts kept in %s\n", label, name, dir)
			return
		}
		os.RemoveAll(dir)
	})
	be := o.be
	if be == nil {
		be = startBackend(t, name, dir)
	}
	sc.t, sc.be, sc.dir = t, be, dir
	if sc.election == "" {
		sc.election = "e2e"
	}
	if sc.counts == nil {
		sc.counts = map[string]int{}
	}
	sc.runsPath, sc.jobsPath = filepath.Join(dir, "runs.log"), filepath.Join(dir, "jobs.yaml")
	if o.token != "" {
		tokenFile := filepath.Join(dir, "admin-token")
		if err := os.WriteFile(tokenFile, []byte(o.token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		sc.extraArgs = append(sc.extraArgs, "--admin-token-file", tokenFile)
	}
	if err := os.WriteFile(sc.jobsPath, []byte(o.jobs(be, sc)), 0o644); err != nil {
		t.Fatal(err)
	}
	nodes := o.nodes
	if nodes == 0 {
		nodes = be.nodes
	}
	for i := range nodes {
		s := &slot{i: i, standby: i >= nodes-o.standby}
		for _, target := range be.targetsOf(i) {
			px, err := proxytest.New(target)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { px.Close() })
			s.proxies = append(s.proxies, px)
		}
		sc.slots = append(sc.slots, s)
	}
	t.Cleanup(sc.cleanup)
	sc.started = time.Now()
	for _, s := range sc.slots {
		if _, err := sc.startProc(s); err != nil {
			t.Fatal(err)
		}
	}
	sc.note("info-start", name, "%d nodes, TTL %v, election %s, artifacts %s", nodes, be.ttl, sc.election, dir)
	l, ok := sc.settle(sc.started)
	if !ok {
		t.Fatalf("%s: no leader ran a job within the start-up bound; logs in %s", name, dir)
	}
	return l
}

// startBackend starts the backend name, its data in dir, and stops it when
// t ends.
func startBackend(t *testing.T, name, dir string) *backend {
	t.Helper()
	be, err := newBackend(context.Background(), name, dir)
	if errors.Is(err, envtest.ErrUnavailable) {
		envtest.Unavailable(t, "%v", err)
	}
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(be.close)
	return be
}
