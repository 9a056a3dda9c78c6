package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/redis"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/ledger"
)

// Bounds of the Sentinel tests: a promotion takes a few seconds after
// down-after-milliseconds (1s); demoting the old primary after the heal
// takes Sentinel up to about 20s.
const (
	promoteWithin = 30 * time.Second
	demoteWithin  = 60 * time.Second
	sentinelTTL   = 2 * time.Second
)

// sentinelSetup is a Sentinel set and two candidates of one election: L1
// on the primary directly (the client on the primary's side of the
// partition), L2 through the Sentinels (it follows the promotion).
type sentinelSetup struct {
	s      *redistest.Sentinels
	l1, l2 *redis.Backend
	e      string
	timing election.Timing
	t0     time.Time
}

func newSentinelSetup(t *testing.T, wait int) *sentinelSetup {
	s := redistest.StartSentinels(t, "baton-m")
	e := electionName(t)
	timing := election.Timing{TTL: sentinelTTL}
	return &sentinelSetup{
		s:  s,
		l1: newBackend(t, redis.Config{Addr: s.Primary.Addr(), Election: e, Timing: timing, WaitReplicas: wait}),
		l2: newBackend(t, redis.Config{SentinelAddrs: s.Addrs(), MasterName: s.Master, Election: e, Timing: timing, WaitReplicas: wait}),
		e:  e, timing: timing,
		t0: time.Now(),
	}
}

// at is t relative to the setup's start, for the logs.
func (x *sentinelSetup) at(t time.Time) time.Duration { return t.Sub(x.t0).Round(time.Millisecond) }

