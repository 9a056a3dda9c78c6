package httpapi

import "time"

// Poll names one of the polls every instance runs beside the election,
// leader or not (package baton's runner): their reads go to the backend
// whoever leads.
type Poll string

// The polls.
const (
	AbsencePoll Poll = "absence" // who leads and the jobs' deadlines, every Advanced.AbsencePollInterval
	AuditPoll   Poll = "audit"   // the tick accounting of the last 24 h, every Advanced.AuditPollInterval
)

// PollError is the failure of a poll's last round, as GET /status shows
// it: the error, and when the round began.
type PollError struct {
	Error string    `json:"error"`
	At    time.Time `json:"at"`
}

// SetPollError records how the round of poll begun at at went: err nil
// (every read succeeded) clears the poll's error. GET /status shows it
// (absence_poll_error, audit_poll_error). It does not touch the
// verdicts: a read that fails is the backend's state, the same on every
// instance, and if it made an instance unready every instance would be
// unready at once; the metrics the poll sets keep their last values, and
// it counts the failure in its own metric. It does not block; any
// goroutine may call it.
func (a *API) SetPollError(poll Poll, err error, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err == nil {
		delete(a.pollErrs, poll)
		return
	}
	if a.pollErrs == nil {
		a.pollErrs = map[Poll]PollError{}
	}
	a.pollErrs[poll] = PollError{Error: err.Error(), At: at}
}

// pollError returns poll's last error, nil if none.
func (a *API) pollError(poll Poll) *PollError {
	a.mu.Lock()
	defer a.mu.Unlock()
	if pe, ok := a.pollErrs[poll]; ok {
		return &pe
	}
	return nil
}
