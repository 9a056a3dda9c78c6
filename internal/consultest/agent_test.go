package consultest_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/internal/consultest"
	"github.com/batonhq/baton/internal/envtest"
)

// TestAgent_DataDirRestartKeepsState starts a server with a data
// directory, writes a key, restarts the server and checks that the key
// survived on the same address and that indexes kept rising, which a dev
// agent cannot do.
func TestAgent_DataDirRestartKeepsState(t *testing.T) {
	if _, err := consultest.Binary(); err != nil {
		envtest.Unavailable(t, "%v", err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, err := consultest.Start(ctx, consultest.Options{DataDir: dir, NodeName: "baton-restart"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	addr := a.HTTPAddr
	c, err := a.Client("")
	if err != nil {
		t.Fatal(err)
	}
	kv := c.KV()
	if _, err := kv.Put(&api.KVPair{Key: "baton/restart", Value: []byte("before")}, nil); err != nil {
		t.Fatal(err)
	}
	before, _, err := kv.Get("baton/restart", nil)
	if err != nil || before == nil {
		t.Fatalf("get before restart: %v, %v", before, err)
	}

	if err := a.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if a.HTTPAddr != addr {
		t.Fatalf("HTTPAddr changed across Restart: %s, then %s", addr, a.HTTPAddr)
	}
	after, _, err := kv.Get("baton/restart", nil)
	if err != nil || after == nil || string(after.Value) != "before" {
		t.Fatalf("get after restart: %v, %v; want the value written before", after, err)
	}
	if _, err := kv.Put(&api.KVPair{Key: "baton/restart", Value: []byte("after")}, nil); err != nil {
		t.Fatal(err)
	}
	again, _, err := kv.Get("baton/restart", nil)
	if err != nil || again == nil {
		t.Fatalf("get after second put: %v, %v", again, err)
	}
	if again.ModifyIndex <= before.ModifyIndex {
		t.Fatalf("ModifyIndex went from %d to %d across a restart; want it to rise", before.ModifyIndex, again.ModifyIndex)
	}

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); err != nil {
		t.Fatalf("Close removed the data directory: %v", err)
	}
}

// TestAgent_RestartNeedsDataDir checks that a dev agent, which keeps its
// state in memory, refuses Restart.
func TestAgent_RestartNeedsDataDir(t *testing.T) {
	a := consultest.StartT(t)
	if err := a.Restart(context.Background()); err == nil {
		t.Fatal("Restart of a dev agent: no error")
	}
}
