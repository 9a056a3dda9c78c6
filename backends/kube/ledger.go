package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/batonhq/baton/ledger"
)

// ledgerShards and historyShards are how many ConfigMaps of each kind
// hold the ledger, each a share of the jobs by the hash of their names:
// Name-ledger-00 to -15 keep a job's newest claimed tick and its newest
// runs, which a claim rewrites; Name-history-00 to -63 keep its older
// runs, which no claim writes (history.go). A write's cost on the server
// is much its own plus its bytes (docs/backends/kube.md), so an instant's
// claims go to few ledger shards, kept small by moving runs out. They
// are created as jobs first use them.
const (
	ledgerShards  = 16
	historyShards = 64
)

// maxBatch is how many claims or finishes one call takes: a call writes
// each ledger shard it touches once, so one call for the jobs of an
// instant is at most ledgerShards writes.
const maxBatch = 10000

// maxError bounds a run's error text in the ledger.
const maxError = 512

// Ledger returns the election's tick ledger, keeping the newest
// Config.History runs per job, in ledgerShards ConfigMaps of each kind
// (fenced.go, history.go). A claim reads the Lease, then writes each
// ledger shard its jobs fall in; a finish writes the ledger shards, and
// now and then moves older runs to the history shards; LastClaimed
// raises the ledger shards' fences to the holding term's token and reads
// them; History reads a ledger shard, and its history shard if need be.
func (b *Backend) Ledger() ledger.Ledger { return &tickLedger{b: b} }

type tickLedger struct{ b *Backend }

var _ ledger.Ledger = (*tickLedger)(nil)

// jobRec is one job's entry in a shard: its newest claimed tick and its
// newest runs, newest first.
type jobRec struct {
	Job  string   `json:"j"`
	Last int64    `json:"l,omitempty"` // unix nanoseconds; 0 in a history shard
	Runs []runRec `json:"r,omitempty"`
}

// runRec is a ledger.Run of the job, in short keys.
type runRec struct {
	Tick     int64  `json:"t"`
	Token    uint64 `json:"k"`
	Instance string `json:"i"`
	CatchUp  bool   `json:"c,omitempty"`
	Started  int64  `json:"s"`
	Ended    int64  `json:"e,omitempty"`
	Result   string `json:"r"`
	Error    string `json:"x,omitempty"`
	Attempts int    `json:"a,omitempty"`
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func (r runRec) run(job string) ledger.Run {
	return ledger.Run{Job: job, Tick: fromUnixNano(r.Tick), Token: r.Token, Instance: r.Instance, CatchUp: r.CatchUp,
		Started: fromUnixNano(r.Started), Ended: fromUnixNano(r.Ended), Result: ledger.Result(r.Result), Error: r.Error, Attempts: r.Attempts}
}

// truncError keeps up to maxError bytes of s, cut at a character, as
// valid UTF-8: what JSON stores is then what the ledger wrote, so that a
// move (history.go) finds the copy it moved.
func truncError(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxError {
		return s
	}
	cut := maxError
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// jobKey is job's key in its shards' data, and the numbers of its ledger
// and history shards.
func jobKey(job string) (key string, ledgerN, historyN int) {
	h := sha256.Sum256([]byte(job))
	return "j." + hex.EncodeToString(h[:12]), int(h[0]) % ledgerShards, int(h[0]) % historyShards
}

// ledgerShard and historyShard name shard number i of each kind.
func (b *Backend) ledgerShard(i int) string  { return fmt.Sprintf("%s-ledger-%02d", b.name, i) }
func (b *Backend) historyShard(i int) string { return fmt.Sprintf("%s-history-%02d", b.name, i) }

// record decodes job's entry from data (an empty one if absent).
func record(data map[string]any, key, job string) (jobRec, error) {
	s, _ := data[key].(string)
	if s == "" {
		return jobRec{Job: job}, nil
	}
	var r jobRec
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return jobRec{}, fmt.Errorf("kube: ledger entry of job %q: %w", job, err)
	}
	if r.Job != job {
		return jobRec{}, fmt.Errorf("kube: ledger key %s holds job %q, not %q", key, r.Job, job)
	}
	return r, nil
}

func store(data map[string]any, key string, r jobRec) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	data[key] = string(b)
	return nil
}

// MaxBatch implements ledger.Ledger.
func (l *tickLedger) MaxBatch() int { return maxBatch }

// byShard groups the indexes 0..n-1 by the ledger shard of job(i).
func byShard(n int, job func(int) string) map[int][]int {
	out := map[int][]int{}
	for i := range n {
		_, s, _ := jobKey(job(i))
		out[s] = append(out[s], i)
	}
	return out
}

