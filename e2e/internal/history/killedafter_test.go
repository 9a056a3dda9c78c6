package history

import (
	"testing"
	"time"
)

// A term that lost its lease (a backend fault) and whose node the suite
// killed only after the next term had started did not end in a crash:
// its failover is not held to the crash bound. The same term killed
// before the next term's start, or with no kill of the suite's on
// record, still is.
func TestCheck_KilledOnlyAfterTheNextTermIsNoCrash(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults []Fault
		slow   int
	}{
		{"killed after the next term started", []Fault{{At: at(13.1), Kind: "kill-follower", Target: "a"}}, 0},
		{"killed before the next term started", []Fault{{At: at(12.4), Kind: "kill-leader", Target: "a"}}, 1},
		{"no kill on record", nil, 1},
		{"another node killed after", []Fault{{At: at(13.1), Kind: "kill-follower", Target: "c"}}, 1},
		{"an earlier term of the node killed", []Fault{{At: at(0.2), Kind: "kill-leader", Target: "a"}, {At: at(13.1), Kind: "kill-follower", Target: "a"}}, 0},
		{"the leader killed after the next term started", []Fault{{At: at(13.1), Kind: "kill-leader", Target: "a"}}, 0},
		{"killed before, another fault at the node after", []Fault{{At: at(12.4), Kind: "kill-leader", Target: "a"}, {At: at(13.1), Kind: "partition", Target: "a"}}, 1},
		{"no kill, another fault at the node after", []Fault{{At: at(13.1), Kind: "sigstop-leader", Target: "a"}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := clean()
			// a lost its lease at 10.2 s (logged), b led at 12.5 s: a
			// 2.3 s failover against a 2 s crash bound.
			in.Terms[0].Lost = at(10.2)
			in.CrashBound = 2 * time.Second
			in.Faults = tc.faults
			r := Check(in)
			if r.SlowFailovers != tc.slow {
				t.Fatalf("%d slow failovers, want %d; violations: %v", r.SlowFailovers, tc.slow, r.Violations)
			}
			if r.MaxFailover != 2300*time.Millisecond {
				t.Errorf("max failover %v, want 2.3s whatever the kill", r.MaxFailover)
			}
		})
	}
}
