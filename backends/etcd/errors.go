package etcd

import "errors"

var (
	// ErrKeyGone is the reason a term or a campaign ends when the
	// candidate's key was deleted or put again under another lease (by an
	// operator, or because the lease expired on the server).
	ErrKeyGone = errors.New("etcd: election key gone")
	// ErrLeaseExpired is the reason a term or a campaign ends when the
	// server no longer knows the lease.
	ErrLeaseExpired = errors.New("etcd: lease expired")
	// ErrCampaignLost is returned (wrapped, with the reason) by Acquire
	// when the candidate's lease ended before it won; the caller may
	// campaign again with a fresh lease.
	ErrCampaignLost = errors.New("etcd: lease ended while campaigning")
)
