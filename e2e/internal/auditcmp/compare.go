package auditcmp

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/e2e/internal/history"
)

// Tick is one due tick as the accounting shows it.
type Tick struct {
	Class    audit.Class
	Reason   audit.Reason
	Token    uint64 // the term its range names; zero if none (ticks that ran ok: Report.NotOK lists the others only)
	Instance string
	Error    string
}

// Expand lists the due ticks of rep, a fixed-period job's report under
// policy p, by tick (Unix nanoseconds): every tick of p after rep.From
// (and from its first schedule's instant on) through rep.To, in the class of the NotOK range that holds it, else
// ran ok. It also returns what does not add up: a Due that is not the
// number of ticks, a NotOK tick off the schedule or outside the window,
// two ranges holding one tick, folded ticks (their class is unknown tick
// by tick), class counts that do not add up to Due.
func Expand(rep audit.Report, p history.Policy) (map[int64]Tick, []string) {
	var bad []string
	out := map[int64]Tick{}
	from := rep.From
	if len(rep.Specs) > 0 && rep.Specs[0].At.Add(-time.Nanosecond).After(from) {
		from = rep.Specs[0].At.Add(-time.Nanosecond) // due from its first spec on
	}
	for t := First(p, from); !t.After(rep.To); t = t.Add(p.Every) {
		out[t.UnixNano()] = Tick{Class: audit.Ran, Reason: audit.ReasonOK}
	}
	if int64(len(out)) != rep.Due {
		bad = append(bad, fmt.Sprintf("job %s: the accounting says %d ticks due after %s through %s, the schedule has %d",
			rep.Job, rep.Due, stamp(rep.From), stamp(rep.To), len(out)))
	}
	if rep.Folded > 0 {
		bad = append(bad, fmt.Sprintf("job %s: %d ticks folded (through %s): not comparable tick by tick", rep.Job, rep.Folded, stamp(rep.FoldedThrough)))
	}
	var sum int64
	for _, n := range rep.Classes {
		sum += n
	}
	if sum+rep.Folded != rep.Due {
		bad = append(bad, fmt.Sprintf("job %s: classes %v and %d folded add up to %d, not the %d due", rep.Job, rep.Classes, rep.Folded, sum+rep.Folded, rep.Due))
	}
	listed := map[int64]bool{}
	for _, r := range rep.NotOK {
		t := r.First
		for k := int64(0); k < r.Count; k, t = k+1, t.Add(p.Every) {
			cur, due := out[t.UnixNano()]
			switch {
			case !due:
				bad = append(bad, fmt.Sprintf("job %s: range %s(%s) %s..%s: tick %s is not a due tick of the window", rep.Job, r.Class, r.Reason, stamp(r.First), stamp(r.Last), stamp(t)))
				continue
			case listed[t.UnixNano()]:
				bad = append(bad, fmt.Sprintf("job %s: tick %s in two ranges (%s(%s) and %s(%s))", rep.Job, stamp(t), cur.Class, cur.Reason, r.Class, r.Reason))
			}
			listed[t.UnixNano()] = true
			out[t.UnixNano()] = Tick{Class: r.Class, Reason: r.Reason, Token: r.Token, Instance: r.Instance, Error: r.Error}
		}
		if r.Count > 0 && !t.Add(-p.Every).Equal(r.Last) {
			bad = append(bad, fmt.Sprintf("job %s: range %s(%s) from %s: %d ticks end at %s, not at its Last %s", rep.Job, r.Class, r.Reason, stamp(r.First), r.Count, stamp(t.Add(-p.Every)), stamp(r.Last)))
		}
	}
	return out, bad
}

// First is the first tick of p after from, as the checker counts them.
func First(p history.Policy, from time.Time) time.Time {
	if !p.Epoch {
		return from.Truncate(p.Every).Add(p.Every)
	}
	base := time.Unix(0, 0).Add(p.Offset)
	since := from.Sub(base)
	k := since / p.Every
	if since%p.Every < 0 {
		k--
	}
	return base.Add((k + 1) * p.Every)
}

// Result is one comparison.
type Result struct {
	Due      int                 // ticks due in the accounting, every job
	Classes  map[audit.Class]int // of them, by class
	Compared int                 // ticks compared (at or before the cut-off)
	Pending  int                 // ticks after the cut-off: not compared
	Cutoff   time.Time
	// Lost and Missed: ticks the checker calls lost, and those it
	// accounts for as missed (nobody led); all must be in the
	// accounting with the same cause, or they are Disagreements.
	Lost, Missed  int
	Disagreements []string
}

// OK reports whether the two views agree.
func (r Result) OK() bool { return len(r.Disagreements) == 0 }

