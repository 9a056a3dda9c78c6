package main

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/internal/etcdtest"
)

// auditCounts parses a job's accounting line on the status page, "last
// 24 h: due N, ran M, covered C, ...", into its counts by name; nil if
// the text is no such line.
func auditCounts(line string) map[string]int64 {
	head, rest, ok := strings.Cut(line, ": ")
	if !ok || head != "last 24 h" {
		return nil
	}
	rest, _, _ = strings.Cut(rest, " · ")
	out := map[string]int64{}
	for part := range strings.SplitSeq(rest, ", ") {
		name, n, ok := strings.Cut(part, " ")
		v, err := strconv.ParseInt(n, 10, 64)
		if !ok || err != nil {
			return nil
		}
		out[name] = v
	}
	return out
}

var auditLineNames = regexp.MustCompile(`^due \d+, ran \d+, covered \d+, skipped \d+, missed \d+, refused \d+, lost \d+`)

// TestNode_StatusPageAudit_Chromium: a node on an embedded etcd runs a job
// that fails every second; its status page in Chromium shows the job's
// accounting line of the last 24 hours (at least one tick due, and the
// classes adding up to the ticks due), closed; a click on the line opens
// the list of the ticks that did not run ok, which lists the failed ones
// with the leader's instance and token, and stays open while the page
// redraws itself.
func TestNode_StatusPageAudit_Chromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and a browser")
	}
	bin := chromium()
	if bin == "" {
		envtest.Unavailable(t, "no Chromium (apt-get install chromium, or set BATON_TEST_CHROMIUM)")
	}
	wd := startWebDriver(t, bin)
	srv := etcdtest.Start(t)
	cfg := writeFile(t, "jobs.yaml", opsJobs+`  - name: broken
    schedule: "* * * * * *"
    builtin: fail
`)
	name := fmt.Sprintf("audit_%d", time.Now().UnixNano())
	a := startOpsNode(t, srv.Endpoint(), name, cfg, "a")
	ev, _ := a.acquired(0, 30*time.Second)
	_, i := a.waitFor(0, 30*time.Second, "a failed run", func(ev event) bool { return ev.msg == "run ended" && ev.job == "broken" })
	a.waitFor(i+1, 30*time.Second, "a second failed run", func(ev event) bool { return ev.msg == "run ended" && ev.job == "broken" })

	wd.open(a.url + "/")
	var line string
	var counts map[string]int64
	envtest.WaitFor(t, 30*time.Second, "broken's accounting line with a failed tick", func() bool {
		line = wd.text("#audit-line-broken")
		counts = auditCounts(line)
		return counts != nil && counts["ran"] >= 1
	})
	t.Logf("broken's line: %q", line)
	if !auditLineNames.MatchString(strings.TrimPrefix(line, "last 24 h: ")) {
		t.Errorf("line %q: want due, ran, covered, skipped, missed, refused, lost in that order", line)
	}
	var sum int64
	for k, v := range counts {
		if k != "due" {
			sum += v
		}
	}
	if counts["due"] < 1 || sum != counts["due"] {
		t.Errorf("line %q: due %d, the classes sum to %d; want due >= 1 and equal", line, counts["due"], sum)
	}
	if got := wd.text("#audit-list-broken"); got != "" {
		t.Errorf("the list of ticks not ok shows before a click: %q", got)
	}

	wd.click("#audit-line-broken", "clicking broken's accounting line")
	var list string
	envtest.WaitFor(t, 30*time.Second, "the list of broken's ticks not ok, open", func() bool {
		list = wd.text("#audit-list-broken")
		return strings.Contains(list, "ran/failed")
	})
	t.Logf("broken's ticks not ok:\n%s", list)
	if !strings.Contains(list, fmt.Sprint(ev.token)) || !strings.Contains(list, " a ") {
		t.Errorf("the list %q: want the failed ticks with token %d and instance a", list, ev.token)
	}
	// Open across the page's redraws (every second).
	seen := map[string]bool{}
	envtest.WaitFor(t, 30*time.Second, "three redraws", func() bool {
		seen[wd.text("#updated")] = true
		return len(seen) >= 3
	})
	if got := wd.text("#audit-list-broken"); !strings.Contains(got, "ran/failed") {
		t.Errorf("after redraws the list shows %q: want it still open", got)
	}
	if c := auditCounts(wd.text("#audit-line-tick")); c == nil || c["due"] < 1 {
		t.Errorf("tick's accounting line %q: want at least one tick due", wd.text("#audit-line-tick"))
	}
	// A screenshot of the open list, to look at: kept out of the repository.
	if dir := os.Getenv("BATON_TEST_SCREENSHOT_DIR"); dir != "" {
		var b64 string
		if err := wd.do("GET", "/screenshot", nil, &b64); err != nil {
			t.Fatal(err)
		}
		png, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "baton-status-page-audit.png")
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot of the open list: %s", p)
	}
}
