// Package history checks what a cluster did against baton's guarantees,
// from records kept outside baton: one line appended by the job itself at
// the start and at the end of each run, and each node's log of the terms
// it held. It never reads baton's own ledger.
package history

import (
	"time"
)

// Start is one run as the job recorded it when it started.
type Start struct {
	Job      string
	Tick     time.Time // nominal tick (BATON_TICK)
	Token    uint64
	Instance string
	At       time.Time // wall clock when the run started
	CatchUp  bool
	// CatchUpFrom is, for a catch-up run, the first missed tick it says
	// it stands for (BATON_CATCH_UP_FROM, recorded by the job); zero if
	// the record does not say.
	CatchUpFrom time.Time `json:",omitzero"`
	// Request is, for a run now, its request's id (BATON_REQUEST_ID): two
	// requests made within one second have the same tick to the second,
	// and are two runs.
	Request string `json:",omitempty"`
	Line    int    // line in the run log, for reports
	// Logged is when the node logged that it started the run (zero if
	// unknown): a run it decided before a pause was acknowledged is not
	// after the pause, however late its first line.
	Logged time.Time `json:",omitzero"`
}

// Term is one term as a node logged it.
type Term struct {
	Instance string
	Token    uint64
	Start    time.Time // "acquired leadership"
	Stop     time.Time // first of: stepping down, lost, released, or the process's death; zero if still open
	Lost     time.Time // when the node logged the loss of its lease; zero if it did not
	End      time.Time // lease released or lost; zero if still open or unknown (killed)
	Graceful bool      // ended by a release after a step-down
	// SteppedDown: the node stepped down (SIGTERM, step-down request); its
	// lease was held until the release or a loss, even if the term did not
	// end gracefully (a failed release).
	SteppedDown bool
	Killed      bool // the node was killed during the term
}

// Fault is one injected fault, for the report.
type Fault struct {
	At     time.Time
	Kind   string
	Target string
	Detail string // e.g. the duration of a partition
}

// End is one run as the job recorded it when it ended ("E" lines).
type End struct {
	Job      string
	Tick     time.Time
	Token    uint64
	Instance string
	At       time.Time
	Line     int
}

// Misfire is a tick an instance logged as not started, with the reason it
// logged: an overlap skip, a failed or refused claim, a term that ended
// between the claim and the start. A tick in Misfires is accounted for.
// A zero Tick with a Token stands for a catch-up the term with that token
// logged as skipped (it could not read the last claimed tick): every tick
// that term's catch-up would have covered is accounted for.
type Misfire struct {
	Instance string
	Token    uint64 // the term's token, if known
	// Job is the job whose tick was not started. Empty with a zero Tick:
	// the term had no catch-up for any job.
	Job    string
	Tick   time.Time // zero: the term's catch-up was skipped
	At     time.Time
	Reason string
}

// StillGoing is the reason with which an instance skips a tick because
// the job's previous run is still going (or its claim still in flight).
const StillGoing = "tick skipped: previous run still going"

// TermStopping is the reason with which an instance does not start a tick
// it admitted but had not claimed when its term began stopping.
const TermStopping = "run not started: term stopping"

// LastClaim is what a new leader's catch-up read as a job's last claimed
// tick, from its "missed ticks while nobody led" line or, when it found
// none missed, its "no ticks missed while nobody led" line. A term that
// read a job's claim logs one of the two: the checker never takes a claim
// from a line's absence. A zero Tick: the term logged that the ledger
// held no claim of the job yet ("no tick of the job claimed yet").
type LastClaim struct {
	Instance string
	Token    uint64
	Job      string
	Tick     time.Time
}

// Interval is a span of time in which an instance was frozen (SIGSTOP).
type Interval struct {
	Instance string
	From, To time.Time
}

// Step is a forward step of the wall clock as a live term's schedule
// loop logged it ("wall clock stepped forward"): the ticks in (From, To]
// were skipped over, and the job's misfire policy decided which to run
// as a catch-up (Start.CatchUpFrom) and which to count as missed.
type Step struct {
	Instance string
	Token    uint64
	From, To time.Time
}

// NotFired is a term's word that its schedule loop never began, so the
// job's ticks from First through Until were not fired ("ticks not
// fired"): the term after it must account for them.
type NotFired struct {
	Instance     string
	Token        uint64
	Job          string
	First, Until time.Time
}

// Policy is what the checker needs to know of a job.
type Policy struct {
	Every   time.Duration // the job runs on a fixed period ("@every")
	Misfire string        // skip, run-once, run-all
	Grace   time.Duration
	// Epoch: the ticks are the instants that are whole multiples of
	// Every since 1970-01-01T00:00:00Z, plus Offset, the same for every
	// term (an "@every" anchored on the Unix epoch). Unset, they are the
	// whole multiples of Every since Go's zero time (time.Truncate),
	// which are the same instants for a period that divides a day, as
	// the suite's cron schedules do; Offset is then unused.
	Epoch  bool
	Offset time.Duration
}

