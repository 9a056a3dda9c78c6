package memory_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
)

// A failover after a loss: the leader's path to the store is cut, as by
// a network partition. It cannot renew, so its term ends at its local
// deadline (last renewal + TTL - SafetyMargin), cause ErrLeadershipLost;
// the store lets the lease expire one TTL after that renewal, and the
// other candidate leads with a greater fencing token.
func Example() {
	store := memory.New(election.Timing{TTL: time.Second})
	quiet := slog.New(slog.DiscardHandler)
	type event struct {
		token uint64
		lost  bool
	}
	candidate := func(id string, backend *memory.Backend) (*election.Elector, func(context.Context, election.Term) error, <-chan event) {
		e, err := election.New(election.Config{Backend: backend, Identity: election.Identity{ID: id}, Logger: quiet})
		if err != nil {
			panic(err)
		}
		events := make(chan event, 2)
		lead := func(ctx context.Context, term election.Term) error {
			events <- event{token: term.Token()}
			<-ctx.Done()
			events <- event{token: term.Token(), lost: errors.Is(context.Cause(ctx), election.ErrLeadershipLost)}
			return nil
		}
		return e, lead, events
	}
	pathA := store.Candidate()
	a, leadA, eventsA := candidate("a", pathA)
	b, leadB, eventsB := candidate("b", store.Candidate())

	ctx, shutdown := context.WithCancel(context.Background())
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	go func() { doneA <- a.Run(ctx, leadA) }()
	fmt.Println("a leads with token", (<-eventsA).token)
	go func() { doneB <- b.Run(ctx, leadB) }()

	pathA.Cut() // a's requests to the store hang from now on
	e := <-eventsA
	fmt.Printf("a's term %d over, leadership lost: %v\n", e.token, e.lost)
	fmt.Println("b leads with token", (<-eventsB).token)
	leader, _ := store.Leader(ctx)
	fmt.Println("the store's leader:", leader.Identity.ID, leader.Token)

	pathA.Heal()
	shutdown()
	<-doneA
	<-doneB
	// Output:
	// a leads with token 1
	// a's term 1 over, leadership lost: true
	// b leads with token 2
	// the store's leader: b 2
}
