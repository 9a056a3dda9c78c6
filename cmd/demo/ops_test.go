package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/httpapi"
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/internal/etcdtest"
)

// The operations tests run real `demo node` processes on an embedded etcd:
// /metrics across a handover, POST /step-down with its cooldown, standby,
// and the status page in headless Chromium.

const opsJobs = `election:
  ttl: 2s
  shutdown_timeout: 10s
jobs:
  - name: tick
    schedule: "* * * * * *"
    builtin: log
`

var unsafeLabel = regexp.MustCompile(`[^\w.-]`)

// opsNode is a running `demo node` and its HTTP address.
type opsNode struct {
	*cluster
	id  string
	url string
}

func startOpsNode(t *testing.T, endpoint, electionName, cfg, id string, extra ...string) *opsNode {
	t.Helper()
	args := append([]string{"node", "--backend", "etcd", "--endpoints", endpoint, "--election", electionName,
		"--id", id, "--config", cfg, "--log-format", "json"}, extra...)
	c := startProc(t, unsafeLabel.ReplaceAllString(id, "_")+" | ", args...)
	ev, _ := c.waitFor(0, 30*time.Second, id+" started", func(ev event) bool { return ev.msg == "node started" })
	return &opsNode{cluster: c, id: id, url: ev.http}
}

// acquired returns the first "acquired leadership" of n at index >= from.
func (n *opsNode) acquired(from int, d time.Duration) (event, int) {
	n.t.Helper()
	return n.waitFor(from, d, n.id+" leading", isAcquired)
}

// acquisitions returns n's "acquired leadership" records so far.
func (n *opsNode) acquisitions() []event {
	var out []event
	for _, ev := range n.snapshot() {
		if isAcquired(ev) {
			out = append(out, ev)
		}
	}
	return out
}

// runsEnded counts n's "run ended" records of job at index >= from.
func (n *opsNode) runsEnded(from int, job string) int {
	k := 0
	for _, ev := range n.snapshot()[from:] {
		if ev.msg == "run ended" && ev.job == job {
			k++
		}
	}
	return k
}

// adminPost sends POST path with an optional bearer token.
func adminPost(t *testing.T, url, path, token string) (int, string) {
	t.Helper()
	auth := ""
	if token != "" {
		auth = "Bearer " + token
	}
	return envtest.Post(t, url+path, auth)
}

