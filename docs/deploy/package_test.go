package deploy_test

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/httpapi"
	"github.com/batonhq/baton/internal/cli"
)

// unitKeys reads a systemd unit's Key=Value lines (the last of a key wins).
func unitKeys(t *testing.T, name string) map[string]string {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			keys[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// The packages' template unit (tools/release installs it with the
// example config): the instance names the config file, the unit stops
// within baton's shutdown budget for the example, and it delegates a
// cgroup subtree to baton so that a run's processes can be killed.
func TestPackageUnit(t *testing.T) {
	raw, err := os.ReadFile("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, _ := config(t, "example.yaml", raw)
	keys := unitKeys(t, "baton@.service")
	want := map[string]string{
		"ExecStart":           "/usr/bin/baton run --config /etc/baton/%i.yaml",
		"ConditionPathExists": "/etc/baton/%i.yaml",
		"KillSignal":          "SIGTERM",
		"Delegate":            "yes",
		"User":                "baton",
		"ExecReload":          "/bin/kill -HUP $MAINPID",
		"NoNewPrivileges":     "yes",
		"WantedBy":            "multi-user.target",
		"Environment":         "BATON_LOG_FORMAT=json",
	}
	for k, v := range want {
		if keys[k] != v {
			t.Errorf("baton@.service %s=%q, want %q", k, keys[k], v)
		}
	}
	budget := httpapi.ShutdownBudget(cli.ShutdownConfigOf(f))
	stop, err := strconv.Atoi(keys["TimeoutStopSec"])
	if err != nil || time.Duration(stop)*time.Second <= budget {
		t.Errorf("TimeoutStopSec %q: want seconds above baton's shutdown budget %v for example.yaml", keys["TimeoutStopSec"], budget)
	}
}
