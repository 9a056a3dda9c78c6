package audit

import (
	"testing"

	"github.com/batonhq/baton/ledger"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		result ledger.Result
		err    string
		class  Class
		reason Reason
	}{
		{ledger.ResultOK, "", Ran, ReasonOK},
		{ledger.ResultFailed, "exit status 1", Ran, ReasonFailed},
		{ledger.ResultFailed, "exit status 1 (not retried: paused by alice at 2026-11-24T10:00:00Z)", Ran, ReasonFailed},
		{ledger.ResultFailed, "exit status 1 " + ErrTextRetryCut + ": lease lost)", Lost, ReasonRetryCut},
		{ledger.ResultFailed, ErrTextNotDelivered + "dial tcp 127.0.0.1:8080: connection refused " + ErrTextRetryCut + ")", Lost, ReasonNotDelivered},
		{ledger.ResultFailed, ErrTextNotDelivered + "connection refused", Ran, ReasonFailed}, // retries spent: it ran, and failed
		{ledger.ResultTimeout, "deadline exceeded", Ran, ReasonTimeout},
		{ledger.ResultCancelled, "leadership lost", Ran, ReasonCancelled},
		{ledger.ResultCancelled, ErrTextNotStarted + "claim outcome unknown: i/o timeout", Refused, ReasonClaimFailed},
		{ledger.ResultCancelled, ErrTextNotStarted + "pause state unknown: i/o timeout", Refused, ReasonClaimFailed},
		{ledger.ResultCancelled, "not started: claim refused: 403 Forbidden", Refused, ReasonDenied},
		{ledger.ResultCancelled, ErrTextClaimedNotStarted + ": term ended", Lost, ReasonTermEnded},
		{ledger.ResultCancelled, "stopped: " + ErrTextNotStarted, Ran, ReasonCancelled}, // a prefix, not anywhere
		{ledger.ResultSkipped, "paused by alice", Skipped, ReasonPaused},
		{ledger.ResultUnknown, "term 7 ended before its outcome was recorded", Lost, ReasonOutcomeUnknown},
		{ledger.ResultRunning, "", Pending, ReasonRunning},
		{ledger.ResultSettling, "", Pending, ReasonRunning},
	}
	for _, c := range cases {
		class, reason := Classify(ledger.Run{Result: c.result, Error: c.err})
		if class != c.class || reason != c.reason {
			t.Errorf("Classify(%s, %q) = %s/%s, want %s/%s", c.result, c.err, class, reason, c.class, c.reason)
		}
	}
	if len(Classes) != 7 || Classes[0] != Ran || Classes[6] != Pending {
		t.Errorf("Classes = %v, want the seven, ran first, pending last", Classes)
	}
}
