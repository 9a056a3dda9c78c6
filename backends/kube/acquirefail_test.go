package kube_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/kube"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/internal/kubetest"
)

// pollUntil calls ok every 20 ms until it returns true or deadline has
// passed.
func pollUntil(deadline time.Time, ok func() bool) {
	for !ok() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}

type failCounter struct{ n atomic.Int64 }

func (c *failCounter) AcquireFailed(error)                   { c.n.Add(1) }
func (c *failCounter) Elected(uint64)                        {}
func (c *failCounter) TermEnded(uint64, time.Duration, bool) {}

// A follower that cannot campaign says so: with a namespace that does
// not exist (an administrator's token), or a token the server refuses,
// the Elector warns at once naming the error, counts every failure, warns
// about the same error once only within a minute, and reports
// AcquireFailing after a few failures in a row.
func TestElector_CannotCampaignIsReported(t *testing.T) {
	s := server(t)
	cases := []struct {
		name   string
		client func(t *testing.T) *kube.Client
		ns     string
		want   string // as the text log quotes it
	}{
		{"namespace missing", func(t *testing.T) *kube.Client { return client(t, "") }, "nope", `namespaces \"nope\" not found`},
		{"token refused", func(t *testing.T) *kube.Client {
			c, err := kube.NewClient(kube.ClientConfig{Server: s.URL, Token: "expired-" + kubetest.Token, CAFile: s.CAFile, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.CloseIdleConnections)
			return c
		}, "", "401"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t, kube.Config{Client: tc.client(t), Namespace: tc.ns, Name: leaseName(t)})
			var logs envtest.Buffer
			var fails failCounter
			el, err := election.New(election.Config{
				Backend: b, Identity: election.Identity{ID: "a"}, Observer: &fails,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- el.Run(ctx, func(ctx context.Context, _ election.Term) error { <-ctx.Done(); return nil })
			}()
			defer func() {
				cancel()
				<-done
			}()
			start := time.Now()
			pollUntil(start.Add(15*time.Second), func() bool { return strings.Contains(logs.String(), "level=WARN") })
			if !strings.Contains(logs.String(), "level=WARN") {
				t.Fatalf("no WARN in %v; %d failures counted; the log:\n%s", time.Since(start).Round(time.Millisecond), fails.n.Load(), logs.String())
			}
			t.Logf("first WARN after %v", time.Since(start).Round(time.Millisecond))
			if !strings.Contains(logs.String(), tc.want) {
				t.Errorf("the warning does not say %q:\n%s", tc.want, logs.String())
			}
			pollUntil(start.Add(30*time.Second), func() bool { return el.AcquireFailing() != nil })
			err = el.AcquireFailing()
			if want := strings.ReplaceAll(tc.want, `\"`, `"`); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("AcquireFailing() = %v after %v, want an error saying %q", err, time.Since(start).Round(time.Millisecond), tc.want)
			}
			t.Logf("failing after %v: %v", time.Since(start).Round(time.Millisecond), err)
			if n := fails.n.Load(); n < election.AcquireFailingAfter {
				t.Errorf("%d failures counted, want %d or more", n, election.AcquireFailingAfter)
			}
			if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
				t.Errorf("%d warnings within %v, want 1 (the same error, warned once a minute at most):\n%s", n, time.Since(start).Round(time.Millisecond), logs.String())
			}
		})
	}
}
