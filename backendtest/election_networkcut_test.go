package backendtest

import (
	"testing"
	"time"
)

// TestFirstOut_OrderByRecordedTimes pins how a network-cut trial tells
// which came first, a's term's end or b's start: by the times the lead
// functions recorded. With both already sent when the trial's goroutine
// gets to run, select picks either channel; a trial must pass when a's
// term ended first and fail when b led first, whichever it receives.
func TestFirstOut_OrderByRecordedTimes(t *testing.T) {
	cut := time.Now()
	aEnd, bStart := cut.Add(1300*time.Millisecond), cut.Add(2200*time.Millisecond)
	for i := range 50 {
		aTerm, bStarted := make(chan cutTerm, 1), make(chan time.Time, 1)
		aTerm <- cutTerm{ended: aEnd}
		bStarted <- bStart
		at, bt := firstOut(aTerm, bStarted, time.Second)
		if at.ended.IsZero() {
			t.Fatalf("round %d: a's term, sent before b's start, was not returned (b's start: %v)", i, bt.Sub(cut))
		}
		if !bt.IsZero() && !at.ended.Before(bt) {
			t.Fatalf("round %d: a's term ended at %v, b led at %v: judged b first", i, at.ended.Sub(cut), bt.Sub(cut))
		}
	}
	for i := range 50 {
		aTerm, bStarted := make(chan cutTerm, 1), make(chan time.Time, 1)
		aTerm <- cutTerm{ended: bStart.Add(time.Millisecond)}
		bStarted <- bStart
		at, bt := firstOut(aTerm, bStarted, time.Second)
		if bt.IsZero() {
			if bt = <-bStarted; !at.ended.After(bt) {
				t.Fatalf("round %d: test broken: a ended at %v, b led at %v", i, at.ended.Sub(cut), bt.Sub(cut))
			}
			continue // the trial's later check (gap <= 0) fails it
		}
		if at.ended.Before(bt) {
			t.Fatalf("round %d: b led at %v before a's term ended at %v: judged a first", i, bt.Sub(cut), at.ended.Sub(cut))
		}
	}
	// b led and a's term never ends: b's start, no term, after wait.
	bStarted := make(chan time.Time, 1)
	bStarted <- bStart
	if at, bt := firstOut(make(chan cutTerm), bStarted, 20*time.Millisecond); !at.ended.IsZero() || !bt.Equal(bStart) {
		t.Fatalf("b led, a's term live: got a's end %v, b's start %v", at.ended, bt)
	}
	// Neither: nothing after wait.
	if at, bt := firstOut(make(chan cutTerm), make(chan time.Time), 20*time.Millisecond); !at.ended.IsZero() || !bt.IsZero() {
		t.Fatalf("neither: got a's end %v, b's start %v", at.ended, bt)
	}
}
