// Package auditcmp compares baton's tick accounting (package audit) with
// the e2e checker's own verdict on every tick of the same history
// (history.Report.Ticks), tick by tick: the checker reads the jobs'
// records and the nodes' logs, never the ledger, so the two are
// independent views of the same ticks.
//
// Allowed maps each checker verdict to the classes and reasons the
// accounting may show for the tick (the table below); Compare reports
// every tick where it shows something else as a disagreement.
package auditcmp

import (
	"strings"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/e2e/internal/history"
)

// Want is one class and reason the accounting may show for a tick; an
// empty Reason allows any reason of the class. Later: only by a later
// term than the checker's (a range that names a term). Same: only by
// the checker's own term.
type Want struct {
	Class  audit.Class
	Reason audit.Reason
	Later  bool
	Same   bool
}

// Allows reports whether the accounting's class c with reason r is w.
func (w Want) Allows(c audit.Class, r audit.Reason) bool {
	return w.Class == c && (w.Reason == "" || w.Reason == r)
}

func (w Want) String() string {
	s := string(w.Class)
	if w.Reason != "" {
		s += "(" + string(w.Reason) + ")"
	}
	if w.Later {
		s += " by a later term"
	}
	if w.Same {
		s += " by the checker's term"
	}
	return s
}

// Shorthands for the table.
var (
	ran            = []Want{{audit.Ran, "", false, false}}
	covered        = []Want{{audit.Covered, audit.ReasonCatchUp, false, false}}
	noLeader       = []Want{{audit.Missed, audit.ReasonNoLeader, false, false}}
	clockStep      = []Want{{audit.Missed, audit.ReasonClockStep, false, false}}
	overlap        = []Want{{audit.Skipped, audit.ReasonOverlap, false, false}}
	paused         = []Want{{audit.Skipped, audit.ReasonPaused, false, false}}
	refusedAny     = []Want{{audit.Refused, "", false, false}}
	termEnded      = []Want{{audit.Lost, audit.ReasonTermEnded, false, false}}
	outcomeUnknown = []Want{{audit.Lost, audit.ReasonOutcomeUnknown, false, false}}
	claimFailed    = []Want{{audit.Refused, audit.ReasonClaimFailed, false, false}}
	staleTerm      = []Want{{audit.Refused, audit.ReasonStaleTerm, false, false}}
	unaccounted    = []Want{{audit.Missed, audit.ReasonUnaccounted, false, false}}
	lostAny        = []Want{{audit.Lost, "", false, false}}
	// coveredLater: a tick the live term did not claim (it skipped it,
	// or its claim failed or was refused, or its term ended first) is in
	// the gap of the next term's run-once catch-up, which stands for it
	// whatever its result: the accounting may say so, by that term.
	coveredLater = []Want{{audit.Covered, audit.ReasonCatchUp, true, false}}
	// startedNoOutcome: the run started and baton recorded no outcome
	// (its term ended before it could: the next leader settles it
	// unknown), or an attempt failed and its retries were cut short. The
	// job's own end line may be there all the same: baton does not
	// read it.
	startedNoOutcome = []Want{{audit.Lost, audit.ReasonOutcomeUnknown, false, false}, {audit.Lost, audit.ReasonRetryCut, false, false},
		{audit.Lost, audit.ReasonNotDelivered, false, false}}
	// landed: a claim of the tick may have landed and its run never
	// started (its term was killed, frozen out or refused as stale after
	// the claim's first attempt landed). At most once: nobody runs it,
	// and the ledger holds it claimed, so the accounting shows the claim
	// as refused (its outcome stayed unknown, or a retry was refused as
	// stale) or lost (claimed, and the term ended before it started, or
	// before its outcome was recorded).
	landed = join(refusedAny, termEnded, outcomeUnknown)
	// ownClaimLanded: a claim whose outcome stayed unknown (the node
	// logged that it failed) may have landed: the ledger then holds the
	// tick claimed by the term that gave up on it. The Host finishes it
	// as not started, but if that write fails too until the term ends
	// (the term cut off from its store), the next term settles the entry
	// unknown (ledger.Ledger's Claim). By that term only: the entry's
	// token is the claim's, read from the backend.
	// frozenCancelled: a run whose instance the suite froze (SIGSTOP)
	// after baton started it and before the job's first line: on waking,
	// its term is over, the run's context is cancelled, and the Host
	// records it cancelled (a finish is written whatever the term). By
	// the checker's own term only; a killed instance writes nothing.
	frozenCancelled = []Want{{audit.Ran, audit.ReasonCancelled, false, true}}
	ownClaimLanded  = []Want{{audit.Lost, audit.ReasonOutcomeUnknown, false, true}, {audit.Lost, audit.ReasonTermEnded, false, true}}
)

