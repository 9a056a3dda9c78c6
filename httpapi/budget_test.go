package httpapi

import (
	"errors"
	"strings"
	"testing"
	"time"
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
			"httpapi: grace period too short", "shutdown budget 41s", "exceeds the grace period 30s by 11s",
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
