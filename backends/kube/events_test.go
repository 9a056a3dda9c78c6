package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/kube"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/kubetest"
)

// getJSON GETs path from the package's server as its administrator.
func getJSON(t *testing.T, path string, out any) {
	t.Helper()
	s := server(t)
	req, _ := http.NewRequest(http.MethodGet, s.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+kubetest.Token)
	hc := s.HTTPClient()
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}

type eventList struct {
	Items []struct {
		Reason, Message, Type string
		InvolvedObject        struct{ Kind, Name, UID string } `json:"involvedObject"`
	} `json:"items"`
}

// A leadership change shows as an Event on the Lease (what kubectl
// describe lease and kubectl get events show), naming the new leader and
// its token; the Lease and ConfigMaps baton creates carry its labels.
func TestEvents_LeaderElectedOnTheLease(t *testing.T) {
	name := leaseName(t)
	b := newBackend(t, kube.Config{Name: name, Timing: election.Timing{TTL: 10 * time.Second}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var tokens []uint64
	for _, id := range []string{"node-a", "node-b"} {
		l, err := b.Acquire(ctx, election.Identity{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, l.Token())
		// The Event is recorded beside the term: wait for it before the
		// release, which stops a recording still under way.
		waitEvents(t, name, len(tokens))
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	evs := waitEvents(t, name, 2)
	for i, id := range []string{"node-a", "node-b"} {
		want := fmt.Sprintf("%s became leader with fencing token %d", id, tokens[i])
		found := false
		for _, e := range evs.Items {
			if e.Reason == kube.ReasonLeaderElected && e.Type == "Normal" && e.InvolvedObject.Kind == "Lease" && strings.HasPrefix(e.Message, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("no LeaderElected Event %q on Lease %s: %+v", want, name, evs.Items)
		}
	}
	t.Logf("events: %+v", evs.Items)

	var lease, terms struct {
		Metadata struct{ Labels map[string]string } `json:"metadata"`
	}
	getJSON(t, "/apis/coordination.k8s.io/v1/namespaces/default/leases/"+name, &lease)
	getJSON(t, "/api/v1/namespaces/default/configmaps/"+name+"-terms", &terms)
	for what, ls := range map[string]map[string]string{"Lease": lease.Metadata.Labels, "ConfigMap -terms": terms.Metadata.Labels} {
		if ls["app.kubernetes.io/managed-by"] != "baton" || ls["baton.dev/election"] != name {
			t.Errorf("%s labels %v: want app.kubernetes.io/managed-by=baton and baton.dev/election=%s", what, ls, name)
		}
	}
}

// waitEvents waits until the Lease name has n Events, and returns them.
func waitEvents(t *testing.T, name string, n int) eventList {
	t.Helper()
	q := url.Values{"fieldSelector": {"involvedObject.kind=Lease,involvedObject.name=" + name}}
	var evs eventList
	for deadline := time.Now().Add(20 * time.Second); ; {
		evs = eventList{}
		getJSON(t, "/api/v1/namespaces/default/events?"+q.Encode(), &evs)
		if len(evs.Items) >= n || time.Now().After(deadline) {
			return evs
		}
		time.Sleep(50 * time.Millisecond)
	}
}