// Input is everything the checker looks at.
type Input struct {
	Starts []Start
	Terms  []Term
	Faults []Fault
	Jobs   map[string]Policy
	// From and To bound the window in which every tick must be accounted
	// for (ticks near the edges are not judged).
	From, To time.Time
	// Ends are the "E" lines: a graceful term's runs must all have ended
	// by its release (the drain; nil skips that check), and no run's end
	// comes after a later term's first line (Records).
	Ends []End
	// Misfires are ticks the instances logged as not started, and why.
	Misfires []Misfire
	// LastClaims are the new leaders' readings of their jobs' last
	// claimed ticks (see LastClaim).
	LastClaims []LastClaim
	// Asked are the claims an instance asked again because the answer to
	// the first was lost (Reason unused): one may have landed.
	Asked []Misfire
	// Unwritten are the runs an instance logged as started (At) of which
	// the job wrote no line, and that no kill or freeze of the suite's
	// explains (Reason unused). Kept as evidence, never as an excuse: a
	// lost tick's violation names its own.
	Unwritten []Misfire
	// Frozen are the spans in which an instance was stopped (SIGSTOP): a
	// live term whose instance was frozen at a tick may miss it silently;
	// the next term's catch-up must then account for it.
	Frozen []Interval
	// ClockSteps are the spans in which the suite saw its own wall clock
	// run ahead of its monotonic clock: the whole machine was paused (or
	// its clock stepped), measured outside baton (Instance empty: every
	// instance). A pause is a freeze of every instance: a live term that
	// did not survive it (it stopped, or a later term began, within a
	// TTL of the wake) may miss its ticks in it silently, and the next
	// term must account for them. A term that survived it logged a step
	// (Steps): its ticks in the span go unrun only as the job's policy
	// says (beyond the grace, or any under skip); within the grace, its
	// catch-up run stands for them.
	ClockSteps []Interval
	// TTL is the lease's time to live: a term whose lease lapsed in a
	// pause of the machine knows it within a TTL of the wake (its local
	// deadline, on the monotonic clock, which the pause stopped).
	TTL time.Duration
	// Steps are the forward steps of the wall clock the live terms
	// logged (see Step).
	Steps []Step
	// NotFired are the terms' "ticks not fired" lines (see NotFired).
	NotFired []NotFired
	// Excused are spans of faults from outside this history: in the soak,
	// the backend faults another group of nodes on the same backend
	// injected. A handover or failover that overlaps one is still judged
	// for safety, but not held to the handover bound, and its time is not
	// in the maxima (Report.Excused counts them). Instance is unused.
	Excused []Interval
	// Records are every line the jobs' processes (and the sidecars'
	// applications) wrote while their runs executed (see Record): runs
	// of two terms must never execute at the same time. The S and E
	// lines (Starts, Ends) are judged with them, whether or not Records
	// holds them too.
	Records []Record
	// Heartbeats are, by job, the time its process sleeps between two
	// heartbeat records (H) of a run. A longer gap is a stall of its
	// instance's machine that the job measured itself: a run's end line
	// may come before its instance reaped it by up to a stall that
	// spans both (see stalled). Nil: no stall is measured.
	Heartbeats map[string]time.Duration
	// Pauses are the pauses the operator had acknowledged: no run of the
	// job may start after one until its resume is sent.
	Pauses []Pause
	// HandoverBound is the longest allowed time from a graceful release to
	// the next term's start.
	HandoverBound time.Duration
	// CrashBound is the documented crash failover bound: the longest
	// allowed time from the kill of a leader to the next term's start.
	// Zero: not judged (the maximum is still measured).
	CrashBound time.Duration
	// ClaimTimeout bounds a claim with its retries (schedulerhost's
	// ledgerTimeout): a claim still in flight when its instance was killed
	// was sent at most this long before. Zero: claims are never in flight.
	ClaimTimeout time.Duration
	// PauseRead bounds the reads of the pauses between a tick's claim and
	// its start (schedulerhost's freshPauses: a read, and one more after
	// a slow one, each within the ledger timeout): a tick admitted and
	// not started may be in flight for the claim timeout and this. Zero:
	// the Host has no control store.
	PauseRead time.Duration
	// Slack absorbs the time between a decision and its log line. Where
	// the records give the order (a run's first line comes after its
	// tick; a run's end line comes before its graceful release) the
	// checker judges by the order alone, without it.
	Slack time.Duration
}