// scrape reads n's /metrics into series ("name{labels}") -> value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/metrics: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("%s/metrics: bad line %q", url, line)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNode_MetricsHandover scrapes /metrics of two nodes around a
// handover (POST /step-down with a long cooldown, so the old leader keeps
// running and can be scraped): the leader gauge moves from one node to the
// other, and the run counters grow only on the node that leads.
func TestNode_MetricsHandover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	srv := etcdtest.Start(t)
	cfg := writeFile(t, "jobs.yaml", opsJobs)
	tokenFile := writeFile(t, "admin-token", "metrics-token\n")
	name := fmt.Sprintf("metrics_%d", time.Now().UnixNano())
	a := startOpsNode(t, srv.Endpoint(), name, cfg, "a", "--admin-token-file", tokenFile)
	acqA, _ := a.acquired(0, 30*time.Second)
	b := startOpsNode(t, srv.Endpoint(), name, cfg, "b", "--admin-token-file", tokenFile)
	waitUntil(t, "two runs on a", func() bool { return a.runsEnded(0, "tick") >= 2 })

	sel := func(metric string) string { return fmt.Sprintf("%s{election=%q}", metric, name) }
	runs := fmt.Sprintf("baton_job_runs_total{election=%q,job=\"tick\",result=\"ok\"}", name)
	leader, token := sel("baton_leader"), sel("baton_term_token")

	ma, mb := scrape(t, a.url), scrape(t, b.url)
	t.Logf("before: a leader=%v token=%v runs=%v; b leader=%v token=%v runs=%v",
		ma[leader], ma[token], ma[runs], mb[leader], mb[token], mb[runs])
	if ma[leader] != 1 || mb[leader] != 0 {
		t.Errorf("before the handover: leader gauge a=%v b=%v, want 1 and 0", ma[leader], mb[leader])
	}
	if ma[token] != float64(acqA.token) {
		t.Errorf("a's token gauge %v, want %d", ma[token], acqA.token)
	}
	if ma[runs] < 1 || mb[runs] != 0 {
		t.Errorf("before the handover: runs a=%v b=%v, want a >= 1, b 0", ma[runs], mb[runs])
	}
	for _, m := range []string{"go_goroutines", "process_start_time_seconds", sel("baton_eligible")} {
		if _, ok := ma[m]; !ok {
			t.Errorf("a's /metrics lacks %s", m)
		}
	}

	markA, markB := a.len(), b.len()
	if code, body := adminPost(t, a.url, "/step-down?cooldown=10m", "metrics-token"); code != http.StatusAccepted {
		t.Fatalf("POST /step-down to a: %d %s", code, body)
	}
	acqB, _ := b.acquired(markB, 15*time.Second)
	a.waitFor(markA, 15*time.Second, "a released", func(ev event) bool { return ev.msg == "released leadership" })
	afterRelease := scrape(t, a.url)[runs]
	waitUntil(t, "two runs on b", func() bool { return b.runsEnded(markB, "tick") >= 2 })

	ma, mb = scrape(t, a.url), scrape(t, b.url)
	t.Logf("after:  a leader=%v token=%v runs=%v; b leader=%v token=%v runs=%v",
		ma[leader], ma[token], ma[runs], mb[leader], mb[token], mb[runs])
	if ma[leader] != 0 || mb[leader] != 1 {
		t.Errorf("after the handover: leader gauge a=%v b=%v, want 0 and 1", ma[leader], mb[leader])
	}
	if mb[token] != float64(acqB.token) || mb[token] <= ma[token] {
		t.Errorf("token gauges after the handover: a=%v b=%v (b acquired with %d)", ma[token], mb[token], acqB.token)
	}
	if ma[runs] != afterRelease {
		t.Errorf("a's run counter grew from %v to %v after it released", afterRelease, ma[runs])
	}
	if mb[runs] < 2 {
		t.Errorf("b's run counter %v after leading for two runs, want >= 2", mb[runs])
	}
	if got := ma[fmt.Sprintf("baton_leadership_ended_total{election=%q,how=\"released\"}", name)]; got != 1 {
		t.Errorf("a's released terms %v, want 1", got)
	}
	if got := ma[sel("baton_step_down_cooldown_seconds")]; got < 500 || got > 600 {
		t.Errorf("a's cooldown gauge %v, want about 600 s", got)
	}
	if got := mb[sel("baton_leadership_acquired_total")]; got != 1 {
		t.Errorf("b's acquired terms %v, want 1", got)
	}
	if len(a.acquisitions()) != 1 {
		t.Errorf("a acquired %d times, want once", len(a.acquisitions()))
	}
}

