package election_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
)

// Two candidates campaign in one election. The first leads; asked to
// step down, it sees its term context end with ErrSteppingDown, drains,
// and returns; the elector releases the lease, and the second candidate
// leads with a greater fencing token. When Run's context ends, the term
// ends the same way (ErrShuttingDown), and Run returns nil once the lease
// is released.
func Example() {
	store := memory.New(election.Timing{}) // etcd, Consul, Redis, SQL or a Kubernetes Lease in production
	quiet := slog.New(slog.DiscardHandler)
	candidate := func(id string) (*election.Elector, func(context.Context, election.Term) error, <-chan struct{}) {
		e, err := election.New(election.Config{Backend: store.Candidate(), Identity: election.Identity{ID: id}, Logger: quiet})
		if err != nil {
			panic(err)
		}
		leading := make(chan struct{}, 1)
		lead := func(ctx context.Context, term election.Term) error {
			fmt.Printf("%s leads with token %d\n", id, term.Token())
			leading <- struct{}{}
			<-ctx.Done() // the leader's work runs until the term ends
			fmt.Printf("%s: %v\n", id, context.Cause(ctx))
			return nil // drained: the elector releases the lease
		}
		return e, lead, leading
	}
	a, leadA, leadingA := candidate("a")
	b, leadB, leadingB := candidate("b")

	ctx, shutdown := context.WithCancel(context.Background())
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	go func() { doneA <- a.Run(ctx, leadA) }()
	<-leadingA
	go func() { doneB <- b.Run(ctx, leadB) }() // campaigns; waits while a leads

	a.StepDown(time.Minute) // hand over; a does not campaign again for a minute
	<-leadingB
	shutdown()
	fmt.Println("a's Run:", <-doneA, "b's Run:", <-doneB)
	// Output:
	// a leads with token 1
	// a: election: stepping down
	// b leads with token 2
	// b: election: stepping down: shutdown
	// a's Run: <nil> b's Run: <nil>
}
