package consul

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/batonhq/baton/ledger"
)

// Ledger returns the election's tick ledger (ledger.Ledger), kept
// in Consul under Key+"-ledger/":
//
//	<Key>-ledger/<job>/last              {"tick":...,"token":...,"instance":...}
//	<Key>-ledger/<job>/runs/<tick UTC>   one ledger.Run as JSON
//
// (<job> is path-escaped.) A Claim is one Consul transaction: check-session
// on the lock key for the claiming term's session, a CAS on the job's
// "last" entry against the ModifyIndex read just before, the new run
// entry, and the deletion of runs beyond Config.History. The claiming
// term's session is read from the lock key's value, which names the token.
func (b *Backend) Ledger() ledger.Ledger { return tickLedger{b} }

type tickLedger struct{ b *Backend }

var _ ledger.Ledger = tickLedger{}

// lastClaim is the value of a job's "last" entry.
type lastClaim struct {
	Tick     time.Time `json:"tick"`
	Token    uint64    `json:"token"`
	Instance string    `json:"instance,omitempty"`
}

const tickLayout = "20060102T150405.000000000Z" // fixed width: sorts as time does

func (l tickLedger) jobPrefix(job string) string {
	return l.b.cfg.Key + "-ledger/" + url.PathEscape(job) + "/"
}

func (l tickLedger) runKey(job string, tick time.Time) string {
	return l.jobPrefix(job) + "runs/" + tick.UTC().Format(tickLayout)
}

// session returns the session holding the lock for the term with token:
// the session named in the lock key's value, if that value or the key's
// ModifyIndex names token, or "" if the term no longer holds.
func (l tickLedger) session(ctx context.Context, token uint64) (string, error) {
	b := l.b
	pair, _, err := b.cfg.Client.KV().Get(b.cfg.Key, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return "", err
	}
	var v value
	if pair == nil || pair.Session == "" || json.Unmarshal(pair.Value, &v) != nil || v.Session != pair.Session ||
		(v.Token != token && pair.ModifyIndex != token) {
		return "", nil
	}
	return pair.Session, nil
}

// Claim implements ledger.Ledger.
func (l tickLedger) Claim(ctx context.Context, c ledger.Claim) error {
	b := l.b
	kv := b.cfg.Client.KV()
	sid, err := l.session(ctx, c.Token)
	if err != nil {
		return fmt.Errorf("consul: claim %s at %v: %w", c.Job, c.Tick, err)
	}
	stale := func(why string) error {
		return fmt.Errorf("consul: claim %s at %v with token %d: %s: %w", c.Job, c.Tick, c.Token, why, ledger.ErrStaleTerm)
	}
	if sid == "" {
		return stale("not a live term")
	}
	run, err := json.Marshal(ledger.Run{Job: c.Job, Tick: c.Tick, Instance: c.Instance, Token: c.Token,
		CatchUp: c.CatchUp, Started: c.Started, Result: ledger.ResultRunning})
	if err != nil {
		return err
	}
	claim, err := json.Marshal(lastClaim{Tick: c.Tick, Token: c.Token, Instance: c.Instance})
	if err != nil {
		return err
	}
	lastKey := l.jobPrefix(c.Job) + "last"
	runKey := l.runKey(c.Job, c.Tick)
	for attempt := 0; ; attempt++ {
		q := (&api.QueryOptions{}).WithContext(ctx)
		pair, _, err := kv.Get(lastKey, q)
		if err != nil {
			return fmt.Errorf("consul: claim %s: read last: %w", c.Job, err)
		}
		var index uint64 // 0: CAS succeeds only if the key does not exist
		if pair != nil {
			var last lastClaim
			if err := json.Unmarshal(pair.Value, &last); err != nil {
				return fmt.Errorf("consul: claim %s: decode %s: %w", c.Job, lastKey, err)
			}
			if !c.Tick.After(last.Tick) {
				return fmt.Errorf("consul: claim %s at %v (last %v): %w", c.Job, c.Tick, last.Tick, ledger.ErrTickClaimed)
			}
			index = pair.ModifyIndex
		}
		keys, _, err := kv.Keys(l.jobPrefix(c.Job)+"runs/", "", q)
		if err != nil {
			return fmt.Errorf("consul: claim %s: list runs: %w", c.Job, err)
		}
		ops := api.TxnOps{
			{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: b.cfg.Key, Session: sid}},
			{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: lastKey, Value: claim, Index: index}},
			{KV: &api.KVTxnOp{Verb: api.KVSet, Key: runKey, Value: run}},
		}
		keys = slices.DeleteFunc(keys, func(k string) bool { return k == runKey })
		slices.Sort(keys)
		// Keep History runs including the new one; at most 64 deletions
		// per claim (Consul allows 128 operations per transaction), the
		// rest go with later claims.
		if excess := len(keys) + 1 - b.cfg.History; excess > 0 {
			for _, k := range keys[:min(excess, 64)] {
				ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: k}})
			}
		}
		ok, resp, _, err := b.cfg.Client.Txn().Txn(ops, q)
		if err != nil {
			return fmt.Errorf("consul: claim %s at %v: %w", c.Job, c.Tick, err)
		}
		if ok {
			return nil
		}
		failed := -1
		for _, e := range resp.Errors {
			if failed < 0 || e.OpIndex < failed {
				failed = e.OpIndex
			}
		}
		switch {
		case failed == 0:
			return stale(fmt.Sprintf("session %s no longer holds %s", sid, b.cfg.Key))
		case failed == 1 && attempt < 5:
			continue // "last" changed since we read it: read again
		default:
			return fmt.Errorf("consul: claim %s at %v: transaction rolled back: %s", c.Job, c.Tick, txnErrors(resp))
		}
	}
}

