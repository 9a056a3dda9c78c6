package appcheck

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// hangTransport answers 200 until hung is set; then it holds every
// request until the request's context ends, as an application that hangs.
type hangTransport struct{ hung atomic.Bool }

func (h *hangTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !h.hung.Load() {
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
	}
	<-r.Context().Done()
	return nil, r.Context().Err()
}

// An application that hangs right after a good check is judged unhealthy
// within the documented bound, UnhealthyAfter × Interval + Timeout, for
// every configuration New accepts; New refuses a Timeout longer than the
// Interval, naming both, since its checks could not start every Interval.
// One left zero defaults within the other. Time is synctest's, so the figures are
// exact whatever the machine's load.
func TestRun_HungAppWithinBound(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		interval, timeout time.Duration
		refused           string // the error New must give; "" if it must accept
	}{
		{time.Second, time.Second, ""},
		{time.Second, 200 * ms, ""},
		{200 * ms, 200 * ms, ""},
		{200 * ms, time.Second, "appcheck: Timeout 1s: longer than Interval 200ms"},
		{0, 2 * time.Second, ""}, // the Interval defaults to the Timeout
		{500 * ms, 0, ""},        // the Timeout defaults to the Interval
		{0, 0, ""},               // 1 s and 1 s
	} {
		t.Run(fmt.Sprintf("interval %v timeout %v", tc.interval, tc.timeout), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, err := New(Config{URL: "http://app.test/healthz", Interval: tc.interval, Timeout: tc.timeout, UnhealthyAfter: 3})
				if err != nil {
					if tc.refused == "" || !strings.Contains(err.Error(), tc.refused) {
						t.Fatalf("New: %v, want an error with %q", err, tc.refused)
					}
					return
				}
				hungFor(t, c)
				if tc.refused != "" {
					t.Errorf("New accepted the configuration, want an error with %q", tc.refused)
				}
			})
		})
	}
}

// hungFor runs c, hangs its application right after the first (good)
// check, and fails t unless the verdict turns within the bound.
func hungFor(t *testing.T, c *Checker) {
	rt := &hangTransport{}
	c.client.Transport = rt
	cfg := c.Config()
	if cfg.Timeout > cfg.Interval {
		t.Errorf("Config after defaults: Timeout %v longer than Interval %v", cfg.Timeout, cfg.Interval)
	}
	bound := time.Duration(cfg.UnhealthyAfter)*cfg.Interval + cfg.Timeout
	var hungAt time.Time
	turned := make(chan time.Time, 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx, func(s State) {
			switch {
			case s.Healthy && s.Gate() == "" && hungAt.IsZero():
				hungAt = time.Now()
				rt.hung.Store(true)
			case !s.Healthy:
				select {
				case turned <- time.Now():
				default:
				}
			}
		})
	}()
	defer func() { cancel(); <-done }()
	select {
	case at := <-turned:
		if took := at.Sub(hungAt); hungAt.IsZero() || took > bound {
			t.Errorf("hung app judged unhealthy %v after it hung, want at most %v (unhealthy_after %d × interval %v + timeout %v)",
				took, bound, cfg.UnhealthyAfter, cfg.Interval, cfg.Timeout)
		}
	case <-time.After(10 * bound):
		t.Errorf("hung app still healthy %v after it hung, want unhealthy within %v", 10*bound, bound)
	}
}

// A Timeout or Interval left zero defaults within the other one set.
func TestNew_DefaultsKeepTimeoutWithinInterval(t *testing.T) {
	for _, tc := range []struct{ interval, timeout, wantInterval, wantTimeout time.Duration }{
		{0, 0, DefaultInterval, DefaultTimeout},
		{0, 3 * time.Second, 3 * time.Second, 3 * time.Second},
		{0, 300 * time.Millisecond, DefaultInterval, 300 * time.Millisecond},
		{250 * time.Millisecond, 0, 250 * time.Millisecond, 250 * time.Millisecond},
		{5 * time.Second, 0, 5 * time.Second, DefaultTimeout},
	} {
		c, err := New(Config{Addrs: []string{"127.0.0.1:1"}, Interval: tc.interval, Timeout: tc.timeout})
		if err != nil {
			t.Errorf("New(interval %v, timeout %v): %v", tc.interval, tc.timeout, err)
			continue
		}
		if cfg := c.Config(); cfg.Interval != tc.wantInterval || cfg.Timeout != tc.wantTimeout {
			t.Errorf("New(interval %v, timeout %v): interval %v, timeout %v; want %v, %v",
				tc.interval, tc.timeout, cfg.Interval, cfg.Timeout, tc.wantInterval, tc.wantTimeout)
		}
	}
}