// TestNode_StepDown drives the admin endpoints of three real nodes: a and
// b eligible, c started with --standby.
//
//  1. POST /step-down to the leader a without or with a wrong token: 401.
//  2. With the token and a 5 s cooldown: a drains and b leads within 1 s.
//  3. b steps down without cooldown while a cools down. The lease is free
//     and a follows, yet b wins again: a stays follower for its cooldown
//     (without the cooldown a, campaigning since before b's new campaign,
//     would win; c never campaigns).
//  4. After a's cooldown, b steps down with a cooldown: a leads again.
//  5. POST /standby to a: it keeps leading; stepping it down without
//     cooldown, b leads and a does not campaign again until POST /eligible.
func TestNode_StepDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const tok = "step-down-token"
	srv := etcdtest.Start(t)
	cfg := writeFile(t, "jobs.yaml", opsJobs)
	tokenFile := writeFile(t, "admin-token", tok+"\n")
	name := fmt.Sprintf("stepdown_%d", time.Now().UnixNano())
	a := startOpsNode(t, srv.Endpoint(), name, cfg, "a", "--admin-token-file", tokenFile)
	acq, _ := a.acquired(0, 30*time.Second)
	t.Setenv(httpapi.AdminTokenEnv, tok) // b and c read it from the environment
	b := startOpsNode(t, srv.Endpoint(), name, cfg, "b")
	c := startOpsNode(t, srv.Endpoint(), name, cfg, "c", "--standby")
	if st := nodeStatus(t, c.url); st.Role != "standby" || !st.Standby || st.Eligible {
		t.Errorf("c started with --standby: role %q standby %v eligible %v", st.Role, st.Standby, st.Eligible)
	}
	a.waitFor(0, 10*time.Second, "a run on a", func(ev event) bool { return ev.msg == "run ended" })

	// 1.
	if code, body := adminPost(t, a.url, "/step-down", ""); code != http.StatusUnauthorized {
		t.Errorf("POST /step-down without a token: %d %s, want 401", code, body)
	}
	if code, body := adminPost(t, a.url, "/step-down", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("POST /step-down with a wrong token: %d %s, want 401", code, body)
	}
	if !nodeStatus(t, a.url).Leading {
		t.Fatal("a stopped leading after refused step-downs")
	}

	// 2.
	const cooldown = 5 * time.Second
	markA, markB := a.len(), b.len()
	asked := time.Now()
	code, body := adminPost(t, a.url, "/step-down?cooldown="+cooldown.String(), tok)
	if code != http.StatusAccepted {
		t.Fatalf("POST /step-down with the token: %d %s, want 202", code, body)
	}
	cooldownEnd := asked.Add(cooldown)
	next, _ := b.acquired(markB, 15*time.Second)
	handover := next.time.Sub(asked)
	t.Logf("MEASURED POST /step-down to a: b leads after %v (token %d -> %d)", handover.Round(time.Millisecond), acq.token, next.token)
	if handover > time.Second {
		t.Errorf("b leads %v after the step-down, want within 1 s", handover)
	}
	a.waitFor(markA, 5*time.Second, "a's release", func(ev event) bool { return ev.msg == "released leadership" && ev.token == acq.token })
	st := nodeStatus(t, a.url)
	if st.Leading || st.Role != "cooling down" || st.CooldownUntil.Before(cooldownEnd.Add(-time.Second)) || st.CooldownUntil.After(cooldownEnd.Add(time.Second)) {
		t.Errorf("a after the step-down: role %q leading %v cooldown_until %v (asked for %v from %v)",
			st.Role, st.Leading, st.CooldownUntil, cooldown, asked.Format(time.RFC3339Nano))
	}

	// 3.
	markB = b.len()
	if code, body := adminPost(t, b.url, "/step-down?cooldown=0s", tok); code != http.StatusAccepted {
		t.Fatalf("POST /step-down?cooldown=0s to b: %d %s", code, body)
	}
	again, _ := b.acquired(markB, 15*time.Second)
	if again.token <= next.token {
		t.Errorf("b's new term token %d, want above %d", again.token, next.token)
	}
	if time.Now().After(cooldownEnd) {
		t.Fatalf("b led again only after a's cooldown ended; the check says nothing (machine too slow?)")
	}
	t.Logf("b stepped down and led again %v before the end of a's cooldown", time.Until(cooldownEnd).Round(time.Millisecond))

	// 4.
	markA = a.len()
	waitUntil(t, "a's cooldown over", func() bool { return nodeStatus(t, a.url).Role == "follower" })
	if got := len(a.acquisitions()); got != 1 {
		t.Fatalf("a acquired %d times before its cooldown ended, want once (at the start)", got)
	}
	if code, body := adminPost(t, b.url, "/step-down?cooldown=1m", tok); code != http.StatusAccepted {
		t.Fatalf("POST /step-down to b: %d %s", code, body)
	}
	back, _ := a.acquired(markA, 15*time.Second)
	if back.time.Before(cooldownEnd) {
		t.Errorf("a led at %v, inside its cooldown (until %v)", back.time, cooldownEnd)
	}

	// 5.
	if code, body := adminPost(t, a.url, "/standby", tok); code != http.StatusOK || !strings.Contains(body, "still leads") {
		t.Errorf("POST /standby to the leader a: %d %s", code, body)
	}
	if st := nodeStatus(t, a.url); !st.Leading || !st.Standby {
		t.Errorf("a on standby: leading %v standby %v, want leading on standby", st.Leading, st.Standby)
	}
	if code, body := adminPost(t, b.url, "/step-down?cooldown=0s", tok); code != http.StatusOK { // b follows: ends its cooldown
		t.Errorf("POST /step-down?cooldown=0s to follower b: %d %s", code, body)
	}
	markA, markB = a.len(), b.len()
	if code, body := adminPost(t, a.url, "/step-down?cooldown=0s", tok); code != http.StatusAccepted {
		t.Fatalf("POST /step-down to a on standby: %d %s", code, body)
	}
	b.acquired(markB, 15*time.Second)
	markB = b.len()
	if code, body := adminPost(t, b.url, "/step-down?cooldown=0s", tok); code != http.StatusAccepted {
		t.Fatalf("POST /step-down?cooldown=0s to b: %d %s", code, body)
	}
	b.acquired(markB, 15*time.Second)
	if got := len(a.acquisitions()); got != 2 {
		t.Errorf("a on standby acquired again (%d terms in all, want 2)", got)
	}
	if st := nodeStatus(t, a.url); st.Role != "standby" {
		t.Errorf("a's role %q, want standby", st.Role)
	}
	if code, body := adminPost(t, a.url, "/eligible", tok); code != http.StatusOK {
		t.Fatalf("POST /eligible to a: %d %s", code, body)
	}
	if code, body := adminPost(t, b.url, "/step-down?cooldown=1m", tok); code != http.StatusAccepted {
		t.Fatalf("POST /step-down to b: %d %s", code, body)
	}
	a.acquired(markA, 15*time.Second)

	if got := len(c.acquisitions()); got != 0 {
		t.Errorf("c, started with --standby, acquired %d times", got)
	}
	for _, n := range []*opsNode{a, b, c} {
		checkLogKeys(t, n)
	}
}

