package election_test

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
)

// A job reads its election beside its token from the term's context.
func TestElectionFromContext_BesideTheToken(t *testing.T) {
	mem := memory.New(election.Timing{TTL: 5 * time.Second})
	e, err := election.New(election.Config{Backend: mem.Candidate(), Identity: election.Identity{ID: "a"}, Election: "reports", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type seen struct {
		name  string
		ok    bool
		token uint64
	}
	got := make(chan seen, 1)
	err = e.Run(ctx, func(_ context.Context, term election.Term) error {
		name, ok := election.ElectionFromContext(term.Context())
		tok, _ := election.TokenFromContext(term.Context())
		got <- seen{name, ok, tok}
		cancel()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s := <-got
	if s.name != "reports" || !s.ok || s.token == 0 {
		t.Errorf("ElectionFromContext = %q, %v (token %d); want \"reports\", true and a token", s.name, s.ok, s.token)
	}
	if name, ok := election.ElectionFromContext(election.NewTerm(context.Background(), 1).Context()); ok || name != "" {
		t.Errorf("NewTerm's context: ElectionFromContext = %q, %v; want none", name, ok)
	}
	c := election.ContextWithElection(context.Background(), "billing")
	if name, ok := election.ElectionFromContext(c); name != "billing" || !ok {
		t.Errorf("ContextWithElection: %q, %v", name, ok)
	}
}