// LastClaimed implements ledger.Ledger.
func (l tickLedger) LastClaimed(ctx context.Context, job string) (time.Time, error) {
	key := l.jobPrefix(job) + "last"
	pair, _, err := l.b.cfg.Client.KV().Get(key, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return time.Time{}, fmt.Errorf("consul: last claimed %s: %w", job, err)
	}
	if pair == nil {
		return time.Time{}, nil
	}
	var last lastClaim
	if err := json.Unmarshal(pair.Value, &last); err != nil {
		return time.Time{}, fmt.Errorf("consul: last claimed %s: decode %s: %w", job, key, err)
	}
	return last.Tick, nil
}

// Finish implements ledger.Ledger: it replaces the run entry with
// r if the entry has r's token (a CAS, not conditioned on the term). A
// run no longer in the history is not recorded again.
func (l tickLedger) Finish(ctx context.Context, r ledger.Run) error {
	kv := l.b.cfg.Client.KV()
	key := l.runKey(r.Job, r.Tick)
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	for range 5 {
		pair, _, err := kv.Get(key, (&api.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return fmt.Errorf("consul: finish %s at %v: %w", r.Job, r.Tick, err)
		}
		if pair == nil {
			return nil
		}
		var old ledger.Run
		if err := json.Unmarshal(pair.Value, &old); err != nil || old.Token != r.Token {
			return nil
		}
		ok, _, err := kv.CAS(&api.KVPair{Key: key, Value: raw, ModifyIndex: pair.ModifyIndex}, (&api.WriteOptions{}).WithContext(ctx))
		if err != nil {
			return fmt.Errorf("consul: finish %s at %v: %w", r.Job, r.Tick, err)
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("consul: finish %s at %v: %s kept changing", r.Job, r.Tick, key)
}

// History implements ledger.Ledger.
func (l tickLedger) History(ctx context.Context, job string, n int) ([]ledger.Run, error) {
	if n <= 0 {
		return nil, nil
	}
	pairs, _, err := l.b.cfg.Client.KV().List(l.jobPrefix(job)+"runs/", (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("consul: history %s: %w", job, err)
	}
	slices.SortFunc(pairs, func(a, b *api.KVPair) int { return strings.Compare(b.Key, a.Key) }) // newest first
	var out []ledger.Run
	var errs []error
	for _, p := range pairs {
		if len(out) == n {
			break
		}
		var r ledger.Run
		if err := json.Unmarshal(p.Value, &r); err != nil {
			errs = append(errs, fmt.Errorf("decode %s: %w", p.Key, err))
			continue
		}
		out = append(out, r)
	}
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("consul: history %s: %w", job, err)
	}
	return out, nil
}