// logKeys are the keys each kind of record must carry (besides election
// and identity, which every record of a node carries).
var logKeys = map[string][]string{
	"acquired leadership": {"token"},
	"stepping down":       {"token", "reason"},
	"released leadership": {"token", "took", "term_length"},
	"lost leadership":     {"token", "took", "term_length", "err"},
	"step-down requested": {"cooldown", "until"},
	"eligibility set":     {"eligible"},
	"run started":         {"token", "job", "tick"},
	"run ended":           {"token", "job", "tick", "took", "result"},
}

// checkLogKeys checks n's JSON log: every record has election and
// identity, transitions and runs have their fixed keys, and each
// transition and each run is logged once.
func checkLogKeys(t *testing.T, n *opsNode) {
	t.Helper()
	once := map[string]int{}
	for _, ev := range n.snapshot() {
		_, js, ok := strings.Cut(ev.raw, " | ")
		if !ok || !strings.HasPrefix(js, "{") {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(js), &rec); err != nil {
			t.Errorf("%s: not JSON: %s", n.id, js)
			continue
		}
		if rec["election"] == nil || rec["identity"] != n.id {
			t.Errorf("%s: record without election or identity: %s", n.id, js)
		}
		for _, k := range logKeys[ev.msg] {
			if _, ok := rec[k]; !ok {
				t.Errorf("%s: %q without %q: %s", n.id, ev.msg, k, js)
			}
		}
		switch ev.msg {
		case "acquired leadership", "released leadership", "lost leadership", "stepping down":
			once[fmt.Sprintf("%s token %d", ev.msg, ev.token)]++
		case "run started", "run ended":
			once[fmt.Sprintf("%s %s %s", ev.msg, ev.job, ev.tick)]++
		}
	}
	for what, k := range once {
		if k != 1 {
			t.Errorf("%s: %d records %q, want one", n.id, k, what)
		}
	}
	if len(once) == 0 && n.id != "c" {
		t.Errorf("%s: no transition or run records", n.id)
	}
}

