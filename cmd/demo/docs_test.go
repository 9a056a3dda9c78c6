package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCluster_BannerAsTheDocsShowIt: the README and docs/demo.md show
// the banner of `demo cluster` as a fresh clone prints it (no
// .bin/etcdctl yet): each of their banner lines that names etcdctl is a
// line the demo prints, the endpoint aside.
func TestCluster_BannerAsTheDocsShowIt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	cmd := exec.Command(demoBinary(t), "cluster", "--nodes", "1")
	cmd.Dir = t.TempDir() // a fresh clone: no .bin/etcdctl here
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGINT) // drains, removes its data dir
		for range lines {
		}
		_ = cmd.Wait()
	}()
	var printed []string
	ep := ""
	deadline := time.After(60 * time.Second)
	for done := false; !done; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("demo cluster ended before its banner:\n%s", strings.Join(printed, "\n"))
			}
			printed = append(printed, l)
			if s, ok := strings.CutPrefix(l, "cluster: etcd "); ok {
				ep = strings.Fields(s)[0]
			}
			done = strings.HasPrefix(l, "cluster: run history:")
		case <-deadline:
			t.Fatalf("no banner within 60 s:\n%s", strings.Join(printed, "\n"))
		}
	}
	for _, doc := range []string{"README.md", filepath.Join("docs", "demo.md")} {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), doc))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, l := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(l, "cluster: ") || !strings.Contains(l, "etcdctl") {
				continue
			}
			n++
			want := strings.ReplaceAll(l, "http://127.0.0.1:40123", ep)
			found := false
			for _, p := range printed {
				found = found || p == want
			}
			if !found {
				t.Errorf("%s shows a banner line the demo does not print:\n%s\nthe demo printed:\n%s", doc, l, strings.Join(printed, "\n"))
			}
		}
		if n < 2 {
			t.Errorf("%s shows %d banner lines naming etcdctl, want the command and how to get it", doc, n)
		}
	}
}
