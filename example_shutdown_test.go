package baton_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
)

// A graceful shutdown: the instance's context ends while a run is in
// flight. The run keeps its own context and finishes (it has
// ShutdownTimeout to do so), then the lease is released, and Run returns
// nil. A follower could lead at once.
func Example_gracefulShutdown() {
	store := memory.New(election.Timing{}) // one process's election; etcd, Consul, ... in production
	started := make(chan struct{}, 1)
	b, err := baton.New(baton.Config{
		Backend:  store.Candidate(),
		Election: "reports",
		Instance: "node-1",
		Jobs: []baton.Job{{
			Name:     "report",
			Schedule: "@every 1s",
			Run: func(ctx context.Context) error {
				fmt.Println("report: started")
				select {
				case started <- struct{}{}:
				default: // a later tick (the example shuts down during the first)
				}
				time.Sleep(200 * time.Millisecond) // the work, which a shutdown lets finish
				fmt.Println("report: finished, its context still live:", ctx.Err() == nil)
				return nil
			},
		}},
		ShutdownTimeout: 5 * time.Second, // after this the run's context is cancelled
		Logger:          slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	ctx, shutdown := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()

	<-started
	shutdown() // as on SIGTERM
	err = <-done
	fmt.Println("Run returned:", err)
	fmt.Println("leading:", b.Leading())

	_, err = store.Leader(context.Background())
	fmt.Println("lease released:", errors.Is(err, election.ErrNoLeader))
	// Output:
	// report: started
	// report: finished, its context still live: true
	// Run returned: <nil>
	// leading: false
	// lease released: true
}