// chromium returns the path of a Chromium binary, or "" if none is
// installed.
func chromium() string {
	if p := os.Getenv("BATON_TEST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// headless loads url in headless Chromium after its scripts ran for a few
// (virtual) seconds and returns the DOM and Chromium's log, in which the
// page's console messages appear as ":CONSOLE" lines. With shot set it
// also writes a screenshot there.
func headless(t *testing.T, bin, url, shot string) (dom, log string) {
	t.Helper()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir=" + t.TempDir(),
		"--enable-logging=stderr", "--v=0", "--virtual-time-budget=3000", "--window-size=1200,800"}
	if shot != "" {
		args = append(args, "--screenshot="+shot)
	} else {
		args = append(args, "--dump-dom")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, stderr.String())
	}
	return stdout.String(), stderr.String()
}

var idOf = regexp.MustCompile(`(?s)<[^>]* id="(leader-id|node-id|role|script-errors|conn)"[^>]*>(.*?)</`)

// TestNode_StatusPage_Chromium loads the status page of a leader and of a
// follower in headless Chromium: the leader's identity (with characters
// that must be escaped) is on both pages, and the page logs nothing to
// the console and reports no script error.
func TestNode_StatusPage_Chromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and a browser")
	}
	bin := chromium()
	if bin == "" {
		envtest.Unavailable(t, "no Chromium (apt-get install chromium, or set BATON_TEST_CHROMIUM)")
	}
	srv := etcdtest.Start(t)
	cfg := writeFile(t, "jobs.yaml", opsJobs)
	name := fmt.Sprintf("page_%d", time.Now().UnixNano())
	const leaderID = `lead<er>&"1"`
	const escaped = `lead&lt;er&gt;&amp;"1"`
	a := startOpsNode(t, srv.Endpoint(), name, cfg, leaderID)
	a.acquired(0, 30*time.Second)
	b := startOpsNode(t, srv.Endpoint(), name, cfg, "b")
	a.waitFor(0, 10*time.Second, "a run", func(ev event) bool { return ev.msg == "run ended" })

	for _, n := range []*opsNode{a, b} {
		dom, log := headless(t, bin, n.url+"/", "")
		got := map[string]string{}
		for _, m := range idOf.FindAllStringSubmatch(dom, -1) {
			got[m[1]] = m[2]
		}
		t.Logf("%s's page: leader %q, node %q, role %q", n.id, got["leader-id"], got["node-id"], got["role"])
		if got["leader-id"] != escaped {
			t.Errorf("%s's page: leader %q, want %q\n%s", n.id, got["leader-id"], escaped, dom)
		}
		wantRole := "follower"
		if n == a {
			wantRole = "leader"
		}
		if got["role"] != wantRole {
			t.Errorf("%s's page: role %q, want %q", n.id, got["role"], wantRole)
		}
		if strings.Contains(dom, "<er>") {
			t.Errorf("%s's page: the identity became markup", n.id)
		}
		if got["script-errors"] != "" || got["conn"] != "" || !strings.Contains(dom, `data-loaded="1"`) {
			t.Errorf("%s's page: script errors %q, connection %q, loaded %v", n.id, got["script-errors"], got["conn"], strings.Contains(dom, `data-loaded="1"`))
		}
		if !strings.Contains(dom, "tick") || !strings.Contains(dom, "* * * * * *") {
			t.Errorf("%s's page lacks the job and its schedule", n.id)
		}
		for line := range strings.Lines(log) {
			if strings.Contains(line, ":CONSOLE") || strings.Contains(line, "Uncaught") {
				t.Errorf("%s's page: console message: %s", n.id, strings.TrimSpace(line))
			}
		}
	}
	// A screenshot, to look at: kept out of the repository.
	if dir := os.Getenv("BATON_TEST_SCREENSHOT_DIR"); dir != "" {
		p := filepath.Join(dir, "baton-status-page.png")
		headless(t, bin, b.url+"/", p)
		t.Logf("screenshot of %s's page: %s", b.id, p)
	}
}

