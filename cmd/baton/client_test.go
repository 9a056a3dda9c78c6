package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The client commands read node.admin_token_file relative to the config
// file's directory, and an error about it names the file, line and field
// it came from. The working directory (the package's) holds no such file.
func TestClient_AdminTokenFileFromTheConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := write(t, dir, "baton.yaml", fmt.Sprintf(`election:
  name: client-test
node:
  http: %s
  admin_token_file: admin-token
jobs:
  - {name: report, schedule: "@every 1m", http: {url: "http://127.0.0.1:1/"}}
`, freeAddr(t)))
	// No token file yet: the error names where the value came from.
	err := runPause(context.Background(), []string{"report", "--config", cfg}, io.Discard, io.Discard)
	want := cfg + ":5: node.admin_token_file: --admin-token-file: open " + filepath.Join(dir, "admin-token") + ": no such file"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("no token file: %v\nwant prefix %s", err, want)
	}
	// With the token beside the config file, the client reads it and asks
	// the node (which is not there).
	write(t, dir, "admin-token", "s3cret\n")
	err = runPause(context.Background(), []string{"report", "--config", cfg}, io.Discard, io.Discard)
	if want := cfg + ":4: node.http: POST http://"; err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("token file beside the config: %v, want the node's connection refused, prefixed %q", err, want)
	}
	if _, serr := os.Stat("admin-token"); serr == nil {
		t.Fatal("the package directory holds an admin-token file: the test proves nothing")
	}
}
