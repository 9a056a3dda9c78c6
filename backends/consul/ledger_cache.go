package consul

import (
	"time"

	"github.com/batonhq/baton/ledger"
)

// jobState is what a Ledger knows of a job.
type jobState struct {
	last      lastEntry
	lastIndex uint64 // ModifyIndex of "last"; 0: no entry
	lastKnown bool
	slots     []slotState // by slot number; nil until one is known
}

// slotState is a ring slot as this Ledger last wrote or read it.
type slotState struct {
	known bool
	stale bool   // not known: it changed, or may have (read it before use)
	index uint64 // ModifyIndex; 0: no entry
	seq   uint64 // of the run in it
	tick  int64  // UnixNano of the run's tick
	token uint64
}

// holds reports whether the slot holds the run with tick and token.
func (s slotState) holds(tick time.Time, token uint64) bool {
	return s.known && s.index != 0 && s.tick == tick.UnixNano() && s.token == token
}

// jobLocked returns the job's state, creating it (and forgetting another
// job if there are too many).
func (l *tickLedger) jobLocked(job string) *jobState {
	j := l.jobs[job]
	if j == nil {
		if len(l.jobs) >= maxCachedJobs {
			for k := range l.jobs {
				delete(l.jobs, k)
				break
			}
		}
		j = &jobState{}
		l.jobs[job] = j
	}
	return j
}

// knownLast returns the job's "last" entry and its ModifyIndex as this
// Ledger last saw them.
func (l *tickLedger) knownLast(job string) (lastEntry, uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if j := l.jobs[job]; j != nil && j.lastKnown {
		return j.last, j.lastIndex, true
	}
	return lastEntry{}, 0, false
}

// sawLast records the job's "last" entry at index, unless a newer one is
// known.
func (l *tickLedger) sawLast(job string, e lastEntry, index uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	j := l.jobLocked(job)
	if !j.lastKnown || index >= j.lastIndex {
		j.last, j.lastIndex, j.lastKnown = e, index, true
	}
}

// forgetLast drops what this Ledger knows of the jobs' "last" entries
// (they changed, or may have).
func (l *tickLedger) forgetLast(jobs ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, job := range jobs {
		if j := l.jobs[job]; j != nil {
			j.last, j.lastIndex, j.lastKnown = lastEntry{}, 0, false
		}
	}
}

// slot returns what this Ledger knows of the ring slot of the job's run
// seq. A slot of one of the job's first History runs that it knows nothing
// of is taken to be empty (a CAS says otherwise if it is not).
func (l *tickLedger) slot(job string, seq uint64) (slotState, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if j := l.jobs[job]; j != nil && j.slots != nil {
		switch s := j.slots[seq%l.history()]; {
		case s.known:
			return s, true
		case s.stale:
			return slotState{}, false
		}
	}
	if seq <= l.history() {
		return slotState{known: true}, true
	}
	return slotState{}, false
}

// setSlot records the ring slot of the job's run seq.
func (l *tickLedger) setSlot(job string, seq uint64, s slotState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	j := l.jobLocked(job)
	if j.slots == nil {
		j.slots = make([]slotState, l.history())
	}
	j.slots[seq%l.history()] = s
}

// inRing reports whether this Ledger knows the run p of job to be in its
// ring slot.
func (l *tickLedger) inRing(job string, p pendingRun) bool {
	s, ok := l.slot(job, p.Seq)
	return ok && s.holds(p.Tick, p.Token)
}

// seqOf returns the number of the run r if this Ledger knows its entry:
// carried by "last" or in the ring.
func (l *tickLedger) seqOf(r ledger.Run) (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	j := l.jobs[r.Job]
	if j == nil {
		return 0, false
	}
	if j.lastKnown {
		for _, p := range j.last.Runs {
			if p.Tick.Equal(r.Tick) && p.Token == r.Token {
				return p.Seq, true
			}
		}
	}
	for _, s := range j.slots {
		if s.holds(r.Tick, r.Token) {
			return s.seq, true
		}
	}
	return 0, false
}
