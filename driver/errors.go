package driver

import "errors"

// ErrRetryWatch is returned (wrapped) by a ManagedLeaseConfig.Watch that
// stopped without learning anything about the lease, to be restarted
// rather than end the term.
var ErrRetryWatch = errors.New("driver: watch interrupted")
