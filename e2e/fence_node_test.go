package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/batonhq/baton/internal/envtest"
)

// TestFenceSidecarNode is TestFence with `baton run` sidecars, each in
// front of its own instance of a Node.js service (testdata/fenceapp.js)
// whose write goes through the shipped receiver module
// (receivers/node/baton-fence.js): the leading sidecar's request is held
// in its app, sidecar and app are SIGSTOPped past the TTL, the other
// sidecar leads and its request writes; then the held request resumes
// with its stale token. Guarded, the module refuses it (409) and the
// data file holds only the new term's writes; unguarded, the stale write
// lands. The apps share the fence file and the data file.
func TestFenceSidecarNode(t *testing.T) {
	skipUnlessLong(t, "starts servers, sidecars and Node.js apps")
	if _, err := exec.LookPath("node"); err != nil {
		envtest.Unavailable(t, "node (the app behind the sidecars): %v", err)
	}
	eachBackend(t, "etcd,postgres", func(t *testing.T, name string) {
		for _, guarded := range []bool{true, false} {
			label := map[bool]string{true: "guarded", false: "unguarded"}[guarded]
			t.Run(label, func(t *testing.T) { runFence(t, name, guarded, nodeRig()) })
		}
	})
}

// nodeRig is the Node.js app behind each sidecar; its resource is the
// data file, one line "TOKEN INSTANCE" per write.
func nodeRig() fenceRig {
	var data string
	return fenceRig{
		label: "node",
		setup: func(t *testing.T, sc *scenario, events string, guarded bool) string {
			data = filepath.Join(sc.dir, "data")
			sc.sidecar = &sidecar{configs: map[int]string{}}
			for i := range 2 {
				port := startFenceApp(t, sc, i, events, data, guarded)
				sc.sidecar.configs[i] = fenceSidecarConfig(t, sc, i, port)
			}
			return "jobs: []\n" // the sidecars' jobs are in their configs
		},
		read: func(t *testing.T) ([]fenceWrite, fenceWrite) {
			b, err := os.ReadFile(data)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			var log []fenceWrite
			for n, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				f := strings.Fields(line)
				if len(f) == 0 {
					continue
				}
				tok, err := strconv.ParseUint(f[0], 10, 64)
				if err != nil || len(f) != 2 {
					t.Fatalf("%s:%d: %q: want TOKEN INSTANCE", data, n+1, line)
				}
				log = append(log, fenceWrite{token: tok, instance: f[1]})
			}
			var last fenceWrite
			if len(log) > 0 {
				last = log[len(log)-1] // the file's current value: its last write
			}
			return log, last
		},
	}
}

// startFenceApp starts slot i's app and returns its port; it is stopped
// when t ends.
func startFenceApp(t *testing.T, sc *scenario, i int, events, data string, guarded bool) int {
	t.Helper()
	logf, err := os.Create(filepath.Join(sc.dir, fmt.Sprintf("app-%d.log", i+1)))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	g := map[bool]string{true: "1", false: "0"}[guarded]
	cmd := exec.Command("node", "testdata/fenceapp.js", events, data, filepath.Join(sc.dir, "fence.json"), sc.dir, g)
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("app: %v", err)
	}
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("app %d: no port: %v (see app-%d.log)", i+1, err, i+1)
	}
	port, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("app %d: port %q: %v", i+1, line, err)
	}
	return port
}

// fenceSidecarConfig writes slot i's sidecar config: the backend's
// server reached directly (no fault proxy: the fault here is the pause),
// and one HTTP job calling its app's /write every 2 s.
func fenceSidecarConfig(t *testing.T, sc *scenario, i, port int) string {
	t.Helper()
	be := sc.be
	var b strings.Builder
	fmt.Fprintf(&b, "election:\n  name: %s\n  ttl: %v\n  retry_period: 500ms\n  shutdown_timeout: 5s\n  release_timeout: 3s\n", sc.election, be.ttl)
	if be.poll > 0 {
		fmt.Fprintf(&b, "  poll_interval: %v\n", be.poll)
	}
	b.WriteString("backend:\n")
	args := be.args(be.targetsOf(i))
	for j := 0; j+1 < len(args); j += 2 {
		key := strings.ReplaceAll(strings.TrimPrefix(args[j], "--"), "-", "_")
		if key == "backend" {
			key = "kind"
		}
		fmt.Fprintf(&b, "  %s: %s\n", key, strconv.Quote(args[j+1]))
	}
	fmt.Fprintf(&b, "node:\n  http: 127.0.0.1:0\n  log_format: json\n  log_level: %s\n", logLevel())
	fmt.Fprintf(&b, "jobs:\n  - name: fenced\n    schedule: \"*/2 * * * * *\"\n    http: {url: \"http://127.0.0.1:%d/write\", method: POST}\n", port)
	p := filepath.Join(sc.dir, fmt.Sprintf("baton-%d.yaml", i+1))
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
