package election_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/batonhq/baton/election"
)

var errStale = errors.New("ledger says stale")

func TestTerm_Lose_EndsLeaseAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, e := newMemElector(t, "a")
		ctx, cancel := context.WithCancel(context.Background())
		type seen struct {
			token                uint64
			ctxToken             uint64
			checkBefore, after   error
			leadCause, termCause error
		}
		terms := make(chan seen, 4)
		done := make(chan error)
		go func() {
			done <- e.Run(ctx, func(tctx context.Context, term election.Term) error {
				var s seen
				s.token = term.Token()
				s.ctxToken, _ = election.TokenFromContext(term.Context())
				s.checkBefore = term.Check()
				if s.token == 1 {
					term.Lose(errStale)
				}
				<-tctx.Done()
				s.after = term.Check()
				s.leadCause = context.Cause(tctx)
				if term.Context().Err() != nil {
					s.termCause = context.Cause(term.Context())
				}
				terms <- s
				return nil
			})
		}()
		first := <-terms
		if first.checkBefore != nil || first.ctxToken != first.token {
			t.Errorf("before Lose: Check = %v, token in context %d, want nil and %d", first.checkBefore, first.ctxToken, first.token)
		}
		for _, err := range []error{first.after, first.leadCause, first.termCause} {
			if !errors.Is(err, election.ErrLeadershipLost) || !errors.Is(err, errStale) {
				t.Errorf("after Lose: %v, want ErrLeadershipLost and the reason", err)
			}
		}
		synctest.Wait()
		ti, ok := e.Term()
		if !ok || ti.Token <= first.token {
			t.Errorf("after Lose: Term() = %+v, %v; want a new term", ti, ok)
		}
		cancel()
		<-done
		second := <-terms
		if !errors.Is(second.leadCause, election.ErrSteppingDown) {
			t.Errorf("second term's cause = %v, want ErrSteppingDown", second.leadCause)
		}
	})
}

func TestNewTerm_HoldsWhileContextLives(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	term := election.NewTerm(ctx, 7)
	if tok, ok := election.TokenFromContext(term.Context()); term.Token() != 7 || !ok || tok != 7 {
		t.Errorf("Token() = %d, TokenFromContext = %d, %v; want 7", term.Token(), tok, ok)
	}
	if err := term.Check(); err != nil {
		t.Errorf("Check() = %v while ctx lives", err)
	}
	cancel()
	if err := term.Check(); !errors.Is(err, context.Canceled) {
		t.Errorf("Check() = %v after ctx ended, want context.Canceled", err)
	}

	lost := election.NewTerm(context.Background(), 8)
	lost.Lose(errStale)
	lost.Lose(errors.New("later calls do nothing"))
	if err := lost.Check(); !errors.Is(err, election.ErrLeadershipLost) || !errors.Is(err, errStale) {
		t.Errorf("Check() after Lose = %v", err)
	}
	if c := context.Cause(lost.Context()); !errors.Is(c, errStale) {
		t.Errorf("Context cause after Lose = %v", c)
	}
}
