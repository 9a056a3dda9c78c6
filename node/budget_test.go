package node

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/jobsfile"
	"github.com/batonhq/baton/schedulerhost"
)

func TestShutdownBudget(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  ShutdownConfig
		want time.Duration
	}{
		// 25 s drain + 5 s kill grace + 1 s margin + 5 s release + 5 s HTTP.
		{"defaults", ShutdownConfig{}, 41 * time.Second},
		{"all set", ShutdownConfig{ShutdownTimeout: 10 * time.Second, KillGrace: 2 * time.Second, ReleaseTimeout: 3 * time.Second}, 21 * time.Second},
		{"only the drain set", ShutdownConfig{ShutdownTimeout: time.Minute}, 76 * time.Second},
		{"negative means default", ShutdownConfig{ShutdownTimeout: -1, KillGrace: -1, ReleaseTimeout: -1}, 41 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ShutdownBudget(tc.cfg); got != tc.want {
				t.Errorf("ShutdownBudget(%+v) = %v, want %v", tc.cfg, got, tc.want)
			}
			var sum time.Duration
			for _, p := range tc.cfg.Parts() {
				sum += p.Max
			}
			if sum != tc.want {
				t.Errorf("Parts sum to %v, want %v", sum, tc.want)
			}
		})
	}
}

func TestShutdownConfig_Parts_InOrder(t *testing.T) {
	got := ShutdownConfig{ShutdownTimeout: 10 * time.Second, KillGrace: 2 * time.Second, ReleaseTimeout: 3 * time.Second}.Parts()
	want := []BudgetPart{
		{"shutdown_timeout", 10 * time.Second},
		{"kill_grace", 2 * time.Second},
		{"kill_grace_margin", KillGraceMargin},
		{"release_timeout", 3 * time.Second},
		{"http_shutdown_timeout", HTTPShutdownTimeout},
	}
	if len(got) != len(want) {
		t.Fatalf("Parts = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("part %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestCheckGracePeriod(t *testing.T) {
	short := ShutdownConfig{ShutdownTimeout: 10 * time.Second, KillGrace: 2 * time.Second, ReleaseTimeout: 3 * time.Second} // 21 s
	for _, tc := range []struct {
		name  string
		cfg   ShutdownConfig
		grace time.Duration
		want  []string // substrings of the error; nil: fits
	}{
		{"defaults in Kubernetes' default 30 s", ShutdownConfig{}, 30 * time.Second, []string{
			"node: grace period too short", "shutdown budget 41s", "exceeds the grace period 30s by 11s",
			"shutdown_timeout 25s + kill_grace 5s + kill_grace_margin 1s + release_timeout 5s + http_shutdown_timeout 5s",
		}},
		{"defaults in 60 s", ShutdownConfig{}, time.Minute, nil},
		{"exactly the budget fits", short, 21 * time.Second, nil},
		{"one nanosecond short", short, 21*time.Second - 1, []string{"shutdown budget 21s", "by 1ns",
			"shutdown_timeout 10s + kill_grace 2s + kill_grace_margin 1s + release_timeout 3s + http_shutdown_timeout 5s"}},
		{"no grace at all", short, 0, []string{"exceeds the grace period 0s by 21s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckGracePeriod(tc.cfg, tc.grace)
			if tc.want == nil {
				if err != nil {
					t.Errorf("CheckGracePeriod(%v) = %v, want nil", tc.grace, err)
				}
				return
			}
			if !errors.Is(err, ErrGracePeriodTooShort) {
				t.Fatalf("CheckGracePeriod(%v) = %v, want ErrGracePeriodTooShort", tc.grace, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestHostConfig_KillGrace: the Host waits the commands' kill grace plus
// the margin, and the budget of the same file counts both.
func TestHostConfig_KillGrace(t *testing.T) {
	for _, tc := range []struct {
		name      string
		yaml      string
		wantGrace time.Duration // the Host's KillGrace
	}{
		{"default", "jobs:\n  - name: j\n    schedule: \"@every 1s\"\n    command: \"true\"\n", 6 * time.Second},
		{"set", "election:\n  kill_grace: 2s\njobs:\n  - name: j\n    schedule: \"@every 1s\"\n    command: \"true\"\n", 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := jobsfile.Parse("jobs.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			hc, _ := HostConfig(f, "e", "n1", nil)
			if hc.KillGrace != tc.wantGrace || len(hc.Jobs) != 1 || hc.Instance != "n1" {
				t.Errorf("HostConfig: KillGrace %v, %d jobs, instance %q; want %v, 1, n1", hc.KillGrace, len(hc.Jobs), hc.Instance, tc.wantGrace)
			}
			parts := ShutdownConfigOf(f).Parts()
			if g := parts[1].Max + parts[2].Max; g != tc.wantGrace {
				t.Errorf("budget's kill_grace + margin = %v, want the Host's %v", g, tc.wantGrace)
			}
		})
	}
}

// TestHostConfig_SafetyMarginForCommands: a safety margin too short to
// kill a lost term's commands before the lease can pass is refused,
// naming the field, when there are command jobs; not otherwise.
func TestHostConfig_SafetyMarginForCommands(t *testing.T) {
	const cmdJob = "jobs:\n  - name: j\n    schedule: \"@every 1s\"\n    command: \"true\"\n"
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"too short", "election:\n  ttl: 2s\n  safety_margin: 50ms\n" + cmdJob,
			"jobs.yaml:1: election.safety_margin: 50ms: below 100ms, which command jobs need"},
		{"enough", "election:\n  ttl: 2s\n  safety_margin: 100ms\n" + cmdJob, ""},
		{"no command job", "election:\n  ttl: 2s\n  safety_margin: 50ms\njobs:\n  - name: j\n    schedule: \"@every 1s\"\n    builtin: log\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := jobsfile.Parse("jobs.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			_, err = HostConfig(f, "e", "n1", nil)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("HostConfig: %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Errorf("HostConfig: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestHostConfig_RetriesAndJitter: the jobs file's retry and jitter
// fields reach the Host's job; a jitter as long as the period is the
// Host's error, located at the job's line.
func TestHostConfig_RetriesAndJitter(t *testing.T) {
	f, err := jobsfile.Parse("jobs.yaml", []byte("jobs:\n  - name: j\n    schedule: \"0 * * * * *\"\n    command: \"true\"\n"+
		"    retries: 2\n    retry_backoff: 3s\n    retry_backoff_max: 20s\n    jitter: 60s\n"))
	if err != nil {
		t.Fatal(err)
	}
	hc, _ := HostConfig(f, "e", "n1", nil)
	if j := hc.Jobs[0]; j.Retries != 2 || j.RetryBackoff != 3*time.Second || j.RetryBackoffMax != 20*time.Second || j.Jitter != time.Minute {
		t.Errorf("HostConfig job = %+v, want retries 2, backoff 3s to 20s, jitter 1m", j)
	}
	_, err = schedulerhost.New(hc)
	if got := f.Locate(err); got == nil || !strings.HasPrefix(got.Error(), "jobs.yaml:2: jobs[0]: Jitter 1m0s: must be shorter than") {
		t.Errorf("New: %v, want the jitter error at the job's line", got)
	}
}
