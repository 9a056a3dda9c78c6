package etcd

import (
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/election"
)

// LeaseKey returns the key and etcd lease ID behind a lease returned by
// Acquire.
func LeaseKey(l election.Lease) (key string, id clientv3.LeaseID, ok bool) {
	el, ok := l.(*lease)
	if !ok {
		return "", 0, false
	}
	return el.key, el.id, true
}
