package audit

import (
	"encoding/json"
	"strings"
	"time"
)

// Refusal is a leader's report that the backend refuses its claims (not
// authorised): the ticks its term did not run because of it, which the
// ledger cannot record (the backend refuses those writes too). The
// leader keeps it in its lease's note (election.Noter), which every
// instance reads (election.LeaderInfo.Note).
type Refusal struct {
	Token    uint64    `json:"token"`
	Instance string    `json:"instance"`
	Since    time.Time `json:"since"` // the first refusal of the streak
	First    time.Time `json:"first"` // the tick it refused first
	Count    int       `json:"count"` // claims refused in the streak
	Error    string    `json:"error"` // the last refusal, cut to MaxError bytes
}

// notePrefix marks a lease note that holds a Refusal.
const notePrefix = "refused "

// Note returns r as a lease note.
func (r Refusal) Note() string {
	if len(r.Error) > MaxError {
		r.Error = r.Error[:MaxError]
	}
	b, _ := json.Marshal(r)
	return notePrefix + string(b)
}

// ParseNote reads a Refusal from a lease note; ok is false if the note
// holds none.
func ParseNote(note string) (r Refusal, ok bool) {
	rest, found := strings.CutPrefix(note, notePrefix)
	if !found || json.Unmarshal([]byte(rest), &r) != nil {
		return Refusal{}, false
	}
	return r, true
}

// refusedAt returns the refusal whose streak tick t falls in: at or
// after its first refused tick.
func refusedAt(rs []Refusal, t time.Time) (Refusal, bool) {
	for _, r := range rs {
		if !r.First.IsZero() && !t.Before(r.First) {
			return r, true
		}
	}
	return Refusal{}, false
}
