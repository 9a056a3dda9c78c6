package baton_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
)

// pair is a leader and a standby (it never campaigns) on one memory
// store, each running until its cancel; the leader leads when it returns.
// Each opt may change an instance's Advanced ("a" leads, "b" stands by).
type pair struct {
	leader, standby         *baton.Baton
	leaderReg, standbyReg   *prometheus.Registry
	stopLeader, stopStandby context.CancelFunc
	leaderDone, standbyDone chan error
}

func startPair(t *testing.T, job baton.Job, opts ...func(name string, adv *baton.Advanced)) *pair {
	t.Helper()
	mem := memory.New(election.Timing{TTL: 5 * time.Second})
	p := &pair{leaderReg: prometheus.NewRegistry(), standbyReg: prometheus.NewRegistry(),
		leaderDone: make(chan error, 1), standbyDone: make(chan error, 1)}
	start := func(name string, reg *prometheus.Registry, standby bool, done chan error) (*baton.Baton, context.CancelFunc) {
		adv := baton.Advanced{Ledger: mem.Ledger(), Control: mem.Control(), Standby: standby, AbsencePollInterval: time.Second}
		for _, o := range opts {
			o(name, &adv)
		}
		b, err := baton.New(baton.Config{Backend: mem.Candidate(), Election: "e", Instance: name, Registry: reg,
			Logger: slog.New(slog.DiscardHandler), Jobs: []baton.Job{job}, ShutdownTimeout: time.Second, Advanced: adv})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() { done <- b.Run(ctx) }()
		synctest.Wait()
		return b, cancel
	}
	p.leader, p.stopLeader = start("a", p.leaderReg, false, p.leaderDone)
	p.standby, p.stopStandby = start("b", p.standbyReg, true, p.standbyDone)
	if !p.leader.Leading() || p.standby.Leading() {
		t.Fatalf("leading: a %v, b %v; want a only", p.leader.Leading(), p.standby.Leading())
	}
	return p
}

// stop stops both and checks that Run returned nil.
func (p *pair) stop(t *testing.T) {
	t.Helper()
	p.stopLeader()
	p.stopStandby()
	for _, done := range []chan error{p.leaderDone, p.standbyDone} {
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}
}

// gauge reads the series of name in reg whose labels include want; ok
// is false if there is none.
func gauge(t *testing.T, reg *prometheus.Registry, name string, want ...string) (v float64, ok bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for _, kv := range want {
				k, v, _ := strings.Cut(kv, "=")
				if labels[k] != v {
					continue next
				}
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue(), true
			}
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// TestAbsence_StandbySeesTheLeadersHangingRun: the standby, which never
// led, reports the job overdue within its deadline and one poll after
// the tick whose run hangs on the leader, and someone leading.
func TestAbsence_StandbySeesTheLeadersHangingRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		p := startPair(t, baton.Job{Name: "sync", Schedule: "@every 10s", Deadline: 5 * time.Second, Run: func(ctx context.Context) error {
			<-ctx.Done() // hangs until the drain gives up on it
			return ctx.Err()
		}})
		time.Sleep(time.Until(t0.Add(14500 * time.Millisecond))) // the tick of +10s is 4.5s old
		if v, ok := gauge(t, p.standbyReg, "baton_job_overdue", "job=sync", "election=e"); !ok || v != 0 {
			t.Errorf("standby's baton_job_overdue at +14.5s = %v (present %v), want 0", v, ok)
		}
		if v, ok := gauge(t, p.standbyReg, "baton_job_deadline_seconds", "job=sync"); !ok || v != 5 {
			t.Errorf("standby's baton_job_deadline_seconds = %v (present %v), want 5", v, ok)
		}
		time.Sleep(time.Until(t0.Add(16100 * time.Millisecond))) // deadline and one poll later
		if v, ok := gauge(t, p.standbyReg, "baton_job_overdue", "job=sync"); !ok || v != 1 {
			t.Errorf("standby's baton_job_overdue at +16.1s = %v (present %v), want 1", v, ok)
		}
		if v, ok := gauge(t, p.standbyReg, "baton_election_leaderless_seconds", "election=e"); !ok || v != 0 {
			t.Errorf("standby's baton_election_leaderless_seconds = %v (present %v), want 0: a leads", v, ok)
		}
		if _, ok := gauge(t, p.standbyReg, "baton_job_last_success_timestamp_seconds", "job=sync"); ok {
			t.Error("standby's baton_job_last_success_timestamp_seconds present: no run ended ok")
		}
		if v, ok := gauge(t, p.leaderReg, "baton_job_overdue", "job=sync"); !ok || v != 1 {
			t.Errorf("leader's baton_job_overdue = %v (present %v), want 1", v, ok)
		}
		p.stop(t)
	})
}

