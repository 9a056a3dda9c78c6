package schedulerhost

import "errors"

var (
	// ErrShutdownTimeout is the cause given to a run's context when a
	// graceful stop waited ShutdownTimeout and the run was still going.
	ErrShutdownTimeout = errors.New("schedulerhost: shutdown timeout")
	// ErrJobTimeout is the cause given to a run's context when the job's
	// Timeout elapsed.
	ErrJobTimeout = errors.New("schedulerhost: job timeout")
)
