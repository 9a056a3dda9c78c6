package httpapi_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/httpapi"
	"github.com/batonhq/baton/schedulerhost"
)

// A service that embeds baton asks the node for its verdicts.
func ExampleNode_Healthy() {
	mem := memory.New(election.Timing{})
	quiet := slog.New(slog.DiscardHandler)
	host, err := schedulerhost.New(schedulerhost.Config{
		Jobs:     []schedulerhost.Job{{Name: "report", Schedule: "@hourly", Run: func(context.Context) error { return nil }}},
		Ledger:   mem.Ledger(),
		Instance: "a",
		Logger:   quiet,
	})
	if err != nil {
		panic(err)
	}
	el, err := election.New(election.Config{Backend: mem.Candidate(), Identity: election.Identity{ID: "a"}, Election: "reports", Logger: quiet})
	if err != nil {
		panic(err)
	}
	n, err := httpapi.New(httpapi.Config{Elector: el, Host: host, Election: "reports", Logger: quiet})
	if err != nil {
		panic(err)
	}
	fmt.Println("before Run:", n.Healthy())

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- n.Run(ctx, nil) }() // nil: no HTTP server of its own; n.Handler() serves the API
	for !el.IsLeader() {
		time.Sleep(time.Millisecond)
	}
	fmt.Println("leading:", n.Healthy(), n.Ready())

	cancel()
	<-done
	fmt.Println("stopped:", n.Healthy().OK, n.Ready())
	// Output:
	// before Run: election loop not running
	// leading: ok ok
	// stopped: false shutting down; election loop not running
}

// An operator checks the drain and release timeouts against Kubernetes'
// terminationGracePeriodSeconds.
func ExampleCheckGracePeriod() {
	cfg := httpapi.ShutdownConfig{ShutdownTimeout: 14 * time.Second}
	fmt.Println(httpapi.ShutdownBudget(cfg))
	fmt.Println(httpapi.CheckGracePeriod(cfg, 30*time.Second))
	fmt.Println(httpapi.CheckGracePeriod(httpapi.ShutdownConfig{}, 30*time.Second))
	// Output:
	// 30s
	// <nil>
	// httpapi: grace period too short: the shutdown budget 41s (shutdown_timeout 25s + kill_grace 5s + kill_grace_margin 1s + release_timeout 5s + http_shutdown_timeout 5s) exceeds the grace period 30s by 11s
}
