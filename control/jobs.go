package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/batonhq/baton/ledger"
)

// The key layout of a Store, under its election:
//
//	pause/<job>        JSON of Pause, present while the job is paused
//	run/<id>           JSON of RunRequest, a run-now request and its outcome
//	instance/<id>      JSON of Instance, one per instance of the election
//
// <job> and <id> are escaped: '/', '%', spaces and bytes outside
// printable ASCII become %XX.
const (
	pausePrefix    = "pause/"
	runPrefix      = "run/"
	instancePrefix = "instance/"
)

// Pause says that a job is paused: while it is, every leader skips the
// job's ticks (recording them as skipped) from its next tick on.
type Pause struct {
	Job  string    `json:"job"`
	By   string    `json:"by"`
	At   time.Time `json:"at"`
	Note string    `json:"note,omitempty"`
	// Version is the entry's version when read (zero when written).
	Version int64 `json:"-"`
}

// RequestState is where a run-now request stands.
type RequestState string

// The states of a run-now request: asked (pending), taken by a leader
// (taken; its run began once Started is set: runnow.go), finished
// (done).
const (
	StatePending RequestState = "pending"
	StateTaken   RequestState = "taken"
	StateDone    RequestState = "done"
)

// RunRequest is a run-now request and, once a leader took it, its run.
type RunRequest struct {
	ID    string       `json:"id"`
	Job   string       `json:"job"`
	By    string       `json:"by"`
	At    time.Time    `json:"at"`            // when it was asked
	Via   string       `json:"via,omitempty"` // the instance that accepted it
	State RequestState `json:"state"`

	// Set by the leader that took it; Started once its run starts.
	Token    uint64        `json:"token,omitempty"`
	Instance string        `json:"instance,omitempty"`
	Started  time.Time     `json:"started,omitzero"`
	Ended    time.Time     `json:"ended,omitzero"`
	Result   ledger.Result `json:"result,omitempty"`
	Error    string        `json:"error,omitempty"`
	Attempts int           `json:"attempts,omitempty"`

	// Version is the entry's version when read.
	Version int64 `json:"-"`
}

// Run is the request as an entry of its job's history.
func (r RunRequest) Run() ledger.Run {
	return ledger.Run{Job: r.Job, Tick: r.At, Instance: r.Instance, Token: r.Token, Started: r.Started, Ended: r.Ended,
		Result: r.Result, Error: r.Error, Attempts: r.Attempts, RequestID: r.ID, By: r.By}
}

// Instance is one instance of the election, as it publishes itself.
type Instance struct {
	ID       string    `json:"id"`
	Eligible bool      `json:"eligible"`
	Version  string    `json:"version,omitempty"`   // the program's version
	JobsHash string    `json:"jobs_hash,omitempty"` // of its job set
	Address  string    `json:"address,omitempty"`   // of its HTTP API, if any
	Started  time.Time `json:"started"`
	Seen     time.Time `json:"seen"` // when it last published itself
	// Expires is when the entry lapses unless its instance publishes
	// itself again: Seen plus a few of its publishing intervals, set by
	// the instance, so that every reader judges it alike. Zero in entries
	// of older versions (see Lapsed).
	Expires time.Time `json:"expires,omitzero"`
}

// Lapsed reports whether the entry's expiry is before t: its instance has
// not published itself in time, and is gone or cut off. An entry without
// Expires lapses at Seen+dflt.
func (in Instance) Lapsed(t time.Time, dflt time.Duration) bool {
	exp := in.Expires
	if exp.IsZero() {
		exp = in.Seen.Add(dflt)
	}
	return exp.Before(t)
}

// ErrRequestConflict: a run-now request's id is taken by a request of
// another job.
var ErrRequestConflict = errors.New("control: request id is taken by another job")

// ErrNotPaused: Resume of a job that was not paused.
var ErrNotPaused = errors.New("control: job is not paused")

// Jobs reads and writes pauses, run-now requests and the instance
// registry in a Store.
type Jobs struct{ s Store }

// NewJobs returns the typed view of s.
func NewJobs(s Store) *Jobs { return &Jobs{s: s} }

// CheckRequestID says why id cannot name a run-now request: it must be 1
// to 128 bytes of letters, digits, '.', '_', ':' and '-'.
func CheckRequestID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("request id %q: must be 1 to 128 bytes", trunc(id))
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return fmt.Errorf("request id %q: byte %d is %q, want letters, digits, '.', '_', ':' or '-'", trunc(id), i, c)
		}
	}
	return nil
}

// Pause pauses p.Job (again, if it was: the newer By, At and Note win).
func (j *Jobs) Pause(ctx context.Context, p Pause) error {
	if p.Job == "" {
		return errors.New("control: pause: job is empty")
	}
	v, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = j.s.Put(ctx, Put{Key: pausePrefix + escape(p.Job), Value: v, IfVersion: AnyVersion})
	return err
}

// Resume removes job's pause and returns it; ErrNotPaused if there was
// none.
func (j *Jobs) Resume(ctx context.Context, job string) (Pause, error) {
	ps, err := j.Pauses(ctx)
	if err != nil {
		return Pause{}, err
	}
	p, ok := ps[job]
	if !ok {
		return Pause{}, fmt.Errorf("resume %s: %w", job, ErrNotPaused)
	}
	if err := j.s.Delete(ctx, pausePrefix+escape(job), p.Version); err != nil {
		return Pause{}, fmt.Errorf("resume %s: %w", job, err)
	}
	return p, nil
}