// byHow maps the checker's reasons for a tick not run (the last part of
// its Accounted key, after any "X, then ") to what the accounting must
// show.
var byHow = map[string][]Want{
	// The live or next term's catch-up run stood for it (run-once).
	"catch-up": covered,
	// Nobody led at the tick, and the next term let it go: the misfire
	// policy (skip, beyond the grace), or it had no claim to count from.
	"skip policy":  noLeader,
	"beyond grace": noLeader,
	"no claim of the job before it (its catch-up had nothing to count from)": noLeader,
	// The window ended with nobody leading after the tick.
	"no later term": noLeader,
	// A pause of the whole machine, seen by the live term as a forward
	// step of its wall clock, and the policy let the tick go.
	"skipped over by a clock step, skip policy":  clockStep,
	"skipped over by a clock step, beyond grace": clockStep,
	// The claim landed and the run never started: see landed.
	"claimed by a term killed at the tick":                         landed,
	"claim of unknown outcome landed":                              landed,
	"its claim landed":                                             landed,
	"claim refused as stale by the term before (the claim landed)": join(staleTerm, termEnded),
	"frozen, then killed as it woke (the claim landed)":            join(termEnded, outcomeUnknown),
}

// byLogged maps the message a node logged for a tick it did not start
// ("logged: <message>") to what the accounting must show.
var byLogged = map[string][]Want{
	// Not claimed (a skip, a failed or refused claim, a term over before
	// it claimed): the live term's record, or the next term's catch-up
	// that stood for it (coveredLater).
	history.StillGoing:                     join(overlap, coveredLater),
	"tick skipped: queue full":             join(overlap, coveredLater),
	"run not started: claim failed":        join(refusedAny, coveredLater, ownClaimLanded),
	"run not started: claim refused":       join(refusedAny, coveredLater),
	"run not started: pause state unknown": join(claimFailed, coveredLater),
	"run not started: term over":           join(termEnded, staleTerm, coveredLater, noLeader),
	"tick skipped: job paused":             paused,
	// The claim was refused: an earlier term's claim of it landed.
	"run not started: tick already claimed": {{audit.Refused, audit.ReasonClaimed, false, false}},
	// Admitted, not claimed yet, and the term began stopping: nothing
	// reached the ledger. The accounting says the term ended before it
	// started, or, unclaimed, that nobody led it, or that the next
	// term's catch-up stood for it.
	history.TermStopping: join(termEnded, noLeader, coveredLater),
	"run not started: term stopping during its jitter delay": join(termEnded, noLeader, coveredLater),
	// The node logged the run as started and its instance was stopped
	// before the job's first line (e2e's stoppedBeforeStart): claimed,
	// started, no outcome.
	"run started, then its instance was killed": join(outcomeUnknown, termEnded),
	"run started, then its instance was frozen": join(outcomeUnknown, termEnded, frozenCancelled),
	// The new leader could not read the last claims: no catch-up, the
	// ticks missed while nobody led stay missed, unless a later term's
	// catch-up, which could read them, stood for them.
	"catch-up skipped: reading last claimed ticks failed": join(noLeader, unaccounted, coveredLater),
	// The sidecar's app was down: the HTTP job ran and failed, or its
	// retries were cut short by the term's end.
	"the leader's app was down": join(ran, []Want{{audit.Lost, audit.ReasonNotDelivered, false, false}, {audit.Lost, audit.ReasonRetryCut, false, false}}),
}

