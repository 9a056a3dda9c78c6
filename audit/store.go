package audit

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/batonhq/baton/control"
)

// Prefix is where Accounts live in the control store: Prefix, the job's
// name as one key segment (control.Segment), and a closing "/", so that
// a List of one job's key reads that job's entry alone (a segment holds
// no "/": job-7's key is no prefix of job-70's).
const Prefix = "audit/"

// Key is the control store key of job's Account.
func Key(job string) string { return Prefix + control.Segment(job) + "/" }

// Stored is an Account as read, with the entry's version (0: absent),
// and the job's late notes if the read returns them (LoadAll): they are
// not applied to it (AddLate).
type Stored struct {
	Account
	Version int64
	Late    []Late
}

// Load reads job's Account and its late notes: one List round trip. An
// absent Account is an empty one at version 0.
func Load(ctx context.Context, s control.Store, job string) (Stored, error) {
	key := Key(job)
	es, err := s.List(ctx, key)
	if err != nil {
		return Stored{}, fmt.Errorf("audit: read the account of %q: %w", job, err)
	}
	st := Stored{Account: Account{Job: job}}
	for _, e := range es {
		switch {
		case e.Key == key:
			a, err := Decode(e.Value)
			if err != nil {
				return Stored{}, fmt.Errorf("audit: account of %q: %w", job, err)
			}
			a.Job = job
			st.Account, st.Version = a, e.Version
		case isLate(e.Key):
			l, err := decodeLate(e)
			if err != nil {
				return Stored{}, err
			}
			st.Late = append(st.Late, l)
		}
	}
	return st, nil
}

// LoadAll reads every job's Account and late notes in one List round
// trip, by job. An entry that does not decode is an error naming its
// key; the others are still returned.
func LoadAll(ctx context.Context, s control.Store) (map[string]Stored, error) {
	es, err := s.List(ctx, Prefix)
	if err != nil {
		return nil, fmt.Errorf("audit: read the accounts: %w", err)
	}
	out := make(map[string]Stored, len(es))
	var errs []error
	var lates []Late
	for _, e := range es {
		if isLate(e.Key) {
			l, err := decodeLate(e)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			lates = append(lates, l)
			continue
		}
		a, err := Decode(e.Value)
		if err != nil {
			errs = append(errs, fmt.Errorf("audit: %s: %w", e.Key, err))
			continue
		}
		st := out[a.Job]
		st.Account, st.Version = a, e.Version
		out[a.Job] = st
	}
	for _, l := range lates {
		st, ok := out[l.Job]
		if !ok {
			st.Job = l.Job
		}
		st.Late = append(st.Late, l)
		out[l.Job] = st
	}
	return out, errors.Join(errs...)
}

// Save writes st.Account (fitted within MaxBytes) if the entry is still at
// st.Version and the term with token still holds, and returns the new
// version; the caller's st is left as it was. Its errors are the
// Store's: ErrVersionMismatch, a stale term, or an outcome unknown.
func Save(ctx context.Context, s control.Store, st Stored, token uint64) (int64, error) {
	st.Folded = maps.Clone(st.Folded) // Fit folds into it: not into the caller's
	b, err := st.Fit()
	if err != nil {
		return 0, err
	}
	v, err := s.Put(ctx, control.Put{Key: Key(st.Job), Value: b, IfVersion: st.Version, Token: token})
	if err != nil {
		return 0, fmt.Errorf("audit: write the account of %q: %w", st.Job, err)
	}
	return v, nil
}
