package baton

import (
	"fmt"
	"os"
	"sync/atomic"
)

// defaults counts the Batons of this process that took the default
// identity.
var defaults atomic.Int64

// defaultInstance is Config.Instance when empty: HOSTNAME-PID, as `baton
// run` has, so that two copies of a program on one host campaign and
// publish themselves under identities of their own; the second and later
// Batons of one process get HOSTNAME-PID-2, -3, ...
func defaultInstance() (string, error) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return "", fmt.Errorf("baton: Config.Instance: empty, and the host name is unknown: %v", err)
	}
	id := fmt.Sprintf("%s-%d", host, os.Getpid())
	if n := defaults.Add(1); n > 1 {
		id = fmt.Sprintf("%s-%d", id, n)
	}
	return id, nil
}
