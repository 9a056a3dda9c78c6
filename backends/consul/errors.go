package consul

import "errors"

var (
	// ErrKeyConflict is returned by Acquire when the lock key exists with
	// flags other than the ones `consul lock` and this package put on a
	// lock key (api.LockFlagValue): something else, e.g. a `consul lock -n`
	// semaphore or a plain value, uses the key. Acquire does not overwrite
	// it.
	ErrKeyConflict = errors.New("consul: lock key used for something other than a lock")
	// ErrSessionGone is the reason a term ends when Consul no longer knows
	// its session: it expired (the server reaps a session 2*TTL after the
	// last renewal it received), was destroyed, or its node was
	// deregistered (force-leave, leave, catalog deregister).
	ErrSessionGone = errors.New("consul: session gone")
	// ErrLockLost is the reason a term ends when the lock key is deleted or
	// no longer held by the term's session.
	ErrLockLost = errors.New("consul: lock key no longer held by the session")
)