// eachShard runs f for every shard of groups at once (at most the 16
// shards) and waits. The server's CPU, not the number of writes in
// flight, bounds an instant's claims (measured: docs/backends/kube.md),
// so nothing limits them here.
func eachShard(groups map[int][]int, f func(shard int, idx []int)) {
	var wg sync.WaitGroup
	for s, idx := range groups {
		wg.Go(func() { f(s, idx) })
	}
	wg.Wait()
}

// Claim implements ledger.Ledger.
func (l *tickLedger) Claim(ctx context.Context, cs []ledger.Claim) []error {
	errs := make([]error, len(cs))
	holder, err := l.b.holding(ctx)
	var live []int
	for i, c := range cs {
		switch {
		case err != nil:
			errs[i] = refused(fmt.Errorf("kube: claim: reading the Lease: %w", err))
		case c.Token != holder || holder == 0:
			errs[i] = stale(c.Token, holder, "Lease "+l.b.LeaseName())
		default:
			live = append(live, i)
		}
	}
	l.write(ctx, cs, live, holder, errs)
	return errs
}

// write records the claims cs[live...], all of token, shard by shard,
// each shard in one compare-and-swap that its fence must allow, and sets
// their errors. Claim calls it once the Lease showed token holding.
func (l *tickLedger) write(ctx context.Context, cs []ledger.Claim, live []int, token uint64, errs []error) {
	groups := byShard(len(live), func(j int) string { return cs[live[j]].Job })
	eachShard(groups, func(n int, idx []int) {
		for j := range idx {
			idx[j] = live[idx[j]]
		}
		shard := l.b.ledgerShard(n)
		err := l.b.cas(ctx, shard, token, mustHold, func(data map[string]any) (bool, error) {
			changed := false
			for _, i := range idx {
				c := cs[i]
				key, _, _ := jobKey(c.Job)
				r, err := record(data, key, c.Job)
				if err != nil {
					return false, err
				}
				if r.Last >= c.Tick.UnixNano() {
					errs[i] = fmt.Errorf("%w: %s at %v (last claimed %v)", ledger.ErrTickClaimed, c.Job, c.Tick, fromUnixNano(r.Last))
					continue
				}
				errs[i] = nil
				r.Last = c.Tick.UnixNano()
				run := runRec{Tick: c.Tick.UnixNano(), Token: c.Token, Instance: c.Instance, CatchUp: c.CatchUp,
					Started: unixNano(c.Started), Result: string(ledger.ResultRunning)}
				r.Runs = append([]runRec{run}, r.Runs[:min(len(r.Runs), l.b.history-1)]...)
				if err := store(data, key, r); err != nil {
					return false, err
				}
				changed = true
			}
			return changed, nil
		})
		if err != nil {
			if !errors.Is(err, ledger.ErrStaleTerm) {
				err = refused(fmt.Errorf("kube: claim %d ticks in %s: %w", len(idx), shard, err))
			}
			for _, i := range idx {
				errs[i] = err
			}
		}
	})
}

// LastClaimed implements ledger.Ledger. It raises each shard's fence to
// the holding term's token before it reads it (fenced.go), so that a
// deposed term's claim it does not see can no longer land.
func (l *tickLedger) LastClaimed(ctx context.Context, jobs []string) ([]time.Time, error) {
	holder, err := l.b.holding(ctx)
	if err != nil {
		return nil, fmt.Errorf("kube: read last claimed ticks: reading the Lease: %w", err)
	}
	out := make([]time.Time, len(jobs))
	var mu sync.Mutex
	var errs []error
	eachShard(byShard(len(jobs), func(i int) string { return jobs[i] }), func(n int, idx []int) {
		shard := l.b.ledgerShard(n)
		err := l.b.cas(ctx, shard, holder, raiseOnly, func(data map[string]any) (bool, error) {
			for _, i := range idx {
				key, _, _ := jobKey(jobs[i])
				r, err := record(data, key, jobs[i])
				if err != nil {
					return false, err
				}
				out[i] = fromUnixNano(r.Last)
			}
			return false, nil
		})
		if err != nil {
			mu.Lock()
			errs = append(errs, fmt.Errorf("kube: read last claimed ticks in %s: %w", shard, err))
			mu.Unlock()
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// refused marks err as ledger.ErrRefused when the apiserver refused the
// caller (401, 403): asking again will not mend it.
func refused(err error) error {
	if isDenied(err) {
		return ledger.Refused(err)
	}
	return err
}
