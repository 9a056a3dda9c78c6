package consul

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/election"
)

// Leader implements driver.LeaderReader: it reads the lock key (one
// request, bounded by ctx). It returns an error wrapping
// election.ErrNoLeader when no session holds the key.
//
// The token is the one in the key's value, written right after the lock
// was taken; until then (or if someone overwrote the value) it is the
// key's ModifyIndex, which equals the token while nothing but the lock
// touched the key. A holder that is not a baton candidate (`consul lock`)
// is reported with its session ID as Identity.ID.
func (b *Backend) Leader(ctx context.Context) (election.LeaderInfo, error) {
	pair, _, err := b.cfg.Client.KV().Get(b.cfg.Key, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return election.LeaderInfo{}, fmt.Errorf("consul: read leader %s: %w", b.cfg.Key, err)
	}
	if pair == nil || pair.Session == "" {
		return election.LeaderInfo{}, fmt.Errorf("consul: %s: %w", b.cfg.Key, election.ErrNoLeader)
	}
	info := election.LeaderInfo{Token: pair.ModifyIndex}
	var v value
	if err := json.Unmarshal(pair.Value, &v); err != nil || v.Session != pair.Session {
		// Not our value, or a value left by an earlier term.
		info.Identity = election.Identity{ID: "session:" + pair.Session}
		return info, nil
	}
	info.Identity = v.Identity
	info.Since = v.Acquired
	if v.Token != 0 {
		info.Token = v.Token
	}
	return info, nil
}
