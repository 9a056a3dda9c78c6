package schedulerhost

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton/ledger"
)

// An entry still running whose term has ended (a later entry has a later
// token) is shown as settling; the newest, of the term that may still
// run it, as running; a tick whose claim was refused, in no ledger, among
// them by tick.
func TestHost_PresentSettlingAndRefused(t *testing.T) {
	h, err := New(Config{Instance: "a", Jobs: []Job{{Name: "t", Schedule: "@every 1s", Run: func(context.Context) error { return nil }}}})
	if err != nil {
		t.Fatal(err)
	}
	at := func(s int) time.Time { return time.Date(2026, 12, 6, 2, 0, s, 0, time.UTC) }
	j := h.jobs[0]
	j.mu.Lock()
	j.keep(ledger.Run{Job: "t", Tick: at(4), Token: 2, Result: ledger.ResultCancelled, Error: refusedPrefix + "403 Forbidden"})
	j.keep(ledger.Run{Job: "t", Tick: at(3), Token: 2, Result: ledger.ResultOK})
	j.mu.Unlock()
	runs := h.present("t", []ledger.Run{
		{Job: "t", Tick: at(3), Token: 2, Result: ledger.ResultRunning},
		{Job: "t", Tick: at(2), Token: 1, Result: ledger.ResultRunning},
		{Job: "t", Tick: at(1), Token: 1, Result: ledger.ResultOK},
	}, 10)
	want := []ledger.Result{ledger.ResultCancelled, ledger.ResultRunning, ledger.ResultSettling, ledger.ResultOK}
	if len(runs) != len(want) {
		t.Fatalf("present = %+v, want %d runs", runs, len(want))
	}
	for i, r := range runs {
		if r.Result != want[i] {
			t.Errorf("run %d (tick %v): %s, want %s", i, r.Tick, r.Result, want[i])
		}
	}
	if runs[2].Error != SettlingError(1) {
		t.Errorf("settling entry's error %q, want %q", runs[2].Error, SettlingError(1))
	}
	if got := h.present("t", nil, 0); len(got) != 0 {
		t.Errorf("present with n 0 = %+v", got)
	}
}