// Compare compares the accounting (one report per job, over the window
// the checker judged) with the checker's verdicts, for the jobs of
// jobs, tick by tick at or before cutoff: the ticks after it may still
// be pending in the accounting (within audit's write lag of the window's
// end), and are counted, not compared.
func Compare(verdicts []history.TickVerdict, reports []audit.Report, jobs map[string]history.Policy, cutoff time.Time) Result {
	res := Result{Classes: map[audit.Class]int{}, Cutoff: cutoff}
	byJob := map[string]audit.Report{}
	for _, r := range reports {
		byJob[r.Job] = r
	}
	judged := map[string]map[int64]history.TickVerdict{}
	for _, v := range verdicts {
		if judged[v.Job] == nil {
			judged[v.Job] = map[int64]history.TickVerdict{}
		}
		judged[v.Job][v.Tick.UnixNano()] = v
	}
	for _, job := range slices.Sorted(maps.Keys(jobs)) {
		p := jobs[job]
		rep, ok := byJob[job]
		if !ok {
			res.Disagreements = append(res.Disagreements, fmt.Sprintf("job %s: no accounting", job))
			continue
		}
		ticks, bad := Expand(rep, p)
		res.Disagreements = append(res.Disagreements, bad...)
		for _, k := range slices.Sorted(maps.Keys(ticks)) {
			res.Due++
			res.Classes[ticks[k].Class]++
			if _, ok := judged[job][k]; !ok && !time.Unix(0, k).After(cutoff) {
				res.Disagreements = append(res.Disagreements, fmt.Sprintf("job %s tick %s: due in the accounting (%s(%s)), not judged by the checker",
					job, stamp(time.Unix(0, k)), ticks[k].Class, ticks[k].Reason))
			}
		}
		for _, k := range slices.Sorted(maps.Keys(judged[job])) {
			v := judged[job][k]
			if v.Tick.After(cutoff) {
				res.Pending++
				continue
			}
			res.Compared++
			switch {
			case v.Verdict == history.VerdictLost:
				res.Lost++
			case v.Verdict == history.VerdictAccounted && slices.Contains(mustWant(v), Want{audit.Missed, audit.ReasonNoLeader, false, false}):
				res.Missed++
			}
			got, due := ticks[k]
			if !due {
				res.Disagreements = append(res.Disagreements, fmt.Sprintf("job %s tick %s: checker %s, not due in the accounting", job, stamp(v.Tick), describe(v)))
				continue
			}
			if why := disagree(v, got); why != "" {
				res.Disagreements = append(res.Disagreements, fmt.Sprintf("job %s tick %s: checker %s, accounting %s(%s)%s: %s",
					job, stamp(v.Tick), describe(v), got.Class, got.Reason, term(got.Token, got.Instance), why))
			}
		}
	}
	return res
}

func mustWant(v history.TickVerdict) []Want {
	ws, _ := Allowed(v)
	return ws
}

// disagree says why the accounting's tick got does not fit the checker's
// verdict v; "" if it does.
func disagree(v history.TickVerdict, got Tick) string {
	ws, ok := Allowed(v)
	if !ok {
		return "the mapping has no row for the checker's reason"
	}
	fits, earlier := false, false
	for _, w := range ws {
		switch {
		case !w.Allows(got.Class, got.Reason):
		case w.Later && got.Token != 0 && v.Token != 0 && got.Token <= v.Token:
			earlier = true
		case w.Same && got.Token != v.Token:
		default:
			fits = true
		}
	}
	if !fits && earlier {
		return fmt.Sprintf("only a term after the checker's %d (%s) may show it so", v.Token, v.Instance)
	}
	if !fits {
		names := make([]string, len(ws))
		for i, w := range ws {
			names[i] = w.String()
		}
		return "want " + strings.Join(names, " or ")
	}
	// The same term: the run's, or the one the checker lost it in.
	sameTerm := v.Verdict == history.VerdictRan || (v.Verdict == history.VerdictLost && got.Class == audit.Lost)
	if sameTerm && got.Token != 0 && v.Token != 0 && got.Token != v.Token {
		return fmt.Sprintf("the checker's term is %d (%s)", v.Token, v.Instance)
	}
	return ""
}

func describe(v history.TickVerdict) string {
	s := string(v.Verdict)
	if v.Reason != "" {
		s += " (" + v.Reason + ")"
	}
	return s + term(v.Token, v.Instance)
}

func term(token uint64, instance string) string {
	if token == 0 {
		return ""
	}
	return fmt.Sprintf(" by term %d (%s)", token, instance)
}

func stamp(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// Summary is one line of figures and the disagreements, first max of
// them, for a backend's summary.
func (r Result) Summary(label string, max int) string {
	var b strings.Builder
	classes := make([]string, 0, len(audit.Classes))
	for _, c := range audit.Classes {
		classes = append(classes, fmt.Sprintf("%s %d", c, r.Classes[c]))
	}
	fmt.Fprintf(&b, "    accounting vs checker (%s): due %d (%s); compared %d ticks through %s, %d after it not compared (within the accounting's write lag of the window's end); checker lost %d, missed while nobody led %d; disagreements %d\n",
		label, r.Due, strings.Join(classes, ", "), r.Compared, stamp(r.Cutoff), r.Pending, r.Lost, r.Missed, len(r.Disagreements))
	for i, d := range r.Disagreements {
		if i == max {
			fmt.Fprintf(&b, "      ... and %d more\n", len(r.Disagreements)-max)
			break
		}
		fmt.Fprintf(&b, "      disagreement: %s\n", d)
	}
	return b.String()
}
