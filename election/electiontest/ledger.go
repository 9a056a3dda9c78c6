package electiontest

import (
	"context"
	"fmt"
	"time"

	"github.com/batonhq/baton/ledger"
)

// Ledger returns the store's tick ledger: a claim succeeds only while the
// claiming token's lease is the live one, as on a real backend.
func (m *Memory) Ledger() ledger.Ledger { return memLedger{m} }

type memLedger struct{ m *Memory }

var _ ledger.Ledger = memLedger{}

func (l memLedger) Claim(ctx context.Context, c ledger.Claim) error {
	m := l.m
	m.mu.Lock()
	h := m.holderLocked()
	if h == nil || h.token != c.Token {
		m.mu.Unlock()
		return fmt.Errorf("memory: claim %s at %v with token %d: %w", c.Job, c.Tick, c.Token, ledger.ErrStaleTerm)
	}
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = map[string]time.Time{}
		m.runs = map[string][]ledger.Run{}
	}
	if last, ok := m.last[c.Job]; ok && !c.Tick.After(last) {
		return fmt.Errorf("memory: claim %s at %v (last %v): %w", c.Job, c.Tick, last, ledger.ErrTickClaimed)
	}
	m.last[c.Job] = c.Tick
	runs := append(m.runs[c.Job], ledger.Run{Job: c.Job, Tick: c.Tick, Instance: c.Instance, Token: c.Token,
		CatchUp: c.CatchUp, Started: c.Started, Result: ledger.ResultRunning})
	if len(runs) > ledger.DefaultHistory {
		runs = runs[len(runs)-ledger.DefaultHistory:]
	}
	m.runs[c.Job] = runs
	return nil
}

func (l memLedger) LastClaimed(ctx context.Context, job string) (time.Time, error) {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	return l.m.last[job], nil
}

func (l memLedger) Finish(ctx context.Context, r ledger.Run) error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	runs := l.m.runs[r.Job]
	for i := range runs {
		if runs[i].Tick.Equal(r.Tick) && runs[i].Token == r.Token {
			runs[i] = r
			return nil
		}
	}
	return nil
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
