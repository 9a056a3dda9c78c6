package ledger

import (
	"context"
	"time"
)

// Ledger records, in the same backend as the lease, which ticks were
// claimed and the recent runs of each job. The Host claims every tick
// before starting it; a backend's Ledger makes that claim atomic with a
// check that the claiming term still holds the election.
//
// One Ledger serves one election: take it from a backend of the same
// election the Elector campaigns in (for example etcd's (*Backend).Ledger).
// When a claim is refused as stale, the Host ends its term at once
// (election.Term.Lose), before the lease's renew loop would notice. Its
// methods may be called from several goroutines at once and block on
// backend I/O, bounded by ctx.
type Ledger interface {
	// Claim claims the ticks cs in as few round trips as the backend
	// allows (MaxBatch claims per round trip), and returns one error per
	// claim, in the order of cs. Each claim records that c.Tick of c.Job
	// is being started by the term with c.Token, atomically, if and only
	// if that term still holds the election on the backend (not expired by
	// the backend's clock) and c.Tick is after the job's last claimed tick;
	// it also appends a history entry for the run with Result "running".
	// Each round trip is atomic with its check of the term: the claims it
	// carries are all refused as stale, or each is recorded or refused on
	// its own merits.
	//
	// The caller passes claims of the same term (one Token) and of
	// distinct jobs. A claim's error is nil if it was recorded, wraps
	// ErrStaleTerm (which wraps election.ErrLeadershipLost) if the term no
	// longer held, and wraps ErrTickClaimed if the tick was not newer than
	// the last claimed one, and wraps ErrRefused if the backend refused the
	// caller (not authorised): the claim was not recorded. Any other error
	// means the claim may or may not have been recorded. Claim never
	// returns a slice of another length.
	//
	// What the Host does with that: it makes one job's claims one at a
	// time, in tick order, within a term, and batches the claims of
	// different jobs due at the same instant. It asks an unknown claim again
	// within its ledger timeout; a retry refused with ErrTickClaimed is its
	// own claim if History shows the tick with c.Token, and the run starts.
	// If it gives up (the timeout, the end of the term, a retry saying the
	// term is stale), the run does not start and the Host finishes the tick
	// with ResultCancelled and an Error starting "not started: claim
	// outcome unknown", so that an entry a lost attempt recorded does not
	// stay "running" (an attempt still in flight may land after it; if
	// that Finish fails until the term ends, the next term settles the
	// entry as ResultUnknown). Such a tick stays claimed: no leader runs
	// it later.
	Claim(ctx context.Context, cs []Claim) []error
	// LastClaimed returns the newest claimed tick of each of jobs, in the
	// order of jobs (the zero time for a job never claimed), reading a page
	// of jobs per round trip rather than one job.
	LastClaimed(ctx context.Context, jobs []string) ([]time.Time, error)
	// Finish stores the outcomes of claimed runs, MaxBatch per round trip,
	// and returns one error per run, in the order of rs: the history entry
	// with the same Job, Tick and Token is updated. It is not conditioned
	// on the term still holding (a run that ends after a loss is still
	// recorded). If no entry matches (it was trimmed from the history, or
	// never claimed), it does nothing and that run's error is nil. A Run
	// with Result ResultUnknown and a zero Ended is how a later term
	// settles an entry an ended term left running (schedulerhost.Settle):
	// Finish stores it like any other outcome.
	Finish(ctx context.Context, rs []Run) []error
	// History returns up to n of job's most recent runs, newest first.
	History(ctx context.Context, job string, n int) ([]Run, error)
	// MaxBatch is how many claims, or finishes, one round trip to the
	// backend carries. The Host sends at most that many per call, and
	// sends the batches of one instant at once.
	MaxBatch() int
}

// Claim is one tick about to be started.
type Claim struct {
	Job      string
	Tick     time.Time // nominal time of the tick, its identity with Job
	Token    uint64    // fencing token of the claiming term
	Instance string    // identity of the claiming instance
	CatchUp  bool      // a run for ticks missed while nobody led
	Started  time.Time // when the run is started (wall clock, for people)
}

// Run is one entry of a job's history.
type Run struct {
	Job      string    `json:"job"`
	Tick     time.Time `json:"tick"`
	Instance string    `json:"instance"`
	Token    uint64    `json:"token"`
	CatchUp  bool      `json:"catch_up,omitempty"`
	Started  time.Time `json:"started"`
	Ended    time.Time `json:"ended,omitzero"`
	Result   Result    `json:"result"`
	Error    string    `json:"error,omitempty"`
	// Attempts is how many times the job function was called for this
	// tick (the job's retries, see schedulerhost.Job.Retries); 0 or 1 is
	// one attempt. Result and Error are those of the last attempt.
	Attempts int `json:"attempts,omitempty"`
	// RequestID and By are set on a run-now run (see package control): the
	// request's id and who asked. Such a run is not a tick: its Tick is
	// when it was asked, and it is kept in the control store, not in the
	// ledger.
	RequestID string `json:"request_id,omitempty"`
	By        string `json:"by,omitempty"`
}

// Kind says what made the run: "manual" (run now), "catch-up", or
// "scheduled".
func (r Run) Kind() string {
	switch {
	case r.RequestID != "":
		return "manual"
	case r.CatchUp:
		return "catch-up"
	}
	return "scheduled"
}

// Result is the outcome of a run.
type Result string

// Run results.
const (
	ResultRunning   Result = "running"   // claimed and started, not finished (or its instance died)
	ResultOK        Result = "ok"        // returned nil
	ResultFailed    Result = "failed"    // returned an error or panicked
	ResultTimeout   Result = "timeout"   // cancelled by the job's Timeout
	ResultCancelled Result = "cancelled" // cancelled by leadership loss or shutdown, or claimed and not started (Error says why); for an HTTP job, baton stopped waiting: the receiver may still have done the work
	ResultSkipped   Result = "skipped"   // claimed and not run on purpose: the job was paused (Error says by whom)
	ResultUnknown   Result = "unknown"   // its term ended before its outcome was recorded; a later leader settled it so (Error says which terms)
	// ResultSettling is never stored: a reader of the history (the
	// scheduler's History, the command line) shows so an entry still
	// "running" whose term has ended, until a leader settles it.
	ResultSettling Result = "settling"
)

// DefaultHistory is how many runs per job a backend Ledger keeps unless
// told otherwise.
const DefaultHistory = 20
