package baton_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
)

// A failover: two instances of a service campaign in one election. The
// first leads and runs the job; when it stops, the second leads, with a
// greater fencing token, and runs the next tick. The follower runs
// nothing meanwhile.
func Example_failover() {
	store := memory.New(election.Timing{}) // one process's election; etcd, Consul, ... in production
	instance := func(name string) (*baton.Baton, <-chan uint64) {
		tokens := make(chan uint64, 1)
		b, err := baton.New(baton.Config{
			Backend:  store.Candidate(),
			Election: "reports",
			Instance: name,
			Jobs: []baton.Job{{
				Name:     "report",
				Schedule: "@every 1s",
				Run: func(ctx context.Context) error {
					token, _ := election.TokenFromContext(ctx) // the fencing token of the term
					select {
					case tokens <- token:
					default: // a later tick: the example reads the first
					}
					return nil
				},
			}},
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			panic(err)
		}
		return b, tokens
	}
	a, ranA := instance("node-a")
	b, ranB := instance("node-b")

	ctxA, stopA := context.WithCancel(context.Background())
	doneA := make(chan error, 1)
	go func() { doneA <- a.Run(ctxA) }()
	fmt.Println("node-a ran report with token", <-ranA)

	ctxB, stopB := context.WithCancel(context.Background())
	doneB := make(chan error, 1)
	go func() { doneB <- b.Run(ctxB) }() // campaigns; waits while node-a leads
	fmt.Println("node-b leading:", b.Leading())

	stopA() // node-a shuts down: drains, releases the lease
	fmt.Println("node-a stopped:", <-doneA)
	fmt.Println("node-b ran report with token", <-ranB)
	fmt.Println("node-b leading:", b.Leading())

	stopB()
	fmt.Println("node-b stopped:", <-doneB)
	// Output:
	// node-a ran report with token 1
	// node-b leading: false
	// node-a stopped: <nil>
	// node-b ran report with token 2
	// node-b leading: true
	// node-b stopped: <nil>
}
