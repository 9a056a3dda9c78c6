package main

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/internal/etcdtest"
	"github.com/batonhq/baton/internal/httpjob"
)

// readmeBlock returns the fenced code block that follows marker in the
// README.
func readmeBlock(t *testing.T, readme, marker string) string {
	t.Helper()
	i := strings.Index(readme, marker)
	if i < 0 {
		t.Fatalf("README.md: no %s", marker)
	}
	rest := readme[i:]
	start := strings.Index(rest, "```")
	nl := strings.Index(rest[start:], "\n")
	body := rest[start+nl+1:]
	end := strings.Index(body, "```")
	if start < 0 || end < 0 {
		t.Fatalf("README.md: no code block after %s", marker)
	}
	return body[:end]
}

var trailingComment = regexp.MustCompile(`\s+#\s.*$`)

// TestREADME_SidecarCommands runs the README's "Run baton beside a
// service in any language" commands as written, in a directory holding
// its config as baton.yaml, against a real etcd and a stand-in for the
// service. Only the addresses are swapped for the test's: the etcd
// endpoint, the service's URL and the node's port (the client commands'
// default, so BATON_NODE points them at it). Every command must exit 0.
func TestREADME_SidecarCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and processes")
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	config := readmeBlock(t, readme, "<!-- sidecar-example:config -->")
	commands := readmeBlock(t, readme, "<!-- sidecar-example:commands -->")

	srv := etcdtest.Start(t)
	var mu sync.Mutex
	var kinds []string
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		kinds = append(kinds, r.URL.Path+" "+r.Header.Get(httpjob.HeaderRunKind)+" token "+r.Header.Get(httpjob.HeaderToken))
		mu.Unlock()
	}))
	defer app.Close()
	nodeAddr := freeAddr(t)
	swap := strings.NewReplacer("http://127.0.0.1:2379", srv.Endpoint(), "http://127.0.0.1:8080", app.URL, "127.0.0.1:7117", nodeAddr)

	dir := t.TempDir()
	write(t, dir, "baton.yaml", swap.Replace(config))
	write(t, dir, "backup.sh", "#!/bin/sh\necho \"backup under token $BATON_TOKEN\" > backup.done\n")
	if err := os.Chmod(filepath.Join(dir, "backup.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"PATH="+filepath.Dir(batonBinary(t))+string(os.PathListSeparator)+os.Getenv("PATH"),
		"BATON_NODE=http://"+nodeAddr)

	sc := bufio.NewScanner(strings.NewReader(commands))
	ran := 0
	for sc.Scan() {
		line := strings.TrimSpace(trailingComment.ReplaceAllString(sc.Text(), ""))
		if line == "" {
			continue
		}
		ran++
		cmdLine := swap.Replace(line)
		if bg, ok := strings.CutSuffix(cmdLine, "&"); ok {
			cmd := exec.Command("sh", "-c", "exec "+strings.TrimSpace(bg))
			cmd.Dir, cmd.Env = dir, env
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			t.Cleanup(func() {
				envtest.Terminate(cmd.Process, done, 30*time.Second)
				if t.Failed() {
					t.Logf("%s:\n%s", line, out.String())
				}
			})
			// The next commands need it leading.
			if !waitUntil(30*time.Second, func() bool {
				resp, err := http.Get("http://" + nodeAddr + "/status")
				if err != nil {
					return false
				}
				defer resp.Body.Close()
				var b strings.Builder
				_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
				return strings.Contains(b.String(), `"leading": true`) || strings.Contains(b.String(), `"leading":true`)
			}) {
				t.Fatalf("%s: not leading within 30 s", line)
			}
			continue
		}
		cmd := exec.Command("sh", "-c", cmdLine)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%s", line, err, out)
			continue
		}
		t.Logf("$ %s\n%s", line, out)
	}
	if ran < 5 {
		t.Fatalf("ran %d commands from the README's block; the markers or the block moved", ran)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(kinds) != 1 || !strings.HasPrefix(kinds[0], "/jobs/invoice-run manual token ") {
		t.Errorf("the service saw %q, want the one run now (the schedule's next tick is minutes away)", kinds)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "backup.done")); err != nil || !strings.HasPrefix(string(b), "backup under token ") {
		t.Errorf("baton lock ... ./backup.sh: %q, %v", b, err)
	}
}
