package history

import (
	"fmt"
	"time"
)

// Violation is one broken guarantee.
type Violation struct {
	// Kind: duplicate, overlap, token-order, outside-term, lost-tick,
	// slow-handover, slow-failover, drain, term-overlap, after-pause,
	// early-start, catch-up-cover.
	Kind   string
	Detail string
}

func (v Violation) String() string { return v.Kind + ": " + v.Detail }

// Report is the checker's result.
type Report struct {
	Runs          int
	Terms         int
	Duplicates    int
	Overlaps      int
	OutsideTerm   int
	TokenOrder    int
	LostTicks     int
	SlowHandovers int
	// SlowFailovers counts the crash failovers beyond Input.CrashBound.
	SlowFailovers int
	// EarlyStarts counts the runs whose first line came before their
	// nominal tick.
	EarlyStarts int
	// CatchUpCovers counts the catch-up runs that said they stood for a
	// tick after their own, or for one their term read as claimed.
	CatchUpCovers int
	Drains        int // runs of a graceful term still going at its release
	// TermOverlaps counts the terms whose first record came before the
	// last record of an earlier term (Input.Records, Starts and Ends).
	TermOverlaps int
	// AfterPause counts the runs started after an acknowledged pause.
	AfterPause  int
	MaxHandover time.Duration // graceful: release to the next term
	MaxFailover time.Duration // non-graceful: last sign of the old term to the next term
	// MaxCrashFailover is the longest time from the kill of a leader to the
	// next term's start.
	MaxCrashFailover time.Duration
	// Excused counts the handovers and failovers not timed because they
	// overlapped one of Input.Excused.
	Excused int
	// Accounted counts the ticks not run that the policies account for,
	// by reason: "logged: <the node's message>", "catch-up" (a later tick
	// of the next term's catch-up run stands for it, run-once), "beyond
	// grace", "skip policy", "frozen" (see Input.Frozen).
	Accounted map[string]int
	// Ticks lists the checker's verdict on every tick of every
	// fixed-period job in the window, job by job, in tick order.
	Ticks      []TickVerdict
	Violations []Violation
}

// Verdict is what the checker made of one tick.
type Verdict string

// The verdicts.
const (
	VerdictRan       Verdict = "ran"       // a run of the tick started
	VerdictAccounted Verdict = "accounted" // not run, and a policy or a logged reason accounts for it
	VerdictLost      Verdict = "lost"      // not run, and nothing accounts for it: a lost-tick finding
)

// TickVerdict is the checker's verdict on one tick of a fixed-period job.
type TickVerdict struct {
	Job     string
	Tick    time.Time
	Verdict Verdict
	// Reason: for an accounted tick, its key in Report.Accounted; for a
	// lost one, the finding's detail; empty for a run.
	Reason string `json:",omitempty"`
	// Token and Instance: the term that ran the tick; else the term live
	// at it, or if none was, the first term after it; zero if none.
	Token    uint64 `json:",omitempty"`
	Instance string `json:",omitempty"`
	// Ended: a run whose end line is in the records (Input.Ends).
	Ended bool `json:",omitempty"`
}

// OK reports whether no guarantee was broken.
func (r Report) OK() bool { return len(r.Violations) == 0 }

func (r *Report) add(kind, format string, args ...any) {
	r.Violations = append(r.Violations, Violation{Kind: kind, Detail: fmt.Sprintf(format, args...)})
	switch kind {
	case "duplicate":
		r.Duplicates++
	case "overlap":
		r.Overlaps++
	case "outside-term":
		r.OutsideTerm++
	case "token-order":
		r.TokenOrder++
	case "lost-tick":
		r.LostTicks++
	case "slow-handover":
		r.SlowHandovers++
	case "slow-failover":
		r.SlowFailovers++
	case "early-start":
		r.EarlyStarts++
	case "catch-up-cover":
		r.CatchUpCovers++
	case "drain":
		r.Drains++
	case "term-overlap":
		r.TermOverlaps++
	case "after-pause":
		r.AfterPause++
	}
}
