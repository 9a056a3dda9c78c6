package audit

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/batonhq/baton/control"
)

// Late notes: what a term recorded and could not write to its Accounts.
//
// A term writes its records fenced by its token. Once a write finds the
// term over (a later term raised the fence), or its last writes fail,
// its records would be lost with it: the next term merges the newest
// entries of the ledger's history, which holds runs only, and would
// report the other ticks (its overlap skips, its refused claims, the
// ticks it let go by the misfire policy or covered by a catch-up) as
// missed. So the term leaves them in a late note: one entry
// per job and term, unfenced (a term that is over can still write it),
// which no Account write touches. Every reader applies the notes to the
// Account it read (AddLate): a note's tick takes the place of a record
// of it as missed, never of a run, a cover or a refusal. The next term
// to open the Accounts merges the notes into them and deletes them.

// A late note's key is the job's Account key (Key), "late/" and the
// term's token: the List of the job's key (Load) reads both.
const lateSegment = "late/"

// LateKey is the key of the late note of job by the term with token.
func LateKey(job string, token uint64) string {
	return lateJobPrefix(job) + strconv.FormatUint(token, 10)
}

func lateJobPrefix(job string) string { return Key(job) + lateSegment }

// Late is one late note as read: the records of one term of one job.
type Late struct {
	Key     string
	Version int64
	Token   uint64
	Account // Job and Ranges
}

// SaveLate writes a, the records of the term with token of a.Job, as its
// late note, fitted within MaxBytes, unfenced and whatever the note held.
func SaveLate(ctx context.Context, s control.Store, a Account, token uint64) error {
	a.Specs = nil
	b, err := a.Fit()
	if err != nil {
		return err
	}
	if _, err := s.Put(ctx, control.Put{Key: LateKey(a.Job, token), Value: b, IfVersion: control.AnyVersion}); err != nil {
		return fmt.Errorf("audit: write the late note of %q (term %d): %w", a.Job, token, err)
	}
	return nil
}

// isLate says whether key is a late note's.
func isLate(key string) bool {
	rest, ok := strings.CutPrefix(key, Prefix)
	if !ok {
		return false
	}
	i := strings.IndexByte(rest, '/')
	return i >= 0 && strings.HasPrefix(rest[i+1:], lateSegment)
}

// DeleteLate deletes l if it is still at the version read.
func DeleteLate(ctx context.Context, s control.Store, l Late) error {
	if err := s.Delete(ctx, l.Key, l.Version); err != nil {
		return fmt.Errorf("audit: delete the late note %s: %w", l.Key, err)
	}
	return nil
}

func decodeLate(e control.Entry) (Late, error) {
	i := strings.LastIndexByte(e.Key, '/')
	tok, err := strconv.ParseUint(e.Key[i+1:], 10, 64)
	if err != nil || !isLate(e.Key) {
		return Late{}, fmt.Errorf("audit: %s: not a late note's key", e.Key)
	}
	a, err := Decode(e.Value)
	if err != nil {
		return Late{}, fmt.Errorf("audit: %s: %w", e.Key, err)
	}
	return Late{Key: e.Key, Version: e.Version, Token: tok, Account: a}, nil
}

// AddLate records r, from a late note, as Add does, except that it also
// takes the place of the records of its ticks as missed: the term that
// wrote the note led at those ticks, and knew what became of them; a
// later term only found them unclaimed.
func (a *Account) AddLate(r Range, next Next) bool {
	if r.Count <= 0 || r.Last.Before(r.First) {
		return false
	}
	changed := a.override(r, next, overMissed)
	return a.Add(r, next) || changed
}

// overMissed says whether r, a late record, takes the place of old's
// record of its tick: old ranks below it, or missed it.
func overMissed(r, old Range) bool { return old.Class == Missed || outranks(r, old) }
