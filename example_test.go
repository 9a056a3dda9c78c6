package baton_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
)

// A service that embeds baton asks the instance for its verdicts: before
// Run, while it leads, and once Run has returned.
func ExampleBaton_Healthy() {
	mem := memory.New(election.Timing{})
	b, err := baton.New(baton.Config{
		Backend:  mem.Candidate(),
		Election: "reports",
		Instance: "a",
		Jobs:     []baton.Job{{Name: "report", Schedule: "@hourly", Run: func(context.Context) error { return nil }}},
		Logger:   slog.New(slog.DiscardHandler),
		Advanced: baton.Advanced{Ledger: mem.Ledger()},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("before Run:", b.Healthy())

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- b.Run(ctx) }() // no HTTP server of its own; b.Handler() serves the API
	for !b.Leading() {
		time.Sleep(time.Millisecond)
	}
	fmt.Println("leading:", b.Healthy(), b.Ready())

	cancel()
	<-done
	fmt.Println("stopped:", b.Healthy().OK, b.Ready())
	// Output:
	// before Run: election loop not running
	// leading: ok ok
	// stopped: false shutting down; election loop not running
}
