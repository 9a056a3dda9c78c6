package kube

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"sync"
	"time"
)

// Labels on every object the backend creates, so that
// kubectl get leases,configmaps -l app.kubernetes.io/managed-by=baton
// lists them, and -l baton.dev/election=NAME those of one election.
const (
	labelManagedBy = "app.kubernetes.io/managed-by"
	labelElection  = "baton.dev/election"
)

// labelValue is what a label's value may be: at most 63 characters.
var labelValue = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)

// electionLabels are the labels of an election's objects; an election
// name longer than a label value may be gets the managed-by label only.
func electionLabels(name string) map[string]string {
	l := map[string]string{labelManagedBy: "baton"}
	if labelValue.MatchString(name) {
		l[labelElection] = name
	}
	return l
}

// forElection returns a Client like c (the same connections and
// credentials) that sets the election's labels on the objects it
// creates.
func (c *Client) forElection(name string) *Client {
	return &Client{server: c.server, http: c.http, token: c.token, tokenFile: c.tokenFile, tokenFunc: c.tokenFunc,
		timeout: c.timeout, labels: electionLabels(name)}
}

// label adds c's labels to o, keeping those o has.
func (c *Client) label(o *object) {
	if len(c.labels) == 0 {
		return
	}
	m := o.meta()
	ls, _ := m["labels"].(map[string]any)
	if ls == nil {
		ls = map[string]any{}
		m["labels"] = ls
	}
	for k, v := range c.labels {
		if _, ok := ls[k]; !ok {
			ls[k] = v
		}
	}
}

var events = kind{"", "v1", "events", "Event"}

// ReasonLeaderElected is the reason of the Event a new baton leader
// records on the Lease.
const ReasonLeaderElected = "LeaderElected"

// eventBound is how long recording the Event may take.
const eventBound = 5 * time.Second

// announcer records, best-effort, the Event of one term's start: in a
// goroutine of its own, so that it never delays or fails the term, and
// which the term's release stops and waits for.
type announcer struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// announce starts recording that id took the Lease (object took) with
// token, after prev ("" if none is known).
func (a *announcer) announce(b *Backend, took *object, id, prev string, token uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), eventBound)
	done := make(chan struct{})
	a.mu.Lock()
	a.cancel, a.done = cancel, done
	a.mu.Unlock()
	go func() {
		defer close(done)
		defer cancel()
		err := b.recordLeader(ctx, took, id, prev, token)
		switch {
		case isCode(err, http.StatusForbidden):
			b.log.Warn("the leadership Event was not recorded: grant create on events to record it", "err", err)
		case err != nil:
			b.log.Debug("the leadership Event was not recorded", "err", err)
		}
	}()
}

// stop ends the recording, if one runs, and waits for it.
func (a *announcer) stop() {
	a.mu.Lock()
	cancel, done := a.cancel, a.done
	a.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// recordLeader creates a core v1 Event on the Lease, which
// kubectl describe lease and kubectl get events show.
func (b *Backend) recordLeader(ctx context.Context, took *object, id, prev string, token uint64) error {
	msg := fmt.Sprintf("%s became leader with fencing token %d", id, token)
	if prev != "" && prev != id {
		msg += fmt.Sprintf(" (after %s)", prev)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	o := events.newObject(b.ns, "")
	m := o.meta()
	delete(m, "name")
	m["generateName"] = b.name + "."
	o.raw["involvedObject"] = map[string]any{
		"apiVersion": leases.apiVersion(), "kind": leases.kind, "namespace": b.ns, "name": b.name,
		"uid": took.uid(), "resourceVersion": took.resourceVersion(),
	}
	o.raw["reason"] = ReasonLeaderElected
	o.raw["message"] = msg
	o.raw["type"] = "Normal"
	o.raw["source"] = map[string]any{"component": "baton"}
	o.raw["firstTimestamp"], o.raw["lastTimestamp"], o.raw["count"] = now, now, 1
	_, err := b.c.create(ctx, events, b.ns, o)
	return err
}
