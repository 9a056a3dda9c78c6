package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/etcdtest"
	"github.com/batonhq/baton/internal/testenv"
)

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
		testenv.Unavailable(t, "no chromedriver (apt-get install chromium-driver, or set BATON_TEST_CHROMEDRIVER)")
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
	testenv.WaitUntil(t, "chromedriver answers", func() bool {
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
	testenv.WaitUntil(w.t, what, func() bool { id = w.find(css); return id != "" })
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
	testenv.WaitUntil(w.t, what, func() bool {
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
		testenv.Unavailable(t, "no Chromium (apt-get install chromium, or set BATON_TEST_CHROMIUM)")
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
	testenv.WaitUntil(t, "the run now accepted", func() bool { return strings.Contains(wd.text("#action"), "run report: request ") })
	testenv.WaitUntil(t, "report's manual run in its history", func() bool { return wd.find("#jobs .run.ok.manual") != "" })

	// The leader's page shows the pause too (no token needed to see it).
	wd.open(a.url + "/")
	wd.waitFind("#paused-tick", "tick shown paused on a's page")
	time.Sleep(2 * time.Second)
	if n := a.runsEnded(paused, "tick"); n > 1 { // a run already started at the click may end
		t.Errorf("a ran tick %d times after the pause", n)
	}
	wd.typeInto("#token", "page-secret")
	wd.click("#resume-tick", "clicking resume")
	testenv.WaitUntil(t, "the pause gone from a's page", func() bool { return wd.find("#paused-tick") == "" })
	resumed := len(a.snapshot())
	a.waitFor(resumed, 10*time.Second, "tick runs again", func(ev event) bool { return ev.msg == "run ended" && ev.job == "tick" })
}
