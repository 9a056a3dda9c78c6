package httpapi

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/schedulerhost"
)

// memParts returns an Elector and a Host running job, with shutdown as
// the Host's ShutdownTimeout (zero: the default), on the in-memory backend,
// as candidate id of election "e".
func memParts(t *testing.T, mem *memory.Server, id string, job schedulerhost.Job, shutdown time.Duration) (*election.Elector, *schedulerhost.Host) {
	t.Helper()
	discard := slog.New(slog.DiscardHandler)
	host, err := schedulerhost.New(schedulerhost.Config{
		Jobs:            []schedulerhost.Job{job},
		ShutdownTimeout: shutdown,
		Ledger:          mem.Ledger(),
		Instance:        id,
		Logger:          discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	el, err := election.New(election.Config{Backend: mem.Candidate(), Identity: election.Identity{ID: id}, Election: "e", Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	return el, host
}

// startNode runs n until the test ends.
func startNode(t *testing.T, n *API) {
	envtest.Background(t, func(ctx context.Context) error { return runAPI(ctx, n) })
}

func TestNew_Validates(t *testing.T) {
	el, host := memParts(t, memory.New(election.Timing{}), "a",
		schedulerhost.Job{Name: "j", Schedule: "@every 1s", Run: func(context.Context) error { return nil }}, 0)
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // substrings of the error; nil: valid
	}{
		{"valid", Config{Elector: el, Host: host, Election: "e"}, nil},
		{"zero", Config{}, []string{"Elector is required", "Host is required", "Election is required"}},
		{"negative cooldown", Config{Elector: el, Host: host, Election: "e", StepDownCooldown: -time.Second},
			[]string{"StepDownCooldown -1s: must not be negative"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			envtest.WantErrors(t, err, tc.want)
		})
	}
}