// byExcuse maps the live term's excuses (the first parts of "X, then
// HOW", "X, no later term" and "X (the claim landed)") to what they add
// to what HOW allows: the claim of an excused term may have landed.
var byExcuse = map[string][]Want{
	"frozen": nil,
	"term over before its schedule loop began":                        termEnded,
	"claim refused as stale":                                          landed,
	"catch-up claim refused as stale":                                 landed,
	"claim in flight when its instance was killed":                    landed,
	"killed before the job's next tick, its claim possibly in flight": landed,
}

// Allowed returns what the accounting may show for the tick of v, and
// false if the table has no row for the checker's reason (the table is
// then out of date with the checker: a disagreement too).
//
//   - ran: Ran, any reason (ok, failed, timeout, cancelled), or Lost
//     when baton recorded no outcome (startedNoOutcome), even if the job
//     wrote its end line: on PostgreSQL and etcd, runs that ended as
//     their leader froze or was cut off were settled unknown by the next
//     leader. Compare also asks that the accounting's term, where it
//     names one, is the run's.
//   - accounted: by its reason, byHow and byLogged (a tick the live term
//     logged it did not claim may be covered by the next term's
//     catch-up: coveredLater); a reason that passed the tick on ("X, then HOW") allows HOW's classes and, if X may have
//     left a landed claim, landed.
//   - lost (the checker's lost-tick finding): Missed (no-leader when
//     nobody led, unaccounted when a term was live) or Lost by the term
//     the checker names: the same cause, never a class that says the
//     tick ran, was covered or was skipped on purpose.
func Allowed(v history.TickVerdict) ([]Want, bool) {
	switch v.Verdict {
	case history.VerdictRan:
		return join(ran, startedNoOutcome), true
	case history.VerdictLost:
		if strings.Contains(v.Reason, "missed while nobody led") {
			return noLeader, true
		}
		return join(unaccounted, lostAny), true
	case history.VerdictAccounted:
		return allowedAccounted(v.Reason)
	}
	return nil, false
}

// allowedAccounted reads an Accounted key: how, "logged: " message,
// excuse + ", then " + a key, excuse + ", no later term", or excuse +
// " (the claim landed)".
func allowedAccounted(reason string) ([]Want, bool) {
	if ws, ok := byHow[reason]; ok {
		return ws, true
	}
	if msg, ok := strings.CutPrefix(reason, "logged: "); ok {
		// A catch-up tick's claim failed: the ticks the catch-up would
		// have stood for are the failed claim's, or missed.
		msg, catchUp := strings.CutSuffix(msg, " (catch-up)")
		ws, known := byLogged[msg]
		if known && catchUp {
			ws = join(ws, noLeader, covered)
		}
		return ws, known
	}
	if head, rest, ok := strings.Cut(reason, ", then "); ok {
		if extra, known := byExcuse[head]; known {
			ws, ok := allowedAccounted(rest)
			return join(extra, ws), ok
		}
	}
	if head, ok := strings.CutSuffix(reason, ", no later term"); ok {
		if ws, known := byExcuse[head]; known {
			return join(ws, noLeader), true
		}
	}
	if head, ok := strings.CutSuffix(reason, " (the claim landed)"); ok {
		if ws, known := byExcuse[head]; known {
			return join(ws, landed), true
		}
	}
	return nil, false
}

func join(lists ...[]Want) []Want {
	var out []Want
	for _, l := range lists {
		for _, w := range l {
			dup := false
			for _, o := range out {
				dup = dup || o == w
			}
			if !dup {
				out = append(out, w)
			}
		}
	}
	return out
}
