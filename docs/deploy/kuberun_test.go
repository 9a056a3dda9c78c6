package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/backends/kube"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/httpapi"
	"github.com/batonhq/baton/internal/cli"
	"github.com/batonhq/baton/internal/kubetest"
	"github.com/batonhq/baton/ledger"
)

// kube-run.yaml is accepted by a real kube-apiserver (server-side dry
// run); its config is one a node accepts, on the kube backend, with a
// grace period above the shutdown budget; and with its ServiceAccount,
// Role and RoleBinding created, the backend runs as that ServiceAccount:
// it leads, claims ticks in ledger shards across the whole range,
// finishes them, reads them back, keeps job control, and is refused a
// ConfigMap the Role does not name.
func TestKubeRun(t *testing.T) {
	const token = "billing-baton-sa-token"
	srv := kubetest.StartT(t, kubetest.Options{Users: map[string]string{token: "system:serviceaccount:default:billing-baton"}})
	var cfgData string
	var grace int
	docs := applyDocs(t, srv, "kube-run.yaml")
	pdbFor(t, "kube-run.yaml", docs)
	for _, d := range docs {
		switch d["kind"] {
		case "ConfigMap":
			cfgData, _ = get(d, "data", "baton.yaml").(string)
		case "Deployment":
			hardened(t, "kube-run.yaml", d, "baton")
			grace, _ = get(d, "spec", "template", "spec", "terminationGracePeriodSeconds").(int)
			if sa := get(d, "spec", "template", "spec", "serviceAccountName"); sa != "billing-baton" {
				t.Errorf("the Deployment's serviceAccountName %v, want billing-baton", sa)
			}
		}
	}
	f, set := config(t, "baton.yaml", []byte(cfgData))
	if set["backend.kind"] != "kube" {
		t.Fatalf("backend.kind %q, want kube", set["backend.kind"])
	}
	if budget := httpapi.ShutdownBudget(cli.ShutdownConfigOf(f)); time.Duration(grace)*time.Second <= budget {
		t.Errorf("terminationGracePeriodSeconds %d: not above baton's shutdown budget %v", grace, budget)
	}
	name := set["election.name"]

	c := clientAs(t, srv, token)
	b, err := kube.New(kube.Config{Client: c, Name: name, Timing: election.Timing{TTL: 3 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := b.Check(ctx); err != nil {
		t.Fatalf("Check as the ServiceAccount: %v", err)
	}
	l, err := b.Acquire(ctx, election.Identity{ID: "pod-0"})
	if err != nil {
		t.Fatalf("Acquire as the ServiceAccount: %v", err)
	}
	defer l.Release(context.Background())
	// 1,000 jobs fall in every one of the 16 ledger shards and the 64
	// history shards (all but surely: a history shard misses them all
	// with odds of 64 × (63/64)^1000 ≈ 1e-5). Seven instants make every
	// ledger entry move runs to its history shard (after 4 to 7 runs).
	led := b.Ledger()
	base := time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC)
	var jobs []string
	for i := range 1000 {
		jobs = append(jobs, fmt.Sprintf("job-%d", i))
	}
	if _, err := led.LastClaimed(ctx, jobs); err != nil {
		t.Fatalf("LastClaimed as the ServiceAccount: %v", err)
	}
	const instants = 7
	tick := base
	for k := range instants {
		tick = base.Add(time.Duration(k) * time.Second)
		var cs []ledger.Claim
		var runs []ledger.Run
		for _, job := range jobs {
			cs = append(cs, ledger.Claim{Job: job, Tick: tick, Token: l.Token(), Instance: "pod-0", Started: tick})
			runs = append(runs, ledger.Run{Job: job, Tick: tick, Token: l.Token(), Instance: "pod-0", Started: tick, Ended: tick.Add(time.Second), Result: ledger.ResultOK})
		}
		for i, err := range led.Claim(ctx, cs) {
			if err != nil {
				t.Fatalf("claim of %s as the ServiceAccount: %v", cs[i].Job, err)
			}
		}
		for i, err := range led.Finish(ctx, runs) {
			if err != nil {
				t.Fatalf("finish of %s: %v", runs[i].Job, err)
			}
		}
	}
	last, err := led.LastClaimed(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, lt := range last {
		if !lt.Equal(tick) {
			t.Fatalf("last claimed of %s: %v, want %v", jobs[i], lt, tick)
		}
	}
	if h, err := led.History(ctx, "job-7", 10); err != nil || len(h) != instants || h[0].Result != ledger.ResultOK || !h[0].Tick.Equal(tick) {
		t.Errorf("History of job-7: %+v, %v; want %d runs, the newest ok at %v", h, err, instants, tick)
	}
	for i := range 64 {
		shard := fmt.Sprintf("%s-history-%02d", name, i)
		if code, out := kubeCall(t, srv, http.MethodGet, "/api/v1/namespaces/default/configmaps/"+shard, nil); code != http.StatusOK {
			t.Errorf("history shard %s: %d %.200s (no runs moved there as the ServiceAccount)", shard, code, out)
		}
	}
	jc := control.NewJobs(b.Control())
	if err := jc.Pause(ctx, control.Pause{Job: "invoice-run", By: "test", At: time.Now()}); err != nil {
		t.Fatalf("pause as the ServiceAccount: %v", err)
	}
	acct := audit.Stored{Account: audit.Account{Job: "invoice-run"}}
	acct.Add(audit.Range{Class: audit.Ran, Reason: audit.ReasonOK, First: base, Last: base, Count: 1}, func(t time.Time) time.Time { return t.Add(time.Second) })
	if _, err := audit.Save(ctx, b.AccountStore(), acct, l.Token()); err != nil {
		t.Fatalf("writing a tick account as the ServiceAccount: %v", err)
	}
	// A ConfigMap the Role does not name.
	other, err := kube.New(kube.Config{Client: c, Name: "another-election"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.Control().List(ctx, "")
	var se *kube.StatusError
	if !errors.As(err, &se) || se.Code != 403 {
		t.Errorf("reading another election's control ConfigMap: %v, want 403 Forbidden", err)
	}
}
