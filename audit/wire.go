package audit

import "time"

// The stored form is compact: short keys and times as Unix nanoseconds.
// A range takes about 133 bytes without an error (60 ranges within
// MaxBytes), 216 on average when every other one has an error of
// MaxError bytes (36 ranges): TestFitBound measures it.
type wireAccount struct {
	Job    string          `json:"j"`
	Specs  []wireSpec      `json:"s,omitempty"`
	Ranges []wireRange     `json:"r,omitempty"`
	Folded map[Class]int64 `json:"f,omitempty"`
	Thru   int64           `json:"ft,omitempty"`
}

type wireSpec struct {
	At       int64  `json:"a"`
	Schedule string `json:"s"`
	Zone     string `json:"z,omitempty"`
}

type wireRange struct {
	Class    Class  `json:"c"`
	Reason   Reason `json:"r"`
	First    int64  `json:"f"`
	Last     int64  `json:"l"`
	Count    int64  `json:"n"`
	Token    uint64 `json:"t,omitempty"`
	Instance string `json:"i,omitempty"`
	Attempts int    `json:"a,omitempty"`
	Late     int64  `json:"d,omitempty"`
	By       int64  `json:"b,omitempty"`
	From     int64  `json:"nf,omitempty"`
	Until    int64  `json:"nu,omitempty"`
	Error    string `json:"e,omitempty"`
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func toWire(a *Account) wireAccount {
	w := wireAccount{Job: a.Job, Folded: a.Folded, Thru: nanos(a.FoldedThrough)}
	for _, s := range a.Specs {
		w.Specs = append(w.Specs, wireSpec{nanos(s.At), s.Schedule, s.Zone})
	}
	for _, r := range a.Ranges {
		w.Ranges = append(w.Ranges, wireRange{r.Class, r.Reason, nanos(r.First), nanos(r.Last), r.Count, r.Token,
			r.Instance, r.Attempts, int64(r.Late), nanos(r.By), nanos(r.NobodyFrom), nanos(r.NobodyUntil), r.Error})
	}
	return w
}

func fromWire(w wireAccount) Account {
	a := Account{Job: w.Job, Folded: w.Folded, FoldedThrough: fromNanos(w.Thru)}
	for _, s := range w.Specs {
		a.Specs = append(a.Specs, Spec{fromNanos(s.At), s.Schedule, s.Zone})
	}
	for _, r := range w.Ranges {
		a.Ranges = append(a.Ranges, Range{Class: r.Class, Reason: r.Reason, First: fromNanos(r.First), Last: fromNanos(r.Last),
			Count: r.Count, Token: r.Token, Instance: r.Instance, Attempts: r.Attempts, Late: time.Duration(r.Late),
			By: fromNanos(r.By), NobodyFrom: fromNanos(r.From), NobodyUntil: fromNanos(r.Until), Error: r.Error})
	}
	return a
}
