package baton_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
)

// defaultIdentity builds a Baton without Config.Instance and returns the
// identity it campaigns with.
func defaultIdentity(t *testing.T) string {
	t.Helper()
	b, err := baton.New(baton.Config{
		Backend: memory.New(election.Timing{}).Candidate(), Election: "ids",
		Jobs: []baton.Job{{Name: "j", Schedule: "@every 1h", Run: func(context.Context) error { return nil }}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return baton.InstanceOf(b)
}

// TestNew_DefaultInstanceIsUniquePerProcess: two copies of a program on
// one host, each with the default Config.Instance, campaign (and publish
// themselves in the registry) under different identities, HOSTNAME-PID
// as `baton run` has, never the bare host name they would share; so do
// two Batons in one process.
func TestNew_DefaultInstanceIsUniquePerProcess(t *testing.T) {
	if os.Getenv("BATON_TEST_PRINT_IDENTITY") == "1" {
		fmt.Printf("identity=%s\n", defaultIdentity(t))
		return
	}
	host, _ := os.Hostname()
	var ids []string
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestNew_DefaultInstanceIsUniquePerProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "BATON_TEST_PRINT_IDENTITY=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("copy of the program: %v: %s", err, out)
		}
		_, id, ok := strings.Cut(strings.Split(string(out), "\n")[0], "identity=")
		if !ok {
			t.Fatalf("copy of the program printed no identity: %s", out)
		}
		ids = append(ids, id)
		if want := fmt.Sprintf("%s-%d", host, cmd.Process.Pid); id != want {
			t.Errorf("default identity %q, want HOSTNAME-PID %q", id, want)
		}
	}
	if ids[0] == ids[1] {
		t.Errorf("two copies on one host share the identity %q", ids[0])
	}
	if one, two := defaultIdentity(t), defaultIdentity(t); one == two || !strings.HasPrefix(two, one) {
		t.Errorf("two Batons in one process: identities %q and %q, want distinct, the second %q-N", one, two, one)
	}
}