// waitReplicated waits until the replica holds key as the primary does.
func (x *sentinelSetup) waitReplicated(t *testing.T, key string) {
	t.Helper()
	want := redistest.Do(t, x.s.Primary.Addr(), "GET", key)
	for start := time.Now(); redistest.Do(t, x.s.Replica.Addr(), "GET", key) != want; {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("the replica does not hold %s = %s", key, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cutAndPromote blackholes the proxy in front of the primary and waits
// until the Sentinels name the replica as the primary.
func (x *sentinelSetup) cutAndPromote(t *testing.T) (cut, promoted time.Time) {
	t.Helper()
	x.s.Proxy.Blackhole()
	cut = time.Now()
	for x.s.PrimaryAddr(t) != x.s.Replica.Addr() {
		if time.Since(cut) > promoteWithin {
			t.Fatalf("no promotion within %v of the cut:\n%s", promoteWithin, x.s.Sentinels[0].Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return cut, time.Now()
}

// heal lifts the partition and returns when the old primary is a replica
// of the new one.
func (x *sentinelSetup) heal(t *testing.T) (healed, demoted time.Time) {
	t.Helper()
	x.s.Proxy.Heal()
	healed = time.Now()
	for redistest.Role(t, x.s.Primary.Addr()) != "slave" {
		if time.Since(healed) > demoteWithin {
			t.Fatalf("old primary not demoted within %v of the heal:\n%s", demoteWithin, x.s.Sentinels[0].Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return healed, time.Now()
}

func claimOne(t *testing.T, b *redis.Backend, l election.Lease, tick time.Time, who string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return b.Ledger().Claim(ctx, []ledger.Claim{{Job: "report", Tick: tick, Token: l.Token(), Instance: who, Started: time.Now()}})[0]
}

// claimAsHost claims as the Host does: a claim that fails as not
// replicated is asked again (right after a replica's full sync, a WAIT
// may time out: the primary streams nothing to it, GETACK included,
// until its first acknowledgement, sent once a second); a retry refused
// as claimed is this term's claim if History shows the tick with its
// token.
func claimAsHost(t *testing.T, b *redis.Backend, l election.Lease, tick time.Time, who string) error {
	retried := false
	for start := time.Now(); ; retried = true {
		err := claimOne(t, b, l, tick, who)
		switch {
		case errors.Is(err, redis.ErrNotReplicated) && time.Since(start) < 5*time.Second:
			t.Logf("%s: claim %v: %v; asking again", who, tick.Format(time.TimeOnly), err)
			time.Sleep(100 * time.Millisecond)
			continue
		case retried && errors.Is(err, ledger.ErrTickClaimed):
			runs, herr := b.Ledger().History(ctxT(t, 5*time.Second), "report", 1)
			if herr == nil && len(runs) == 1 && runs[0].Tick.Equal(tick) && runs[0].Token == l.Token() {
				return nil
			}
		}
		return err
	}
}

// The limit of asynchronous replication, shown: the primary is cut off
// from its replica and the Sentinels, which promote the replica. L1,
// connected to the old primary, goes on renewing there; L2 leads on the
// promoted replica once the replicated key expires. Both terms are live
// at once, and both claim the same tick. The test passes by asserting
// that overlap.
func TestSentinelAsyncFailoverOverlaps(t *testing.T) {
	// Not parallel: two Sentinel sets beside the Cluster tests loaded the
	// machine enough that L2 once did not lead within promoteWithin in a
	// CI run (cause not found; the failure now prints both servers' view
	// of the lease key).
	x := newSentinelSetup(t, 0)
	l1 := backendtest.Acquire(t, x.l1, "L1", acquireWithin)
	l1Start := time.Now()
	defer l1.Release(context.Background()) //nolint:errcheck // ends the renew loop; the server may be gone
	ctx := ctxT(t, promoteWithin+demoteWithin+time.Minute)
	// L2 campaigns through the Sentinels from before the cut, as a
	// `--redis-sentinel` node does: its client must follow the promotion.
	// (Before Acquire bounded its subscription, a Sentinel client twice did
	// not lead within promoteWithin in loaded CI runs; 4 runs of the whole
	// package, 3 of them with a core kept busy, then led 120-200 ms after
	// the promotion.)
	ch := backendtest.AcquireAsync(ctx, x.l2, "L2")

	x.waitReplicated(t, x.l1.LeaseKey())
	cut, promoted := x.cutAndPromote(t)
	l2b := x.l2
	var r backendtest.Result
	select {
	case r = <-ch:
	case <-time.After(promoteWithin):
		key := x.l1.LeaseKey()
		t.Fatalf("L2 did not lead on the promoted replica within %v of the promotion at %v: the Sentinels name %s; new primary %s: %s = %q, PTTL %s; old primary: %q, PTTL %s",
			promoteWithin, x.at(promoted), x.s.PrimaryAddr(t), x.s.Replica.Addr(), key,
			redistest.Do(t, x.s.Replica.Addr(), "GET", key), redistest.Do(t, x.s.Replica.Addr(), "PTTL", key),
			redistest.Do(t, x.s.Primary.Addr(), "GET", key), redistest.Do(t, x.s.Primary.Addr(), "PTTL", key))
	}
	if r.Err != nil {
		t.Fatalf("L2: Acquire: %v", r.Err)
	}
	l2 := r.Lease
	defer backendtest.Release(t, l2)
	select {
	case <-l1.Done():
		t.Fatalf("L1's term ended (%v) before L2 led: no overlap to show", l1.Err())
	default:
	}
	tick := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	e1 := claimOne(t, x.l1, l1, tick, "L1")
	e2 := claimOne(t, l2b, l2, tick, "L2")
	if e1 != nil || e2 != nil {
		t.Errorf("the same tick: L1 (token %d, old primary): %v; L2 (token %d, new primary): %v; want both claimed", l1.Token(), e1, l2.Token(), e2)
	}

	healed, demoted := x.heal(t)
	select {
	case <-l1.Done():
	case <-time.After(demoteWithin):
		t.Fatalf("L1's term did not end within %v of the demotion", demoteWithin)
	}
	l1End := time.Now()
	t.Logf("async: cut at %v, replica promoted at %v; L1 (token %d) led [%v, %v] on the old primary; L2 (token %d) led from %v on the new one; overlap %v (healed at %v, old primary demoted at %v, L1 ended by: %v)",
		x.at(cut), x.at(promoted), l1.Token(), x.at(l1Start), x.at(l1End), l2.Token(), x.at(r.At), l1End.Sub(r.At).Round(time.Millisecond), x.at(healed), x.at(demoted), l1.Err())
	t.Logf("async: tick %v claimed by L1 on the old primary (%v) and by L2 on the new one (%v)", tick.Format(time.TimeOnly), e1, e2)
	if !r.At.Before(l1End) {
		t.Errorf("L2 led at %v, after L1's term ended at %v: no overlap", x.at(r.At), x.at(l1End))
	}
	if l1.Token() == l2.Token() {
		t.Errorf("both terms have token %d, though the replica held L1's lease before the cut", l1.Token())
	}
}

// The same partition with WaitReplicas 1: L1's renewals get no
// acknowledgement, so its term ends at its local deadline; L2 cannot lead
// on the promoted replica (no replica acknowledges), until the heal makes
// the old primary its replica. No tick is claimed by both.
func TestSentinelWaitReplicasFailsClosed(t *testing.T) {
	t.Parallel()
	x := newSentinelSetup(t, 1)
	l1 := backendtest.Acquire(t, x.l1, "L1", acquireWithin)
	l1Start := time.Now()
	defer l1.Release(context.Background()) //nolint:errcheck // ends the renew loop; the server may be gone
	t1 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Minute)
	if err := claimOne(t, x.l1, l1, t1, "L1"); err != nil {
		t.Fatalf("L1 claims %v before the cut: %v", t1, err)
	}
	ctx := ctxT(t, promoteWithin+demoteWithin+time.Minute)
	ch := backendtest.AcquireAsync(ctx, x.l2, "L2")

	x.waitReplicated(t, x.l1.LeaseKey())
	x.s.Proxy.Blackhole()
	cut := time.Now()
	deadline := l1.(driver.Deadliner).Deadline()
	e1 := claimOne(t, x.l1, l1, t2, "L1")
	if e1 == nil || errors.Is(e1, ledger.ErrTickClaimed) {
		t.Errorf("L1 claims %v during the partition: %v, want a failure that is not ErrTickClaimed", t2, e1)
	}
	if !errors.Is(e1, redis.ErrNotReplicated) && !errors.Is(e1, election.ErrLeadershipLost) {
		t.Errorf("L1's claim: %v, want ErrNotReplicated (or the term's end)", e1)
	}
	select {
	case <-l1.Done():
	case <-time.After(sentinelTTL + 5*time.Second):
		t.Fatalf("L1's term did not end within TTL+5s of the cut")
	}
	l1End := time.Now()
	if l1End.After(cut.Add(sentinelTTL + time.Second)) {
		t.Errorf("L1's term ended %v after the cut, want within the TTL (%v)", l1End.Sub(cut), sentinelTTL)
	}
	for x.s.PrimaryAddr(t) != x.s.Replica.Addr() {
		if time.Since(cut) > promoteWithin {
			t.Fatalf("no promotion within %v of the cut:\n%s", promoteWithin, x.s.Sentinels[0].Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	promoted := time.Now()
	// The replicated key has expired on the new primary; L2 takes it
	// there, but no replica acknowledges: it must not lead.
	select {
	case r := <-ch:
		t.Fatalf("L2 returned from Acquire at %v, during the partition (promoted at %v): %v", x.at(r.At), x.at(promoted), r.Err)
	case <-time.After(2*sentinelTTL + time.Second):
	}

	healed, demoted := x.heal(t)
	r := backendtest.Await(t, ch, demoteWithin, "L2 did not lead after the heal")
	if r.Err != nil {
		t.Fatalf("L2: Acquire: %v", r.Err)
	}
	l2 := r.Lease
	defer backendtest.Release(t, l2)
	if !r.At.After(l1End) || !r.At.After(healed) {
		t.Errorf("L2 led at %v; L1's term ended at %v, the heal at %v: want L2 after both", x.at(r.At), x.at(l1End), x.at(healed))
	}
	if err := claimAsHost(t, x.l2, l2, t2, "L2"); err != nil {
		t.Errorf("L2 claims %v, which L1 failed to claim: %v", t2, err)
	}
	if err := claimOne(t, x.l2, l2, t1, "L2"); !errors.Is(err, ledger.ErrTickClaimed) {
		t.Errorf("L2 claims %v, which L1 claimed before the cut: %v, want ErrTickClaimed", t1, err)
	}
	t.Logf("wait: L1 (token %d) led from %v; cut at %v (L1's local deadline then %v); L1's term ended at %v (%v); replica promoted at %v; healed at %v, old primary demoted at %v; L2 (token %d) led at %v",
		l1.Token(), x.at(l1Start), x.at(cut), x.at(deadline), x.at(l1End), l1.Err(), x.at(promoted), x.at(healed), x.at(demoted), l2.Token(), x.at(r.At))
	t.Logf("wait: L1's claim during the partition: %v", e1)
}
