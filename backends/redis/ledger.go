package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton/ledger"
)

// Ledger returns the election's tick ledger, keeping the newest
// Config.History runs per job. Its keys share the election's hash slot:
//
//	baton:{E}:last        hash: job -> newest claimed tick (unix nanoseconds, 20 digits)
//	baton:{E}:runs:<job>  list: "<tick> <token> <JSON of ledger.Run>", newest first, LTRIMmed to History
//
// A claim is one entry of the script call of its batch (MaxBatch claims
// per call, the batches of one Claim sent at once), which first checks
// that the lease key holds the claims' token. A Finish is one script call
// per MaxBatch runs; LastClaimed one HMGET per 1,000 jobs; History one
// LRANGE. The ledger may be used from several goroutines at once, and
// keeps no state of its own.
func (b *Backend) Ledger() ledger.Ledger {
	return &tickLedger{b: b}
}

type tickLedger struct{ b *Backend }

var _ ledger.Ledger = (*tickLedger)(nil)

// MaxBatch implements ledger.Ledger: Config.MaxBatch.
func (l *tickLedger) MaxBatch() int { return l.b.batch }

// tickStr formats t as fixed-width unix nanoseconds, so that the byte
// order of the strings is the order of time (Lua compares strings).
func tickStr(t time.Time) (string, error) {
	n := t.UnixNano()
	if n < 0 {
		return "", fmt.Errorf("redis: tick %v: before 1970 is not supported", t)
	}
	return fmt.Sprintf("%020d", n), nil
}

func parseTick(s string) (time.Time, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("redis: stored tick %q: %w", s, err)
	}
	return time.Unix(0, n).UTC(), nil
}

// leaseHolds is the Lua check that the lease key (KEYS[1]) holds the
// term whose value starts with ARGV[1] ("<token> "); the script returns
// "stale <holder's token>" (or "stale none") when it does not.
const leaseHolds = `
local v = redis.call('GET', KEYS[1])
if not v then return 'stale none' end
if string.sub(v, 1, #ARGV[1]) ~= ARGV[1] then return 'stale ' .. string.match(v, '^(%S+)') end
`

// claimScript checks that the lease key holds the token (ARGV[1] is
// "<token> "), then for each claim (ARGV job, tick, entry from ARGV[4],
// KEYS[i+2] its runs list) records it if its tick is after the job's
// last. It returns "stale <holder's token>" for the whole batch, or one
// string per claim: "" when recorded, else the job's last tick. With
// ARGV[3] "1" (WaitReplicas), a refused claim sets the job's field to
// the same value: a write, so that the WAIT that follows covers an
// earlier attempt of the same claim made on another connection.
var claimScript = newScript(leaseHolds + `
local keep = tonumber(ARGV[2])
local out = {}
for i = 3, #KEYS do
  local a = 4 + (i - 3) * 3
  local job, tick = ARGV[a], ARGV[a + 1]
  local last = redis.call('HGET', KEYS[2], job)
  if last and tick <= last then
    if ARGV[3] == '1' then redis.call('HSET', KEYS[2], job, last) end
    out[#out + 1] = last
  else
    redis.call('HSET', KEYS[2], job, tick)
    redis.call('LPUSH', KEYS[i], ARGV[a + 2])
    redis.call('LTRIM', KEYS[i], 0, keep - 1)
    out[#out + 1] = ''
  end
end
return out
`)

// finishScript replaces, in each runs list KEYS[i], the entry starting
// with ARGV[2i-1] ("<tick> <token> ") by ARGV[2i]. It returns one 1 or 0
// (no such entry) per run.
var finishScript = newScript(`
local out = {}
for i = 1, #KEYS do
  local p, e = ARGV[2 * i - 1], ARGV[2 * i]
  local r = 0
  for j, x in ipairs(redis.call('LRANGE', KEYS[i], 0, -1)) do
    if string.sub(x, 1, #p) == p then
      redis.call('LSET', KEYS[i], j - 1, e)
      r = 1
      break
    end
  end
  out[i] = r
end
return out
`)

// Claim implements ledger.Ledger.
func (l *tickLedger) Claim(ctx context.Context, cs []ledger.Claim) []error {
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for start := 0; start < len(cs); {
		end := start + 1
		for end < len(cs) && end-start < l.b.batch && cs[end].Token == cs[start].Token {
			end++
		}
		batch, berrs := cs[start:end], errs[start:end]
		wg.Go(func() { l.claimBatch(ctx, batch, berrs) })
		start = end
	}
	wg.Wait()
	return ledger.MarkRefused(errs, denied)
}

