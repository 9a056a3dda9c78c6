package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/ledger"
)

// Control returns the election's control store (pauses, run-now
// requests, the instance registry; see package control), in keys of the
// election's hash slot:
//
//	baton:{E}:ctl     hash: key -> value
//	baton:{E}:ctlver  hash: key -> version
//	baton:{E}:ctlidx  sorted set of the keys, all scores 0 (listed by prefix with ZRANGEBYLEX)
//	baton:{E}:ctlseq  counter of versions (INCR), never reset
//
// A version comes from the counter, so a key deleted and made again
// never gets one back. List, Put and Delete are one script call each,
// atomic; a Put with a token checks in the same script that the lease
// key holds that token, as a claim does. With WaitReplicas, a write is
// acknowledged by WAIT like the ledger's, and fails when the replicas do
// not acknowledge it (it may or may not have been applied).
func (b *Backend) Control() control.Store { return &controlStore{b: b} }

type controlStore struct{ b *Backend }

// ctlPutScript: KEYS lease, ctl, ctlver, ctlidx, ctlseq; ARGV "<token> "
// (or "" for no term check), key, value, IfVersion. Returns the new
// version, "mismatch <version, 0 if absent>" or "stale <holder>".
var ctlPutScript = newScript(`
if ARGV[1] ~= '' then` + leaseHolds + `end
local cur = tonumber(redis.call('HGET', KEYS[3], ARGV[2]) or '0')
local want = tonumber(ARGV[4])
if want ~= -1 and want ~= cur then return 'mismatch ' .. cur end
local ver = redis.call('INCR', KEYS[5])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('HSET', KEYS[3], ARGV[2], ver)
redis.call('ZADD', KEYS[4], 0, ARGV[2])
return ver
`)

// ctlDeleteScript: KEYS ctl, ctlver, ctlidx; ARGV key, ifVersion.
// Returns "ok" or "mismatch <version>".
var ctlDeleteScript = newScript(`
local cur = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
local want = tonumber(ARGV[2])
if want ~= -1 and want ~= cur then return 'mismatch ' .. cur end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return 'ok'
`)

// ctlListScript: KEYS ctl, ctlver, ctlidx; ARGV the ZRANGEBYLEX bounds.
// Returns key, value, version, ... in key order.
var ctlListScript = newScript(`
local out = {}
for _, k in ipairs(redis.call('ZRANGEBYLEX', KEYS[3], ARGV[1], ARGV[2])) do
  out[#out + 1] = k
  out[#out + 1] = redis.call('HGET', KEYS[1], k) or ''
  out[#out + 1] = redis.call('HGET', KEYS[2], k) or '0'
end
return out
`)

func (s *controlStore) List(ctx context.Context, prefix string) ([]control.Entry, error) {
	if err := control.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	k := s.b.k
	lo, hi := "-", "+"
	if prefix != "" {
		// Keys are printable ASCII: every key with the prefix sorts below
		// prefix + DEL.
		lo, hi = "["+prefix, "("+prefix+"\x7f"
	}
	res, err := ctlListScript.Run(ctx, s.b.cli, []string{k.ctl, k.ctlVer, k.ctlIdx}, lo, hi).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: control: list %q: %w", prefix, s.b.explain(err))
	}
	arr, _ := res.([]any)
	out := make([]control.Entry, 0, len(arr)/3)
	for i := 0; i+2 < len(arr); i += 3 {
		key, _ := arr[i].(string)
		val, _ := arr[i+1].(string)
		ver, err := strconv.ParseInt(fmt.Sprint(arr[i+2]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("redis: control: list %q: version of %s: %w", prefix, key, err)
		}
		out = append(out, control.Entry{Key: key, Value: []byte(val), Version: ver})
	}
	return out, nil
}

func (s *controlStore) Put(ctx context.Context, p control.Put) (int64, error) {
	if err := control.CheckPut(p); err != nil {
		return 0, err
	}
	k := s.b.k
	term := ""
	if p.Token != 0 {
		term = strconv.FormatUint(p.Token, 10) + " "
	}
	res, err := s.b.eval(ctx, ctlPutScript, []string{k.lease, k.ctl, k.ctlVer, k.ctlIdx, k.ctlSeq},
		term, p.Key, string(p.Value), p.IfVersion)
	if err != nil {
		return 0, fmt.Errorf("redis: control: put %s: %w", p.Key, s.b.explain(err))
	}
	switch r := res.(type) {
	case int64:
		return r, nil
	case string:
		if holder, ok := strings.CutPrefix(r, "stale "); ok {
			return 0, fmt.Errorf("redis: control: put %s with token %d: %s holds token %s: %w", p.Key, p.Token, k.lease, holder, ledger.ErrStaleTerm)
		}
		if cur, ok := strings.CutPrefix(r, "mismatch "); ok {
			return 0, fmt.Errorf("redis: control: %s at version %d: at %s (0: absent): %w", p.Key, p.IfVersion, cur, control.ErrVersionMismatch)
		}
	}
	return 0, fmt.Errorf("redis: control: put %s: unexpected script answer %v", p.Key, res)
}

func (s *controlStore) Delete(ctx context.Context, key string, ifVersion int64) error {
	if err := control.CheckPut(control.Put{Key: key, IfVersion: ifVersion}); err != nil {
		return err
	}
	if ifVersion == 0 {
		return fmt.Errorf("redis: control: delete %s at version 0: %w", key, control.ErrVersionMismatch)
	}
	k := s.b.k
	res, err := s.b.eval(ctx, ctlDeleteScript, []string{k.ctl, k.ctlVer, k.ctlIdx}, key, ifVersion)
	if err != nil {
		return fmt.Errorf("redis: control: delete %s: %w", key, s.b.explain(err))
	}
	r, _ := res.(string)
	if cur, ok := strings.CutPrefix(r, "mismatch "); ok {
		return fmt.Errorf("redis: control: delete %s at version %d: at %s (0: absent): %w", key, ifVersion, cur, control.ErrVersionMismatch)
	}
	if r != "ok" {
		return errors.New("redis: control: delete " + key + ": unexpected script answer " + fmt.Sprint(res))
	}
	return nil
}

// Fence implements control.Store: a Put with a token checks the term in
// its own transaction, so no write of an ended term can land later.
func (s *controlStore) Fence(ctx context.Context, token uint64) error { return nil }
