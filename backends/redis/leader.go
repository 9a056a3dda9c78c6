package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/election"
)

// Leader implements driver.LeaderReader: one GET of the lease key. A
// key that expired on the server is never read. Since is left zero.
func (b *Backend) Leader(ctx context.Context) (election.LeaderInfo, error) {
	v, err := b.cli.Get(ctx, b.k.lease).Result()
	if err == goredis.Nil {
		return election.LeaderInfo{}, fmt.Errorf("%w: %s does not exist", election.ErrNoLeader, b.k.lease)
	}
	if err != nil {
		return election.LeaderInfo{}, fmt.Errorf("redis: read leader of %s: %w", b.election, b.explain(err))
	}
	return parseLease(v)
}

// parseLease parses "<token> <nonce> <identity JSON>".
func parseLease(v string) (election.LeaderInfo, error) {
	f := strings.SplitN(v, " ", 3)
	if len(f) != 3 {
		return election.LeaderInfo{}, fmt.Errorf("redis: lease value %q: not \"<token> <nonce> <identity>\"", v)
	}
	tok, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return election.LeaderInfo{}, fmt.Errorf("redis: lease value %q: token: %w", v, err)
	}
	info := election.LeaderInfo{Token: tok}
	if err := json.Unmarshal([]byte(f[2]), &info.Identity); err != nil || info.Identity.ID == "" {
		info.Identity = election.Identity{ID: f[2]}
	}
	return info, nil
}