// claimBatch claims cs, all of one token, in one script call.
func (l *tickLedger) claimBatch(ctx context.Context, cs []ledger.Claim, errs []error) {
	k := l.b.k
	tok := strconv.FormatUint(cs[0].Token, 10)
	keys := []string{k.lease, k.last}
	touch := "0"
	if l.b.waitN > 0 {
		touch = "1"
	}
	args := []any{tok + " ", l.b.history, touch}
	idx := make([]int, 0, len(cs)) // index in cs of each claim sent
	for i, c := range cs {
		tick, err := tickStr(c.Tick)
		var entry string
		if err == nil {
			entry, err = runEntry(tick, ledger.Run{Job: c.Job, Tick: c.Tick, Instance: c.Instance, Token: c.Token,
				CatchUp: c.CatchUp, Started: c.Started, Result: ledger.ResultRunning})
		}
		if err != nil {
			errs[i] = err
			continue
		}
		keys = append(keys, k.runs+c.Job)
		args = append(args, c.Job, tick, entry)
		idx = append(idx, i)
	}
	if len(idx) == 0 {
		return
	}
	res, err := l.b.eval(ctx, claimScript, keys, args...)
	if r, ok := res.(string); err != nil && !(ok && strings.HasPrefix(r, "stale ")) {
		// Not recorded, or only on the primary (ErrNotReplicated): not
		// ErrTickClaimed, so the Host does not start these runs and asks
		// again. A stale answer stands even then: it ends the term.
		err = fmt.Errorf("redis: claim %d ticks: %w", len(idx), l.b.explain(err))
		for _, i := range idx {
			errs[i] = err
		}
		return
	}
	switch r := res.(type) {
	case string:
		holder, _ := strings.CutPrefix(r, "stale ")
		err := fmt.Errorf("%w: token %s: %s holds token %s", ledger.ErrStaleTerm, tok, k.lease, holder)
		for _, i := range idx {
			errs[i] = err
		}
	case []any:
		if len(r) != len(idx) {
			err := fmt.Errorf("redis: claim: %d answers to %d claims", len(r), len(idx))
			for _, i := range idx {
				errs[i] = err
			}
			return
		}
		for j, i := range idx {
			last, _ := r[j].(string)
			if last == "" {
				continue
			}
			lt, _ := parseTick(last)
			errs[i] = fmt.Errorf("%w: %s at %v (last claimed %v)", ledger.ErrTickClaimed, cs[i].Job, cs[i].Tick, lt)
		}
	default:
		err := fmt.Errorf("redis: claim: unexpected answer %v", res)
		for _, i := range idx {
			errs[i] = err
		}
	}
}

// runEntry is a runs list entry: "<tick> <token> <JSON>".
func runEntry(tick string, r ledger.Run) (string, error) {
	js, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("redis: encode run: %w", err)
	}
	return tick + " " + strconv.FormatUint(r.Token, 10) + " " + string(js), nil
}

// LastClaimed implements ledger.Ledger: one HMGET per 1,000 jobs.
func (l *tickLedger) LastClaimed(ctx context.Context, jobs []string) ([]time.Time, error) {
	out := make([]time.Time, len(jobs))
	for start := 0; start < len(jobs); start += lastPage {
		page := jobs[start:min(start+lastPage, len(jobs))]
		vals, err := l.b.cli.HMGet(ctx, l.b.k.last, page...).Result()
		if err != nil {
			return nil, fmt.Errorf("redis: read last claimed ticks: %w", l.b.explain(err))
		}
		for i, v := range vals {
			s, ok := v.(string)
			if !ok {
				continue
			}
			t, err := parseTick(s)
			if err != nil {
				return nil, err
			}
			out[start+i] = t
		}
	}
	return out, nil
}

// Finish implements ledger.Ledger.
func (l *tickLedger) Finish(ctx context.Context, rs []ledger.Run) []error {
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for start := 0; start < len(rs); start += l.b.batch {
		end := min(start+l.b.batch, len(rs))
		wg.Go(func() { l.finishBatch(ctx, rs[start:end], errs[start:end]) })
	}
	wg.Wait()
	return ledger.MarkRefused(errs, denied)
}

func (l *tickLedger) finishBatch(ctx context.Context, rs []ledger.Run, errs []error) {
	var keys []string
	var args []any
	var idx []int
	for i, r := range rs {
		tick, err := tickStr(r.Tick)
		if err != nil {
			errs[i] = err
			continue
		}
		entry, err := runEntry(tick, r)
		if err != nil {
			errs[i] = err
			continue
		}
		keys = append(keys, l.b.k.runs+r.Job)
		args = append(args, tick+" "+strconv.FormatUint(r.Token, 10)+" ", entry)
		idx = append(idx, i)
	}
	if len(idx) == 0 {
		return
	}
	if _, err := l.b.eval(ctx, finishScript, keys, args...); err != nil {
		err = fmt.Errorf("redis: finish %d runs: %w", len(idx), l.b.explain(err))
		for _, i := range idx {
			errs[i] = err
		}
	}
}

// History implements ledger.Ledger: one LRANGE.
func (l *tickLedger) History(ctx context.Context, job string, n int) ([]ledger.Run, error) {
	if n <= 0 {
		return nil, nil
	}
	vals, err := l.b.cli.LRange(ctx, l.b.k.runs+job, 0, int64(n-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: read history of %q: %w", job, l.b.explain(err))
	}
	runs := make([]ledger.Run, 0, len(vals))
	for _, v := range vals {
		f := strings.SplitN(v, " ", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("redis: history entry of %q: %q is not \"<tick> <token> <JSON>\"", job, v)
		}
		var r ledger.Run
		if err := json.Unmarshal([]byte(f[2]), &r); err != nil {
			return nil, fmt.Errorf("redis: history entry of %q: %w", job, err)
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// denied reports whether the server refused the caller: an ACL denial
// (NOPERM, or a script's command or key the user may not use), a wrong
// password, or a missing one.
func denied(err error) bool {
	msg := err.Error()
	for _, s := range []string{"NOPERM", "script can't run this command", "script can't access", "WRONGPASS", "NOAUTH"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
