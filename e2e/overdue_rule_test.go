package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/batonhq/baton/internal/envtest"
)

// overdueSeries keeps what the instances' /metrics said of one job's
// baton_job_overdue, second by second from start: the series a
// Prometheus scraping them every second would hold. ruleTest feeds them
// to the shipped alert rules (docs/deploy/alerts.yaml) through promtool.
type overdueSeries struct {
	start time.Time
	ids   []string
	vals  map[string][]string // by instance, one value per second ("_": no sample)
}

func newOverdueSeries(start time.Time, procs []*proc) *overdueSeries {
	s := &overdueSeries{start: start, vals: map[string][]string{}}
	for _, p := range procs {
		s.ids = append(s.ids, p.id)
	}
	return s
}

// sample records v, read from instance id at at.
func (s *overdueSeries) sample(id string, at time.Time, v float64) {
	i := int(at.Sub(s.start) / time.Second)
	if i < 0 {
		return
	}
	vs := s.vals[id]
	for len(vs) <= i {
		vs = append(vs, "_")
	}
	vs[i] = fmt.Sprint(v)
	s.vals[id] = vs
}

// scrapeAll samples job's overdue gauge on every proc and returns what
// each that answered said.
func (s *overdueSeries) scrapeAll(procs []*proc, job string) map[string]float64 {
	got := map[string]float64{}
	for _, p := range procs {
		if v, ok := scrape(p, "baton_job_overdue", job); ok {
			s.sample(p.id, time.Now(), v)
			got[p.id] = v
		}
	}
	return got
}

// firstAll returns the first second at which every instance's last
// sample says 1, and false if none does.
func (s *overdueSeries) firstAll() (int, bool) {
	n := 0
	for _, id := range s.ids {
		n = max(n, len(s.vals[id]))
	}
	last := map[string]string{}
	for i := range n {
		all := true
		for _, id := range s.ids {
			if vs := s.vals[id]; i < len(vs) && vs[i] != "_" {
				last[id] = vs[i]
			}
			all = all && last[id] == "1"
		}
		if all {
			return i, true
		}
	}
	return 0, false
}

// ruleTest runs promtool test rules on the shipped rules with the
// recorded series of job in election: BatonJobOverdue must be quiet at
// the first second and firing, with the shipped annotations, at the
// first second every instance said overdue. It returns what promtool
// printed.
func (s *overdueSeries) ruleTest(t *testing.T, dir, election, job string) (string, error) {
	t.Helper()
	rules, err := filepath.Abs(filepath.Join("..", "docs", "deploy", "alerts.yaml"))
	if err != nil {
		return "", err
	}
	return s.ruleTestOf(t, rules, dir, election, job)
}

func (s *overdueSeries) ruleTestOf(t *testing.T, rules, dir, election, job string) (string, error) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		envtest.Unavailable(t, "no promtool on $PATH (apt-get install prometheus): it feeds the metrics to the shipped rules")
	}
	at, ok := s.firstAll()
	if !ok {
		return "", fmt.Errorf("no second at which every instance said %s overdue", job)
	}
	summary, description, err := overdueAnnotations(rules, election, job)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "rule_files:\n  - %q\nevaluation_interval: 1s\ntests:\n  - interval: 1s\n    input_series:\n", rules)
	for _, id := range s.ids {
		fmt.Fprintf(&b, "      - series: 'baton_job_overdue{election=%q,job=%q,instance=%q}'\n        values: '%s'\n",
			election, job, id, strings.Join(s.vals[id], " "))
	}
	fmt.Fprintf(&b, "    alert_rule_test:\n      - eval_time: 0s\n        alertname: BatonJobOverdue\n        exp_alerts: []\n")
	fmt.Fprintf(&b, "      - eval_time: %ds\n        alertname: BatonJobOverdue\n        exp_alerts:\n", at)
	fmt.Fprintf(&b, "          - exp_labels: {severity: critical, election: %q, job: %q}\n", election, job)
	fmt.Fprintf(&b, "            exp_annotations: {summary: %q, description: %q}\n", summary, description)
	path := filepath.Join(dir, "overdue_rule_test.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	out, err := exec.Command(promtool, "test", "rules", path).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("promtool test rules %s: %v", path, err)
	}
	return string(out), nil
}

// overdueAnnotations reads BatonJobOverdue's annotations from the rules
// file, with the job's and the election's labels filled in.
func overdueAnnotations(rules, election, job string) (summary, description string, err error) {
	raw, err := os.ReadFile(rules)
	if err != nil {
		return "", "", err
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		return "", "", fmt.Errorf("%s: %v", rules, err)
	}
	fill := strings.NewReplacer("{{ $labels.job }}", job, "{{ $labels.election }}", election).Replace
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "BatonJobOverdue" {
				return fill(r.Annotations["summary"]), fill(r.Annotations["description"]), nil
			}
		}
	}
	return "", "", fmt.Errorf("%s: no rule BatonJobOverdue", rules)
}

// The rule test fails when the rule would not fire on the series: the
// shipped rule passes on three instances turning overdue one after
// another, a copy with a threshold above 1 does not.
func TestOverdueRuleTest_CatchesABrokenRule(t *testing.T) {
	start := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	s := &overdueSeries{start: start, ids: []string{"node-1", "node-2", "node-3"}, vals: map[string][]string{}}
	for i, id := range s.ids {
		for sec := range 12 {
			v := 0.0
			if sec >= 4+2*i {
				v = 1
			}
			s.sample(id, start.Add(time.Duration(sec)*time.Second+300*time.Millisecond), v)
		}
	}
	if at, ok := s.firstAll(); !ok || at != 8 {
		t.Fatalf("firstAll = %d, %v; want 8", at, ok)
	}
	shipped, err := filepath.Abs(filepath.Join("..", "docs", "deploy", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := s.ruleTestOf(t, shipped, t.TempDir(), "e2e", "hang"); err != nil {
		t.Fatalf("the shipped rule: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(shipped)
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(raw), "max by (election, job) (baton_job_overdue) > 0", "max by (election, job) (baton_job_overdue) > 1", 1)
	if broken == string(raw) {
		t.Fatal("the shipped rule's expression changed: mend this test")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "alerts.yaml")
	if err := os.WriteFile(path, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := s.ruleTestOf(t, path, dir, "e2e", "hang"); err == nil {
		t.Errorf("a rule that cannot fire passed the rule test:\n%s", out)
	}
}
