package httpapi

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
)

// TestRegistry_EntriesExpireByThePublishersHeartbeat: an entry carries
// its own expiry, set by its publisher from its publishing interval, and
// every reader judges it by that, whatever its own interval: an instance
// that publishes every 5 s and was seen 1 s ago is live to a node that
// publishes every 50 ms. An instance that crashed (its entry never
// removed) is shown as not live once its expiry passed, and is no longer
// listed, and is deleted by the leader, a minute after that: restarts do
// not fill the status with ghosts.
func TestRegistry_EntriesExpireByThePublishersHeartbeat(t *testing.T) {
	mem := memory.New(election.Timing{})
	store := mem.Control()
	now := time.Now().UTC()
	put := func(id string, seen, expires time.Time) {
		t.Helper()
		v, err := json.Marshal(map[string]any{"id": id, "eligible": true, "started": seen.Add(-time.Hour), "seen": seen, "expires": expires})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Put(context.Background(), control.Put{Key: "instance/" + id, Value: v, IfVersion: control.AnyVersion}); err != nil {
			t.Fatal(err)
		}
	}
	put("slow", now.Add(-time.Second), now.Add(14*time.Second))           // publishes every 5 s
	put("crashed-now", now.Add(-20*time.Second), now.Add(-5*time.Second)) // gone 5 s ago
	put("crashed-long-ago", now.Add(-3*time.Minute), now.Add(-3*time.Minute+15*time.Second))

	var rs jobRuns
	a := newCtlNode(t, mem, "a", "h", rs.job("report", "0 0 0 1 1 *"))
	startNode(t, a.n)
	waitUntil(t, "a leads", a.el.IsLeader)
	waitUntil(t, "a published", func() bool {
		for _, in := range a.n.Status(context.Background(), 0).Instances {
			if in.ID == "a" {
				return true
			}
		}
		return false
	})
	st := a.n.Status(context.Background(), 0)
	got := map[string]bool{}
	for _, in := range st.Instances {
		got[in.ID] = in.Live
	}
	want := map[string]bool{"a": true, "slow": true, "crashed-now": false}
	for id, live := range want {
		if l, ok := got[id]; !ok || l != live {
			t.Errorf("instance %s: listed %v, live %v; want listed, live %v (instances %+v)", id, ok, l, live, st.Instances)
		}
	}
	if _, ok := got["crashed-long-ago"]; ok {
		t.Errorf("an instance gone for over 2 minutes is still listed: %+v", st.Instances)
	}
	waitUntil(t, "the leader deletes the long-gone entry", func() bool {
		es, err := store.List(context.Background(), "instance/")
		if err != nil {
			return false
		}
		for _, e := range es {
			if e.Key == "instance/crashed-long-ago" {
				return false
			}
		}
		return true
	})
}