// The status page's controls in a real browser: headless Chromium driven
// through ChromeDriver's WebDriver HTTP API (no client library: the few
// commands the test needs are plain JSON requests).

// webDriver is one ChromeDriver session.
type webDriver struct {
	t       *testing.T
	base    string // http://127.0.0.1:PORT/session/ID
	elemKey string
}

const w3cElement = "element-6066-11e4-a52e-4f735466cecf"

// startWebDriver starts chromedriver and a headless Chromium session,
// both ended when t ends.
func startWebDriver(t *testing.T, chrome string) *webDriver {
	t.Helper()
	drv, err := exec.LookPath("chromedriver")
	if p := os.Getenv("BATON_TEST_CHROMEDRIVER"); p != "" {
		drv, err = p, nil
	}
	if err != nil {
		envtest.Unavailable(t, "no chromedriver (apt-get install chromium-driver, or set BATON_TEST_CHROMEDRIVER)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(drv, fmt.Sprintf("--port=%d", port), "--allowed-ips=127.0.0.1")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("chromedriver: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("chromedriver output:\n%s", logs.String())
		}
	})
	root := fmt.Sprintf("http://127.0.0.1:%d", port)
	envtest.WaitUntil(t, "chromedriver answers", func() bool {
		resp, err := http.Get(root + "/status")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	w := &webDriver{t: t, base: root}
	caps := map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName": "chrome",
		"goog:chromeOptions": map[string]any{"binary": chrome, "args": []string{"--headless", "--no-sandbox", "--disable-gpu",
			"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
			"--user-data-dir=" + t.TempDir(), "--window-size=1400,1000"}},
	}}}
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	w.do("POST", "/session", caps, &sess)
	if sess.SessionID == "" {
		t.Fatal("chromedriver: no session id")
	}
	w.base = root + "/session/" + sess.SessionID
	t.Cleanup(func() { w.do("DELETE", "", nil, nil) })
	return w
}

