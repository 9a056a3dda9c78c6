package schedulerhost_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/schedulerhost"
)

const zoneChildEnv = "BATON_TEST_NO_ZONEINFO"

// The zones load in a minimal container without zoneinfo: the DST tests
// run again in a child process whose ZONEINFO and GOROOT are empty
// directories and, where unshare(1) may mount (a user and mount
// namespace), with /usr/share/zoneinfo hidden under an empty directory
// too. A child process because time.LoadLocation reads ZONEINFO once per
// process, and then still looks in the system directories.
func TestZones_WithoutZoneinfo(t *testing.T) {
	if os.Getenv(zoneChildEnv) != "" {
		t.Skip("in the child")
	}
	empty := t.TempDir()
	args := []string{os.Args[0], "-test.run=^(TestParseSchedule_DST|TestHost_DST|TestZones_Child)$", "-test.count=1", "-test.v"}
	hidden := false
	if _, err := os.Stat("/usr/share/zoneinfo"); err != nil {
		hidden = true // nothing to hide
	} else if exec.Command("unshare", "-rm", "true").Run() == nil {
		args = append([]string{"unshare", "-rm", "sh", "-c", `mount --bind "$0" /usr/share/zoneinfo && exec "$@"`, empty}, args...)
		hidden = true
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), zoneChildEnv+"=1", "ZONEINFO="+empty, "GOROOT="+empty)
	if hidden {
		cmd.Env = append(cmd.Env, zoneChildEnv+"_HIDDEN=1")
	}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestZones_Child") {
		t.Fatalf("child (%q): %v\n%s", args, err, out)
	}
	if !hidden {
		t.Log("/usr/share/zoneinfo was not hidden (unshare -rm not allowed here): the child ran with ZONEINFO and GOROOT empty only")
	}
}

// In the child: the system zoneinfo is out of reach (when it could be
// hidden), and the zones still load.
func TestZones_Child(t *testing.T) {
	if os.Getenv(zoneChildEnv) == "" {
		t.Skip("only in the child process of TestZones_WithoutZoneinfo")
	}
	if os.Getenv(zoneChildEnv+"_HIDDEN") != "" {
		if _, err := os.Stat("/usr/share/zoneinfo/America/New_York"); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("system zoneinfo still visible: %v", err)
		}
	}
	for _, z := range []string{newYork, berlin, lordHowe} {
		if _, err := time.LoadLocation(z); err != nil {
			t.Errorf("LoadLocation(%q): %v", z, err)
		}
		if _, err := schedulerhost.ParseSchedule("CRON_TZ=" + z + " 30 2 * * *"); err != nil {
			t.Errorf("ParseSchedule: %v", err)
		}
	}
}

// An unknown zone in CRON_TZ= is an error naming the job, the field and
// the value.
func TestConfig_UnknownZone(t *testing.T) {
	cfg := schedulerhost.Config{Jobs: []schedulerhost.Job{{
		Name: "report", Schedule: "CRON_TZ=Mars/Olympus_Mons 30 2 * * *", Run: func(context.Context) error { return nil },
	}}}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("Validate: no error")
	}
	for _, want := range []string{`job "report"`, "Schedule", "Mars/Olympus_Mons"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v: does not name %s", err, want)
		}
	}
	t.Log(err)
}
