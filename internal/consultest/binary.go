package consultest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// ErrNoBinary is returned by Binary and Start when no consul binary is
// found.
var ErrNoBinary = errors.New("consultest: no consul binary (set CONSUL_BIN, run tools/consul/build.sh, or put consul on PATH)")

// Binary returns the path of the consul binary to run: $CONSUL_BIN,
// <repo>/.bin/consul, or consul on $PATH, in that order.
func Binary() (string, error) {
	if p := os.Getenv("CONSUL_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("consultest: CONSUL_BIN: %w", err)
		}
		return p, nil
	}
	if root := repoRoot(); root != "" {
		p := filepath.Join(root, ".bin", "consul")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath("consul"); err == nil {
		return p, nil
	}
	return "", ErrNoBinary
}

// repoRoot finds the root of the baton module: up from the working
// directory, then up from this source file.
func repoRoot() string {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		for {
			b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
			if err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("module github.com/batonhq/baton\n")) {
				return dir
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return ""
}
