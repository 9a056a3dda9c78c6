package etcd

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/batonhq/baton/election"
)

// Leader implements driver.LeaderReader: it reads the candidate key
// with the lowest create revision directly under the prefix (linearizable
// reads; keys of nested elections, PREFIX/eu/..., are not candidates).
// Token is that create revision. A value that is not baton's JSON (a
// candidate started by `etcdctl elect`, say) is reported as Identity.ID.
// Since is left zero: etcd does not record when a candidate won.
//
// The key read may belong to a candidate that has just won and not yet
// returned from Acquire, or to one whose lease expired and is about to be
// removed by the server.
func (b *Backend) Leader(ctx context.Context) (election.LeaderInfo, error) {
	cands, err := b.candidates(ctx, true)
	if err != nil {
		return election.LeaderInfo{}, fmt.Errorf("etcd: read leader of %s: %w", b.prefix, err)
	}
	if len(cands) == 0 {
		return election.LeaderInfo{}, fmt.Errorf("%w: no candidate key under %s", election.ErrNoLeader, b.keys)
	}
	kv := cands[0].kv
	for _, c := range cands[1:] {
		if c.kv.CreateRevision < kv.CreateRevision {
			kv = c.kv
		}
	}
	info := election.LeaderInfo{Token: uint64(kv.CreateRevision)}
	if err := json.Unmarshal(kv.Value, &info.Identity); err != nil || info.Identity.ID == "" {
		info.Identity = election.Identity{ID: string(kv.Value)}
	}
	return info, nil
}
