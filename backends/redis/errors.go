package redis

import "errors"

var (
	// ErrKeyGone is the reason a term ends when the lease key was deleted
	// (by an operator, or because it expired on the server) or now holds
	// another term's token.
	ErrKeyGone = errors.New("redis: lease key gone")
)
