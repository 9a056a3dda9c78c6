package control

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// Terms: each leader records its term under term/<token, 20 digits>, so
// that every instance can show who led, from when to when, and how each
// term ended.
const termPrefix = "term/"

// Term is one term as its leader recorded it.
type Term struct {
	Token    uint64    `json:"token"`
	Instance string    `json:"instance"`
	Started  time.Time `json:"started"`
	Ended    time.Time `json:"ended,omitzero"`
	How      string    `json:"how,omitempty"` // how it ended: released, stepped down, shut down, lost: ..., unknown: ...
	// Version is the entry's version when read.
	Version int64 `json:"-"`
}

func termKey(token uint64) string { return fmt.Sprintf("%s%020d", termPrefix, token) }

// StartTerm records the start of term tm, while it holds (the write is
// conditioned on its token).
func (j *Jobs) StartTerm(ctx context.Context, tm Term) (Term, error) {
	v, err := json.Marshal(tm)
	if err != nil {
		return Term{}, err
	}
	ver, err := j.s.Put(ctx, Put{Key: termKey(tm.Token), Value: v, IfVersion: AnyVersion, Token: tm.Token})
	tm.Version = ver
	return tm, err
}

// EndTerm records how tm ended (not conditioned on the term: it is over).
func (j *Jobs) EndTerm(ctx context.Context, tm Term) error {
	v, err := json.Marshal(tm)
	if err != nil {
		return err
	}
	_, err = j.s.Put(ctx, Put{Key: termKey(tm.Token), Value: v, IfVersion: AnyVersion})
	return err
}

// Terms returns the recorded terms, newest first.
func (j *Jobs) Terms(ctx context.Context) ([]Term, error) {
	es, err := j.s.List(ctx, termPrefix)
	if err != nil {
		return nil, err
	}
	out := make([]Term, 0, len(es))
	for _, e := range es {
		var tm Term
		if err := json.Unmarshal(e.Value, &tm); err != nil {
			return nil, fmt.Errorf("control: entry %s: %w", e.Key, err)
		}
		tm.Version = e.Version
		out = append(out, tm)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Token > out[b].Token })
	return out, nil
}

// TidyTerms, called by the leader of the term with token, marks the older
// terms still open as ended (their instance stopped without closing them)
// and keeps the newest keep records. Writes are conditioned on the
// versions read and on the term: a term that ended meanwhile changes
// nothing.
func (j *Jobs) TidyTerms(ctx context.Context, token uint64, keep int, now time.Time) error {
	ts, err := j.Terms(ctx)
	if err != nil {
		return err
	}
	for i, tm := range ts {
		switch {
		case i >= keep:
			if err := j.s.Delete(ctx, termKey(tm.Token), tm.Version); err != nil {
				return err
			}
		case tm.Token < token && tm.Ended.IsZero():
			tm.Ended, tm.How = now, "unknown: the instance stopped without closing its term"
			v, err := json.Marshal(tm)
			if err != nil {
				return err
			}
			if _, err := j.s.Put(ctx, Put{Key: termKey(tm.Token), Value: v, IfVersion: tm.Version, Token: token}); err != nil {
				return err
			}
		}
	}
	return nil
}

// StaleInstances deletes the registry entries that lapsed before before
// (Instance.Lapsed, entries without Expires judged by Seen alone),
// conditioned on the versions read, and returns how many.
func (j *Jobs) StaleInstances(ctx context.Context, before time.Time) (int, error) {
	es, err := j.s.List(ctx, instancePrefix)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range es {
		var in Instance
		if json.Unmarshal(e.Value, &in) != nil || in.Lapsed(before, 0) {
			if err := j.s.Delete(ctx, e.Key, e.Version); err == nil {
				n++
			}
		}
	}
	return n, nil
}
