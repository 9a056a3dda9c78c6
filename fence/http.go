package fence

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// The headers baton's HTTP jobs send (the sidecar's request).
const (
	HeaderToken    = "Baton-Token"
	HeaderElection = "Baton-Election"
)

type tokenKey struct{}

// TokenFromRequest returns the token Middleware checked, for the
// handler's own guard at its write.
func TokenFromRequest(r *http.Request) (Token, bool) {
	t, ok := r.Context().Value(tokenKey{}).(Token)
	return t, ok
}

// ContextWithToken returns ctx carrying tok, as Middleware passes it on.
func ContextWithToken(ctx context.Context, tok Token) context.Context {
	return context.WithValue(ctx, tokenKey{}, tok)
}

// ParseHeaders reads the token of a request from baton: Baton-Election
// and Baton-Token (decimal), with epoch 0.
func ParseHeaders(h http.Header) (Token, error) {
	e, s := h.Get(HeaderElection), h.Get(HeaderToken)
	if e == "" || s == "" {
		return Token{}, fmt.Errorf("%w: request without %s or %s", ErrInvalid, HeaderElection, HeaderToken)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return Token{}, fmt.Errorf("%w: %s %q: want a decimal token from 1", ErrInvalid, HeaderToken, s)
	}
	return Token{Election: e, N: n}, nil
}

// Resource names the fence a request writes to (see Middleware).
type Resource func(r *http.Request) string

// Fixed is the Resource of a handler that writes one resource, name.
func Fixed(name string) Resource { return func(*http.Request) string { return name } }

// Middleware checks a request's token against the fence of its resource
// (resource(r)) in store before next runs: a stale token or another election's is
// answered 409 Conflict (baton does not retry a 409), a request without
// a valid token 400, a store error 503; otherwise next runs, and
// TokenFromRequest gives it the token.
//
// The middleware refuses a request that arrives after a newer term's; it
// cannot refuse a write that next makes after a pause of its own. Where
// the handler's work is long, fence the write itself too (SQL.Check,
// redisfence) with TokenFromRequest's token.
func Middleware(store Store, election string, resource Resource, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resource := resource(r)
		tok, err := ParseHeaders(r.Header)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := check(election, resource, tok); err != nil {
			code := http.StatusBadRequest
			if errors.Is(err, ErrOtherElection) {
				code = http.StatusConflict
			}
			http.Error(w, err.Error(), code)
			return
		}
		if err := store.Advance(r.Context(), resource, tok); err != nil {
			code := http.StatusServiceUnavailable
			if errors.Is(err, ErrStale) || errors.Is(err, ErrOtherElection) {
				code = http.StatusConflict
			}
			http.Error(w, err.Error(), code)
			return
		}
		next.ServeHTTP(w, r.WithContext(ContextWithToken(r.Context(), tok)))
	})
}
