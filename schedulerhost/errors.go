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

// ConfigError is New's error for a Config that does not validate. Problems
// joins one error per problem, each naming the job, the field and its
// value.
type ConfigError struct{ Problems error }

func (e *ConfigError) Error() string { return "schedulerhost: invalid config: " + e.Problems.Error() }
func (e *ConfigError) Unwrap() error { return e.Problems }
