package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/batonhq/baton/ledger"
)

// Ledger returns the store's tick ledger: a claim succeeds only while the
// claiming token's lease is the live one, as on a real backend.
func (m *Server) Ledger() ledger.Ledger { return memLedger{m} }

type memLedger struct{ m *Server }

var _ ledger.Ledger = memLedger{}

// memBatch is MaxBatch of the in-memory ledger: small, so that tests of
// a Host with it exercise batches split over several calls.
const memBatch = 32

func (l memLedger) MaxBatch() int { return memBatch }

func (l memLedger) Claim(ctx context.Context, cs []ledger.Claim) []error {
	errs := make([]error, len(cs))
	for from := 0; from < len(cs); from += memBatch {
		l.claimBatch(cs[from:min(from+memBatch, len(cs))], errs[from:])
	}
	return errs
}

// claimBatch claims cs in one step, as one backend round trip would.
func (l memLedger) claimBatch(cs []ledger.Claim, errs []error) {
	m := l.m
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claimCalls++
	h := m.holderLocked()
	for i, c := range cs {
		if h == nil || h.token != c.Token {
			errs[i] = fmt.Errorf("memory: claim %s at %v with token %d: %w", c.Job, c.Tick, c.Token, ledger.ErrStaleTerm)
			continue
		}
		if m.last == nil {
			m.last = map[string]time.Time{}
			m.runs = map[string][]ledger.Run{}
		}
		if last, ok := m.last[c.Job]; ok && !c.Tick.After(last) {
			errs[i] = fmt.Errorf("memory: claim %s at %v (last %v): %w", c.Job, c.Tick, last, ledger.ErrTickClaimed)
			continue
		}
		m.last[c.Job] = c.Tick
		runs := append(m.runs[c.Job], ledger.Run{Job: c.Job, Tick: c.Tick, Instance: c.Instance, Token: c.Token,
			CatchUp: c.CatchUp, Started: c.Started, Result: ledger.ResultRunning})
		if len(runs) > ledger.DefaultHistory {
			runs = runs[len(runs)-ledger.DefaultHistory:]
		}
		m.runs[c.Job] = runs
	}
}

func (l memLedger) LastClaimed(ctx context.Context, jobs []string) ([]time.Time, error) {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	out := make([]time.Time, len(jobs))
	for i, job := range jobs {
		out[i] = l.m.last[job]
	}
	return out, nil
}

func (l memLedger) Finish(ctx context.Context, rs []ledger.Run) []error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	for _, r := range rs {
		runs := l.m.runs[r.Job]
		for i := range runs {
			if runs[i].Tick.Equal(r.Tick) && runs[i].Token == r.Token {
				runs[i] = r
				break
			}
		}
	}
	return make([]error, len(rs))
}

// ClaimCalls returns how many claim round trips the store's ledger has
// served: one per batch of up to its MaxBatch claims.
func (m *Server) ClaimCalls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.claimCalls
}

func (l memLedger) History(ctx context.Context, job string, n int) ([]ledger.Run, error) {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	runs := l.m.runs[job]
	var out []ledger.Run
	for i := len(runs) - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, runs[i])
	}
	return out, nil
}