// do sends one WebDriver command and decodes its value into out.
func (w *webDriver) do(method, path string, body, out any) error {
	w.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, w.base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatalf("webdriver %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var env struct {
		Value json.RawMessage `json:"value"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &env); err != nil {
		w.t.Fatalf("webdriver %s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("webdriver %s %s: %d %s", method, path, resp.StatusCode, env.Value)
	}
	if out != nil {
		if err := json.Unmarshal(env.Value, out); err != nil {
			w.t.Fatalf("webdriver %s %s: %v: %s", method, path, err, env.Value)
		}
	}
	return nil
}

func (w *webDriver) open(url string) {
	w.t.Helper()
	if err := w.do("POST", "/url", map[string]string{"url": url}, nil); err != nil {
		w.t.Fatal(err)
	}
}

// find returns the element css selects, or "" if none.
func (w *webDriver) find(css string) string {
	var v map[string]string
	if err := w.do("POST", "/element", map[string]string{"using": "css selector", "value": css}, &v); err != nil {
		return ""
	}
	return v[w3cElement]
}

// waitFind waits for css to select an element and returns it.
func (w *webDriver) waitFind(css, what string) string {
	w.t.Helper()
	var id string
	envtest.WaitUntil(w.t, what, func() bool { id = w.find(css); return id != "" })
	return id
}

// text returns the text of the element css selects, "" if none.
func (w *webDriver) text(css string) string {
	id := w.find(css)
	if id == "" {
		return ""
	}
	var s string
	if w.do("GET", "/element/"+id+"/text", nil, &s) != nil {
		return ""
	}
	return s
}

// click clicks the element css selects once it is there and enabled; the
// page draws its tables again every second, so a stale element is looked
// up again.
func (w *webDriver) click(css, what string) {
	w.t.Helper()
	envtest.WaitUntil(w.t, what, func() bool {
		id := w.find(css)
		if id == "" {
			return false
		}
		var on bool
		if w.do("GET", "/element/"+id+"/enabled", nil, &on) != nil || !on {
			return false
		}
		return w.do("POST", "/element/"+id+"/click", map[string]any{}, nil) == nil
	})
}

func (w *webDriver) typeInto(css, text string) {
	w.t.Helper()
	id := w.waitFind(css, css+" on the page")
	if err := w.do("POST", "/element/"+id+"/value", map[string]string{"text": text}, nil); err != nil {
		w.t.Fatal(err)
	}
}

// TestNode_StatusPageControls_Chromium: two real nodes on an embedded
// etcd; on the follower's page in Chromium, the instances list shows
// both, the term timeline the leader's term; typing the admin token and
// clicking pause shows the job paused on both nodes' pages; run now is
// accepted and its run shows in the job's history as manual, run by the
// leader; resume ends the pause.
func TestNode_StatusPageControls_Chromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and a browser")
	}
	bin := chromium()
	if bin == "" {
		envtest.Unavailable(t, "no Chromium (apt-get install chromium, or set BATON_TEST_CHROMIUM)")
	}
	wd := startWebDriver(t, bin)
	srv := etcdtest.Start(t)
	cfg := writeFile(t, "jobs.yaml", opsJobs+`  - name: report
    schedule: "0 0 0 1 1 *"
    builtin: log
`)
	tokenFile := writeFile(t, "admin-token", "page-secret\n")
	name := fmt.Sprintf("controls_%d", time.Now().UnixNano())
	a := startOpsNode(t, srv.Endpoint(), name, cfg, "a", "--admin-token-file", tokenFile)
	ev, _ := a.acquired(0, 30*time.Second)
	b := startOpsNode(t, srv.Endpoint(), name, cfg, "b", "--admin-token-file", tokenFile)

	wd.open(b.url + "/")
	wd.waitFind("#instance-a", "a in the instances list")
	wd.waitFind("#instance-b", "b in the instances list")
	if got := wd.text("#instance-a"); !strings.Contains(got, "leader") || !strings.Contains(got, "live") {
		t.Errorf("instance a's row %q, want it live and leading", got)
	}
	wd.waitFind(fmt.Sprintf("#term-%d", ev.token), "a's term in the timeline")
	if got := wd.text(fmt.Sprintf("#term-%d", ev.token)); !strings.Contains(got, "a") || !strings.Contains(got, "leading") {
		t.Errorf("term row %q, want a, leading", got)
	}
	// The buttons wait for the token.
	if id := wd.waitFind("#pause-tick", "the pause button"); id != "" {
		var on bool
		wd.do("GET", "/element/"+id+"/enabled", nil, &on)
		if on {
			t.Error("pause is enabled before a token is typed")
		}
	}
	wd.typeInto("#token", "page-secret")
	wd.click("#pause-tick", "clicking pause")
	wd.waitFind("#paused-tick", "tick shown paused on b's page")
	if got := wd.text("#paused-tick"); !strings.Contains(got, "paused by status page") {
		t.Errorf("paused badge %q", got)
	}
	paused := len(a.snapshot()) // from here on, a runs no tick of tick
	wd.click("#run-report", "clicking run now")
	envtest.WaitUntil(t, "the run now accepted", func() bool { return strings.Contains(wd.text("#action"), "run report: request ") })
	envtest.WaitUntil(t, "report's manual run in its history", func() bool { return wd.find("#jobs .run.ok.manual") != "" })

	// The leader's page shows the pause too (no token needed to see it).
	wd.open(a.url + "/")
	wd.waitFind("#paused-tick", "tick shown paused on a's page")
	time.Sleep(2 * time.Second)
	if n := a.runsEnded(paused, "tick"); n > 1 { // a run already started at the click may end
		t.Errorf("a ran tick %d times after the pause", n)
	}
	wd.typeInto("#token", "page-secret")
	wd.click("#resume-tick", "clicking resume")
	envtest.WaitUntil(t, "the pause gone from a's page", func() bool { return wd.find("#paused-tick") == "" })
	resumed := len(a.snapshot())
	a.waitFor(resumed, 10*time.Second, "tick runs again", func(ev event) bool { return ev.msg == "run ended" && ev.job == "tick" })
}
