package deploy_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/envtest"
)

// promtool returns the path of Prometheus's promtool (Debian: apt-get
// install prometheus). Without it t skips, or fails under
// BATON_TEST_REQUIRE=1.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		envtest.Unavailable(t, "no promtool on $PATH (apt-get install prometheus): it checks alerts.yaml")
	}
	return p
}

// runPromtool runs promtool with args in dir and returns its output and
// whether it succeeded; an error other than a failing exit stops t.
func runPromtool(t *testing.T, bin, dir string, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("promtool %s: %v", strings.Join(args, " "), err)
	}
	return string(out), err == nil
}

// alerts.yaml is a valid rule file, and its unit tests in alerts_test.yaml
// pass: each alert fires when it should and stays quiet when it should not.
func TestAlertRules(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", "alerts.yaml"},
		{"test", "rules", "alerts_test.yaml"},
	} {
		if out, ok := runPromtool(t, bin, ".", args...); !ok {
			t.Errorf("promtool %s failed:\n%s", strings.Join(args, " "), out)
		}
	}
}

// The unit tests catch a broken rule: each change below, made to a copy
// of alerts.yaml, makes promtool test rules fail on the alert changed.
func TestAlertTestsCatchBrokenRules(t *testing.T) {
	bin := promtool(t)
	rules, err := os.ReadFile("alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("alerts_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	mutants := []struct{ name, alert, old, new string }{
		{"BatonJobOverdue per instance", "BatonJobOverdue", "max by (election, job) (baton_job_overdue)", "max by (election, job, instance) (baton_job_overdue)"},
		{"BatonJobOverdue above 1", "BatonJobOverdue", "(baton_job_overdue) > 0", "(baton_job_overdue) > 1"},
		{"BatonNoLeader threshold 300", "BatonNoLeader", "(baton_election_leaderless_seconds) > 30", "(baton_election_leaderless_seconds) > 300"},
		{"BatonNoLeader threshold 0", "BatonNoLeader", "(baton_election_leaderless_seconds) > 30", "(baton_election_leaderless_seconds) > 0"},
		{"BatonNoLeader max of instances", "BatonNoLeader", "min by (election)", "max by (election)"},
		{"BatonNoLeader no for", "BatonNoLeader", "for: 15s", "for: 0s"},
		{"BatonCannotCampaign window 10m", "BatonCannotCampaign", "increase(baton_acquire_errors_total[2m])", "increase(baton_acquire_errors_total[10m])"},
		{"BatonCannotCampaign for 1m", "BatonCannotCampaign", "for: 5m", "for: 1m"},
		{"BatonClaimsRefused window 30m", "BatonClaimsRefused", "increase(baton_claims_refused_total[15m])", "increase(baton_claims_refused_total[30m])"},
		{"BatonClaimsRefused above 1", "BatonClaimsRefused", "(baton_claims_refused_total[15m]) > 0", "(baton_claims_refused_total[15m]) > 1"},
	}
	for _, c := range []struct{ alert, class string }{{"BatonTicksMissed", "missed"}, {"BatonTicksRefused", "refused"}, {"BatonTicksLost", "lost"}} {
		delta := `delta(baton_ticks{class="` + c.class + `"}[15m])`
		other := map[string]string{"missed": "refused", "refused": "lost", "lost": "missed"}[c.class]
		mutants = append(mutants, []struct{ name, alert, old, new string }{
			{c.alert + " on the count", c.alert, delta, `baton_ticks{class="` + c.class + `"}`},
			{c.alert + " increase", c.alert, delta, `increase(baton_ticks{class="` + c.class + `"}[15m])`},
			{c.alert + " window 1h", c.alert, delta, `delta(baton_ticks{class="` + c.class + `"}[1h])`},
			{c.alert + " per instance", c.alert, "max by (election, job, reason) (" + delta, "max by (election, job, reason, instance) (" + delta},
			{c.alert + " class " + other, c.alert, delta, `delta(baton_ticks{class="` + other + `"}[15m])`},
			{c.alert + " no for", c.alert, delta + ") > 0\n        for: 2m", delta + ") > 0\n        for: 0s"},
		}...)
	}
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			if strings.Count(string(rules), m.old) != 1 {
				t.Fatalf("alerts.yaml holds %q %d times, want once", m.old, strings.Count(string(rules), m.old))
			}
			dir := t.TempDir()
			broken := strings.Replace(string(rules), m.old, m.new, 1)
			if err := os.WriteFile(filepath.Join(dir, "alerts.yaml"), []byte(broken), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), tests, 0o644); err != nil {
				t.Fatal(err)
			}
			out, ok := runPromtool(t, bin, dir, "test", "rules", "alerts_test.yaml")
			if ok {
				t.Fatalf("with %q for %q, promtool test rules passed:\n%s", m.new, m.old, out)
			}
			if !strings.Contains(out, "alertname: "+m.alert+",") {
				t.Errorf("with %q for %q, promtool test rules failed, but not on %s:\n%s", m.new, m.old, m.alert, out)
			}
		})
	}
}