// Pauses returns the paused jobs, by name, in one read.
func (j *Jobs) Pauses(ctx context.Context) (map[string]Pause, error) {
	es, err := j.s.List(ctx, pausePrefix)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Pause, len(es))
	for _, e := range es {
		var p Pause
		if err := json.Unmarshal(e.Value, &p); err != nil {
			return nil, fmt.Errorf("control: entry %s: %w", e.Key, err)
		}
		p.Version = e.Version
		out[p.Job] = p
	}
	return out, nil
}

// RequestRun stores r (with State pending) unless a request with r.ID
// exists. It returns the stored request and whether this call made it: a
// retried request with the same id gets the first one back, in whatever
// state it is now. A request id held by another job's request returns
// ErrRequestConflict.
func (j *Jobs) RequestRun(ctx context.Context, r RunRequest) (RunRequest, bool, error) {
	if err := CheckRequestID(r.ID); err != nil {
		return RunRequest{}, false, err
	}
	if r.Job == "" {
		return RunRequest{}, false, errors.New("control: run request: job is empty")
	}
	r.State = StatePending
	v, err := json.Marshal(r)
	if err != nil {
		return RunRequest{}, false, err
	}
	key := runPrefix + escape(r.ID)
	ver, err := j.s.Put(ctx, Put{Key: key, Value: v})
	if err == nil {
		r.Version = ver
		return r, true, nil
	}
	if !errors.Is(err, ErrVersionMismatch) {
		return RunRequest{}, false, err
	}
	old, found, err := j.request(ctx, key)
	switch {
	case err != nil:
		return RunRequest{}, false, err
	case !found: // deleted (trimmed) in between: it was done long ago
		return RunRequest{}, false, fmt.Errorf("run request %s: %w (and since removed)", r.ID, ErrVersionMismatch)
	case old.Job != r.Job:
		return old, false, fmt.Errorf("run request %s for %s: %w (%s)", r.ID, r.Job, ErrRequestConflict, old.Job)
	}
	return old, false, nil
}

// Request returns the request with id, and whether it exists.
func (j *Jobs) Request(ctx context.Context, id string) (RunRequest, bool, error) {
	if err := CheckRequestID(id); err != nil {
		return RunRequest{}, false, err
	}
	return j.request(ctx, runPrefix+escape(id))
}

func (j *Jobs) request(ctx context.Context, key string) (RunRequest, bool, error) {
	es, err := j.s.List(ctx, key)
	if err != nil {
		return RunRequest{}, false, err
	}
	for _, e := range es {
		if e.Key == key {
			r, err := decodeRequest(e)
			return r, err == nil, err
		}
	}
	return RunRequest{}, false, nil
}

// Requests returns every stored request, oldest first.
func (j *Jobs) Requests(ctx context.Context) ([]RunRequest, error) {
	es, err := j.s.List(ctx, runPrefix)
	if err != nil {
		return nil, err
	}
	out := make([]RunRequest, 0, len(es))
	for _, e := range es {
		r, err := decodeRequest(e)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].At.Before(out[b].At) })
	return out, nil
}

func decodeRequest(e Entry) (RunRequest, error) {
	var r RunRequest
	if err := json.Unmarshal(e.Value, &r); err != nil {
		return RunRequest{}, fmt.Errorf("control: entry %s: %w", e.Key, err)
	}
	r.Version = e.Version
	return r, nil
}

// Update writes r over the version it was read at (r.Version), only
// while the term with token holds the election if token is not zero. It
// returns r with its new version; an error wrapping ErrVersionMismatch
// if the request changed since (another leader took it), one wrapping
// ledger.ErrStaleTerm if the term ended. A leader takes a request with
// State taken and its token (Take), records its start (Start), and
// finishes it with State done and token zero (a run that ends after a
// loss is still recorded).
func (j *Jobs) Update(ctx context.Context, r RunRequest, token uint64) (RunRequest, error) {
	if r.Version <= 0 {
		return RunRequest{}, fmt.Errorf("control: update of request %s without the version it was read at", r.ID)
	}
	v, err := json.Marshal(r)
	if err != nil {
		return RunRequest{}, err
	}
	ver, err := j.s.Put(ctx, Put{Key: runPrefix + escape(r.ID), Value: v, IfVersion: r.Version, Token: token})
	if err != nil {
		return RunRequest{}, err
	}
	r.Version = ver
	return r, nil
}

// Forget deletes request r if it has not changed since it was read.
func (j *Jobs) Forget(ctx context.Context, r RunRequest) error {
	return j.s.Delete(ctx, runPrefix+escape(r.ID), r.Version)
}

// Publish stores (or refreshes) in's entry in the registry.
func (j *Jobs) Publish(ctx context.Context, in Instance) error {
	if in.ID == "" {
		return errors.New("control: publish: instance id is empty")
	}
	v, err := json.Marshal(in)
	if err != nil {
		return err
	}
	_, err = j.s.Put(ctx, Put{Key: instancePrefix + escape(in.ID), Value: v, IfVersion: AnyVersion})
	return err
}

// Unpublish removes instance id's entry from the registry.
func (j *Jobs) Unpublish(ctx context.Context, id string) error {
	return j.s.Delete(ctx, instancePrefix+escape(id), AnyVersion)
}

// Instances returns the registry, ordered by id.
func (j *Jobs) Instances(ctx context.Context) ([]Instance, error) {
	es, err := j.s.List(ctx, instancePrefix)
	if err != nil {
		return nil, err
	}
	out := make([]Instance, 0, len(es))
	for _, e := range es {
		var in Instance
		if err := json.Unmarshal(e.Value, &in); err != nil {
			return nil, fmt.Errorf("control: entry %s: %w", e.Key, err)
		}
		out = append(out, in)
	}
	sort.Slice(out, func(a, b int) bool { return strings.Compare(out[a].ID, out[b].ID) < 0 })
	return out, nil
}
