package fence_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/fence"
)

func TestFromContext(t *testing.T) {
	ctx := election.ContextWithElection(election.NewTerm(context.Background(), 42).Context(), "reports")
	if tok, ok := fence.FromContext(ctx); !ok || tok != (fence.Token{Election: "reports", N: 42}) {
		t.Errorf("FromContext = %v, %v; want election reports token 42", tok, ok)
	}
	if _, ok := fence.FromContext(election.NewTerm(context.Background(), 42).Context()); ok {
		t.Error("FromContext without an election: ok")
	}
}

// Bad input is refused with an error naming the field and the value.
func TestBadInput(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{(&fence.SQL{Dialect: "oracle", Election: "e"}).Check(context.Background(), nil, "r", fence.Token{Election: "e", N: 1}), `SQL.Dialect "oracle"`},
		{(&fence.SQL{Dialect: fence.Postgres, Table: "x; DROP", Election: "e"}).Check(context.Background(), nil, "r", fence.Token{Election: "e", N: 1}), `SQL.Table "x; DROP"`},
		{fence.Check("e", "r", fence.Token{Election: "e"}), "token 0"},
		{fence.Check("e", "", fence.Token{Election: "e", N: 1}), "resource is empty"},
		{fence.Check("e", "r", fence.Token{Election: "e", N: 1 << 63}), "above 2^63-1"},
		{fence.Check("e", "r", fence.Token{Election: "f", N: 1}), `token's election "f", guard's "e"`},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("error %v; want it to name %s", c.err, c.want)
		}
	}
	for _, h := range []http.Header{
		{"Baton-Token": {"7"}},
		{"Baton-Election": {"e"}, "Baton-Token": {"seven"}},
		{"Baton-Election": {"e"}, "Baton-Token": {"0"}},
	} {
		if _, err := fence.ParseHeaders(h); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("ParseHeaders(%v) = %v; want ErrInvalid", h, err)
		}
	}
}
