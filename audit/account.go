package audit

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"
)

// MaxBytes bounds an Account, encoded: the most a job's accounting takes
// in the backend (the control store's value limit). MaxError bounds a
// range's Error.
const (
	MaxBytes = 8 << 10
	MaxError = 160
	// MaxSpecs is how many schedule changes an Account keeps; the oldest
	// go first.
	MaxSpecs = 8
)

// Range is a run of consecutive due ticks of one job with the same
// Class, Reason and term (and, for ticks missed while nobody led, the
// same such span): every tick of the schedule from First through Last
// (both included), Count of them.
type Range struct {
	Class  Class     `json:"class"`
	Reason Reason    `json:"reason"`
	First  time.Time `json:"first"`
	Last   time.Time `json:"last"`
	Count  int64     `json:"count"`
	// Token and Instance: the term that ran, claimed or skipped them;
	// zero for ticks nobody claimed.
	Token    uint64 `json:"token,omitempty"`
	Instance string `json:"instance,omitempty"`
	// Attempts is the most attempts of one of its ticks; Late the most a
	// run started after its tick.
	Attempts int           `json:"attempts,omitempty"`
	Late     time.Duration `json:"late_ns,omitempty"`
	// By is, for Covered ticks, the tick of the catch-up run that stood
	// for them.
	By time.Time `json:"by,omitzero"`
	// NobodyFrom and NobodyUntil: for ticks missed while nobody led, the
	// span in which nobody did, as far as it is known (zero: unknown).
	NobodyFrom  time.Time `json:"nobody_from,omitzero"`
	NobodyUntil time.Time `json:"nobody_until,omitzero"`
	// Error is the first tick's error, cut to at most MaxError bytes
	// on a character boundary.
	Error string `json:"error,omitempty"`
}

// Spec is a job's schedule from At on.
type Spec struct {
	At       time.Time
	Schedule string
	Zone     string // the Host's time zone the schedule was read in
}

// Account is what is stored of one job.
type Account struct {
	Job string
	// Specs are the schedules in force, oldest first: a tick counts from
	// the first one's At, under the newest whose At is not after it.
	Specs []Spec
	// Ranges hold the recorded ticks, oldest first, never overlapping.
	Ranges []Range
	// Folded counts, by class, the ticks of the ranges that were folded
	// to keep the Account within MaxBytes: every one at or before
	// FoldedThrough.
	Folded        map[Class]int64
	FoldedThrough time.Time
}

// Next returns the first due tick after t under spec s; a Schedules
// turns a Spec into one.
type Next func(t time.Time) time.Time

// Schedules parses a Spec as the Host does.
type Schedules func(Spec) (Next, error)

// Through returns the newest recorded tick (zero if none).
func (a *Account) Through() time.Time {
	if len(a.Ranges) == 0 {
		return a.FoldedThrough
	}
	return a.Ranges[len(a.Ranges)-1].Last
}

// SetSpec records s as in force from s.At, if it differs from the spec
// in force then. It returns whether the Account changed.
func (a *Account) SetSpec(s Spec) bool {
	if n := len(a.Specs); n > 0 {
		last := a.Specs[n-1]
		if last.Schedule == s.Schedule && last.Zone == s.Zone {
			return false
		}
		if !s.At.After(last.At) {
			s.At = last.At.Add(time.Nanosecond)
		}
	}
	a.Specs = append(a.Specs, s)
	if len(a.Specs) > MaxSpecs {
		a.Specs = append(a.Specs[:0], a.Specs[len(a.Specs)-MaxSpecs:]...)
	}
	return true
}

// Add records r (Count ticks from First through Last, each next's
// successor of the one before) and returns whether the Account changed.
// Ticks already recorded, or folded, are not recorded again: a tick is
// in one range only, and r's other ticks are recorded around them;
// unless r ranks above their record (rank: a run or a lost tick over a
// catch-up's cover over a skip, a refusal or a miss) and is one tick, or
// outcomes (runs, lost ticks) of several joined as a term wrote them:
// then r takes their place. A
// range joins its neighbours when they have the same class, reason, term,
// By and NobodyFrom and follow one another on the schedule, whatever
// order their ticks came in.
func (a *Account) Add(r Range, next Next) bool {
	if r.Count <= 0 || r.Last.Before(r.First) {
		return false
	}
	r.Error = cutError(r.Error)
	if !r.First.After(a.FoldedThrough) && !a.FoldedThrough.IsZero() {
		r = clipFront(r, a.FoldedThrough, next)
	}
	changed := (r.Count == 1 || rank(r.Class) == rank(Ran)) && a.override(r, next, outranks)
	for r.Count > 0 {
		i := len(a.Ranges) // insert before i: the first range starting after r.First
		for i > 0 && a.Ranges[i-1].First.After(r.First) {
			i--
		}
		if i > 0 && !r.First.After(a.Ranges[i-1].Last) {
			r = clipFront(r, a.Ranges[i-1].Last, next)
			continue
		}
		piece, rest := r, Range{}
		if i < len(a.Ranges) && !r.Last.Before(a.Ranges[i].First) {
			piece = clipBack(r, a.Ranges[i].First, next)
			rest = clipFront(r, a.Ranges[i].Last, next)
		}
		if piece.Count > 0 {
			a.insert(i, piece, next)
			changed = true
		}
		r = rest
	}
	return changed
}

