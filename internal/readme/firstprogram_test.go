package readme_test

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/etcdtest"
)

// firstBlock returns the README's first fenced code block: its language
// and its text.
func firstBlock(t *testing.T) (lang, code string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n```")
	if i < 0 {
		t.Fatal("README.md: no code block")
	}
	s = s[i+len("\n```"):]
	nl := strings.Index(s, "\n")
	lang, s = s[:nl], s[nl+1:]
	j := strings.Index(s, "\n```")
	if j < 0 {
		t.Fatal("README.md: its first code block does not end")
	}
	return lang, s[:j+1]
}

// TestREADME_FirstProgram: the README's first code block is the program
// in testdata/firstprogram, verbatim; it builds, and run against a real
// etcd it leads, runs its job, and stops cleanly on SIGTERM.
func TestREADME_FirstProgram(t *testing.T) {
	lang, code := firstBlock(t)
	want, err := os.ReadFile(filepath.Join("testdata", "firstprogram", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if lang != "go" || code != string(want) {
		t.Fatalf("README.md's first code block (```%s, %d lines) is not testdata/firstprogram/main.go verbatim", lang, strings.Count(code, "\n"))
	}
	lines := strings.Count(code, "\n")
	if lines > 20 {
		t.Errorf("README.md's first code block: %d lines, want at most 20", lines)
	}
	t.Logf("the README's first code block: a complete program of %d lines", lines)

	bin := filepath.Join(t.TempDir(), "firstprogram")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/firstprogram").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	srv := etcdtest.Start(t)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "ETCD_ENDPOINT="+srv.Endpoint())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	ran := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		closed := false
		for sc.Scan() {
			if !closed && strings.Contains(sc.Text(), "report sent") {
				close(ran)
				closed = true
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("the program's job did not run within 30 s")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after SIGTERM the program exited with %v, want status 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the program did not stop within 30 s of SIGTERM")
	}
}