// TestAbsence_LeaderlessGrowsOnTheStandby: once the leader stops, the
// standby, which cannot lead, sees nobody lead, and the time since grows.
func TestAbsence_LeaderlessGrowsOnTheStandby(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPair(t, baton.Job{Name: "sync", Schedule: "@every 1m", Run: func(context.Context) error { return nil }})
		time.Sleep(1500 * time.Millisecond)
		if v, ok := gauge(t, p.standbyReg, "baton_election_leaderless_seconds"); !ok || v != 0 {
			t.Errorf("leaderless while a leads = %v (present %v), want 0", v, ok)
		}
		p.stopLeader()
		if err := <-p.leaderDone; err != nil {
			t.Errorf("leader's Run = %v", err)
		}
		time.Sleep(3 * time.Second)
		v1, ok := gauge(t, p.standbyReg, "baton_election_leaderless_seconds")
		if !ok || v1 < 1 || v1 > 3 {
			t.Errorf("leaderless 3s after the leader stopped = %v (present %v), want 1 to 3 s", v1, ok)
		}
		time.Sleep(5 * time.Second)
		if v2, _ := gauge(t, p.standbyReg, "baton_election_leaderless_seconds"); v2-v1 < 4 || v2-v1 > 6 {
			t.Errorf("leaderless went from %v to %v in 5s, want it to grow by about 5", v1, v2)
		}
		p.stopStandby()
		if err := <-p.standbyDone; err != nil {
			t.Errorf("standby's Run = %v", err)
		}
	})
}

// TestNew_NegativeAbsencePollInterval: refused, naming the field and the
// value.
func TestNew_NegativeAbsencePollInterval(t *testing.T) {
	_, err := baton.New(baton.Config{Backend: memory.New(election.Timing{TTL: 5 * time.Second}).Candidate(), Election: "e", Instance: "a",
		Jobs:     []baton.Job{{Name: "j", Schedule: "@every 1m", Run: func(context.Context) error { return nil }}},
		Advanced: baton.Advanced{AbsencePollInterval: -time.Second}})
	if want := "baton: Config.Advanced.AbsencePollInterval -1s: must not be negative"; err == nil || err.Error() != want {
		t.Errorf("New = %v, want %s", err, want)
	}
}

// TestAbsence_FirstLeaderlessPollSaysSo: the first poll that sees nobody
// lead already reports it (above 0): the time since the last poll that
// saw a leader, at most one poll interval more than nobody led.
func TestAbsence_FirstLeaderlessPollSaysSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := func(_ string, adv *baton.Advanced) { adv.AbsencePollInterval = 10 * time.Second }
		p := startPair(t, baton.Job{Name: "sync", Schedule: "@every 1m", Run: func(context.Context) error { return nil }}, slow)
		time.Sleep(10500 * time.Millisecond) // a second poll, which sees a lead
		p.stopLeader()
		if err := <-p.leaderDone; err != nil {
			t.Errorf("leader's Run = %v", err)
		}
		time.Sleep(10 * time.Second) // the first poll since the leader left
		if v, ok := gauge(t, p.standbyReg, "baton_election_leaderless_seconds"); !ok || v <= 0 || v > 10 {
			t.Errorf("leaderless at the first poll without a leader = %v (present %v), want above 0, at most a poll interval", v, ok)
		}
		p.stopStandby()
		if err := <-p.standbyDone; err != nil {
			t.Errorf("standby's Run = %v", err)
		}
	})
}
