package execjob

// SetAfterStart sets a function Run calls right after the job's process
// has started.
func SetAfterStart(f func()) { afterStart = f }