// insert puts r, which overlaps no range, before a.Ranges[i], joining
// the ranges on either side that it continues.
func (a *Account) insert(i int, r Range, next Next) {
	if i > 0 && joins(a.Ranges[i-1], r, next) {
		i--
		a.Ranges[i] = join(a.Ranges[i], r)
	} else {
		a.Ranges = slices.Insert(a.Ranges, i, r)
	}
	if i+1 < len(a.Ranges) && joins(a.Ranges[i], a.Ranges[i+1], next) {
		a.Ranges[i] = join(a.Ranges[i], a.Ranges[i+1])
		a.Ranges = slices.Delete(a.Ranges, i+1, i+2)
	}
}

func joins(p, r Range, next Next) bool {
	return sameRun(p, r) && next(p.Last).Equal(r.First)
}

// sameRun says whether p and r may be one range: of one class and
// reason, term, catch-up run and span in which nobody led (by its
// start).
func sameRun(p, r Range) bool {
	return p.Class == r.Class && p.Reason == r.Reason && p.Token == r.Token && p.Instance == r.Instance &&
		p.By.Equal(r.By) && p.NobodyFrom.Equal(r.NobodyFrom)
}

// join returns p followed by r: the most attempts and lateness of both,
// the first error, and the nobody-led span through r's.
func join(p, r Range) Range {
	p.Last, p.Count = r.Last, p.Count+r.Count
	p.Attempts, p.Late = max(p.Attempts, r.Attempts), max(p.Late, r.Late)
	if r.NobodyUntil.After(p.NobodyUntil) {
		p.NobodyUntil = r.NobodyUntil
	}
	return p
}

// cutError cuts e to at most MaxError bytes, on a character boundary.
func cutError(e string) string {
	if len(e) <= MaxError {
		return e
	}
	n := MaxError
	for n > 0 && !utf8.RuneStart(e[n]) {
		n--
	}
	return e[:n]
}

// clipFront drops r's ticks at or before t.
func clipFront(r Range, t time.Time, next Next) Range {
	for r.Count > 0 && !r.First.After(t) {
		r.Count--
		if r.Count == 0 {
			break
		}
		r.First = next(r.First)
	}
	return r
}

// clipBack drops r's ticks at or after t.
func clipBack(r Range, t time.Time, next Next) Range {
	var n int64
	last := time.Time{}
	for c, k := r.First, int64(0); k < r.Count && c.Before(t) && !c.IsZero(); c, k = next(c), k+1 {
		last, n = c, n+1
	}
	r.Last, r.Count = last, n
	return r
}

// Fit folds a's oldest ranges into Folded until a encodes within
// MaxBytes, and returns the encoding.
func (a *Account) Fit() ([]byte, error) {
	for {
		b, err := a.Encode()
		if err != nil || len(b) <= MaxBytes {
			return b, err
		}
		if len(a.Ranges) == 0 {
			return nil, fmt.Errorf("audit: account of %q: %d bytes without ranges, more than %d", a.Job, len(b), MaxBytes)
		}
		r := a.Ranges[0]
		if a.Folded == nil {
			a.Folded = map[Class]int64{}
		}
		a.Folded[r.Class] += r.Count
		a.FoldedThrough = r.Last
		a.Ranges = a.Ranges[1:]
	}
}

// Encode returns a's stored form.
func (a *Account) Encode() ([]byte, error) { return json.Marshal(toWire(a)) }

// Decode reads an Account from its stored form.
func Decode(b []byte) (Account, error) {
	var w wireAccount
	if err := json.Unmarshal(b, &w); err != nil {
		return Account{}, fmt.Errorf("audit: decode an account: %w", err)
	}
	return fromWire(w), nil
}

// rank orders what a record knows of a tick: an outcome (ran, lost) over
// a catch-up's cover over a decision not to run it (refused, skipped,
// missed). A later term may run a tick an earlier one skipped or failed
// to claim (its catch-up claims it): its run is what became of the tick.
func rank(c Class) int {
	switch c {
	case Ran, Lost:
		return 3
	case Covered:
		return 2
	}
	return 1
}

// outranks says whether r takes the place of old's record of the ticks
// they share: r ranks above it.
func outranks(r, old Range) bool { return rank(r.Class) > rank(old.Class) }

// override takes out of each range that shares ticks with r, if beats(r,
// that range), the ticks from r.First through r.Last, so that Add records
// r in their place; it reports whether it took any out.
func (a *Account) override(r Range, next Next, beats func(r, old Range) bool) bool {
	changed := false
	for i := 0; i < len(a.Ranges); i++ {
		old := a.Ranges[i]
		if old.Last.Before(r.First) {
			continue
		}
		if old.First.After(r.Last) {
			break
		}
		if !beats(r, old) {
			continue
		}
		before, after := old, old
		before.Count, after.Count = 0, 0
		for c, k := old.First, int64(0); k < old.Count && !c.IsZero(); c, k = next(c), k+1 {
			switch {
			case c.Before(r.First):
				before.Last, before.Count = c, before.Count+1
			case c.After(r.Last):
				if after.Count == 0 {
					after.First = c
				}
				after.Last, after.Count = c, after.Count+1
			}
		}
		var keep []Range
		for _, p := range []Range{before, after} {
			if p.Count > 0 {
				keep = append(keep, p)
			}
		}
		a.Ranges = slices.Replace(a.Ranges, i, i+1, keep...)
		i += len(keep) - 1
		changed = true
	}
	return changed
}
