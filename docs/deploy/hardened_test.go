package deploy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/kubetest"
)

// hardened checks that the container named container of Deployment d
// runs as Kubernetes users expect of a small daemon: resource requests
// and limits, no root, no writes to its image, no privilege escalation,
// no capabilities, the runtime's seccomp profile.
func hardened(t *testing.T, file string, d map[string]any, container string) {
	t.Helper()
	pod := get(d, "spec", "template", "spec")
	var c any
	for i := 0; get(pod, "containers", i) != nil; i++ {
		if get(pod, "containers", i, "name") == container {
			c = get(pod, "containers", i)
		}
	}
	if c == nil {
		t.Fatalf("%s: no container %s", file, container)
	}
	for _, res := range []string{"cpu", "memory"} {
		for _, kind := range []string{"requests", "limits"} {
			if get(c, "resources", kind, res) == nil {
				t.Errorf("%s: container %s: no resources.%s.%s", file, container, kind, res)
			}
		}
	}
	for path, want := range map[string]any{
		"runAsNonRoot": true, "readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false,
	} {
		if got := get(c, "securityContext", path); got != want {
			t.Errorf("%s: container %s: securityContext.%s %v, want %v", file, container, path, got, want)
		}
	}
	if got := get(c, "securityContext", "capabilities", "drop", 0); got != "ALL" {
		t.Errorf("%s: container %s: securityContext.capabilities.drop %v, want [ALL]", file, container, get(c, "securityContext", "capabilities", "drop"))
	}
	if got := get(c, "securityContext", "seccompProfile", "type"); got != "RuntimeDefault" {
		t.Errorf("%s: container %s: securityContext.seccompProfile.type %v, want RuntimeDefault", file, container, got)
	}
	if u, ok := get(c, "securityContext", "runAsUser").(int); !ok || u == 0 {
		t.Errorf("%s: container %s: securityContext.runAsUser %v: want a user id other than 0 (runAsNonRoot needs a numeric user)", file, container, get(c, "securityContext", "runAsUser"))
	}
}

// pdbFor checks that docs hold a PodDisruptionBudget whose selector is
// the Deployment's, keeping at least one pod.
func pdbFor(t *testing.T, file string, docs []map[string]any) {
	t.Helper()
	var sel, pdbSel any
	var min any
	for _, d := range docs {
		switch d["kind"] {
		case "Deployment":
			sel = get(d, "spec", "selector", "matchLabels")
		case "PodDisruptionBudget":
			pdbSel, min = get(d, "spec", "selector", "matchLabels"), get(d, "spec", "minAvailable")
		}
	}
	a, _ := json.Marshal(sel)
	b, _ := json.Marshal(pdbSel)
	if pdbSel == nil || string(a) != string(b) || toInt(min) < 1 {
		t.Errorf("%s: PodDisruptionBudget selector %s minAvailable %v: want the Deployment's selector %s, at least 1", file, b, min, a)
	}
}

// leaderEvent waits for the LeaderElected Event on the Lease name whose
// message starts with want, as kubectl describe lease lists it.
func leaderEvent(t *testing.T, srv *kubetest.Server, name, want string) {
	t.Helper()
	q := url.Values{"fieldSelector": {"involvedObject.kind=Lease,involvedObject.name=" + name + ",reason=LeaderElected"}}
	var seen []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v1/namespaces/default/events?"+q.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+kubetest.Token)
		hc := srv.HTTPClient()
		resp, err := hc.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		var list struct {
			Items []struct{ Message string } `json:"items"`
		}
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		hc.CloseIdleConnections()
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		seen = seen[:0]
		for _, e := range list.Items {
			if strings.HasPrefix(e.Message, want) {
				return
			}
			seen = append(seen, e.Message)
		}
	}
	t.Errorf("no LeaderElected Event %q on Lease %s within 20 s; Events: %q", want, name, seen)
}
