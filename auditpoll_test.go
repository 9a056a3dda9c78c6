package baton_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/httpapi"
)

// ticks reads baton_ticks of job in reg, by "class/reason".
func ticks(t *testing.T, p *pair, standby bool, job string) map[string]float64 {
	t.Helper()
	reg := p.leaderReg
	if standby {
		reg = p.standbyReg
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "baton_ticks" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["job"] == job {
				out[l["class"]+"/"+l["reason"]] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// nonZero is the series of ts that are not 0.
func nonZero(ts map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range ts {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

func auditEvery(d time.Duration) func(string, *baton.Advanced) {
	return func(_ string, adv *baton.Advanced) { adv.AuditPollInterval = d }
}

// TestAuditPoll_TicksOnTheStandby: the standby, which never leads,
// reports the leader's ticks that ran ok, and once the leader is gone
// the ticks nobody ran as missed for no-leader, those within the write
// lag as pending; every job has a series for each class and reason.
func TestAuditPoll_TicksOnTheStandby(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		p := startPair(t, baton.Job{Name: "sync", Schedule: "@every 10s offset 5s", Run: func(context.Context) error { return nil }},
			auditEvery(10*time.Second))
		time.Sleep(time.Until(t0.Add(42 * time.Second))) // polled at +40s: ticks +5s to +35s ran ok
		for _, standby := range []bool{false, true} {
			ts := ticks(t, p, standby, "sync")
			if got := nonZero(ts); len(got) != 1 || got["ran/ok"] != 4 || len(ts) != 21 {
				t.Errorf("standby %v at +42s: %d series, not 0: %v; want 21, ran/ok 4", standby, len(ts), got)
			}
		}
		p.stopLeader()
		if err := <-p.leaderDone; err != nil {
			t.Errorf("leader's Run = %v", err)
		}
		time.Sleep(time.Until(t0.Add(142 * time.Second))) // polled at +140s: +45s to +115s missed, +125s and +135s in the lag
		want := map[string]float64{"ran/ok": 4, "missed/no-leader": 8, "pending/not-written": 2}
		if got := nonZero(ticks(t, p, true, "sync")); len(got) != len(want) || got["ran/ok"] != 4 || got["missed/no-leader"] != 8 || got["pending/not-written"] != 2 {
			t.Errorf("standby at +142s, nobody leading since +42s: %v, want %v", got, want)
		}
		if v, ok := gauge(t, p.standbyReg, "baton_audit_poll_errors_total"); !ok || v != 0 {
			t.Errorf("baton_audit_poll_errors_total = %v (present %v), want 0", v, ok)
		}
		p.stopStandby()
		if err := <-p.standbyDone; err != nil {
			t.Errorf("standby's Run = %v", err)
		}
	})
}

// TestAuditPoll_Off: a negative AuditPollInterval turns the poll off: no
// baton_ticks; zero polls at once (then every minute).
func TestAuditPoll_Off(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPair(t, baton.Job{Name: "sync", Schedule: "@every 10s", Run: func(context.Context) error { return nil }},
			func(name string, adv *baton.Advanced) {
				if name == "b" {
					adv.AuditPollInterval = -1
				}
			})
		time.Sleep(90 * time.Second)
		if ts := ticks(t, p, true, "sync"); len(ts) != 0 {
			t.Errorf("standby with the poll off: baton_ticks %v, want none", ts)
		}
		if ts := ticks(t, p, false, "sync"); len(ts) != 21 || ts["ran/ok"] < 5 {
			t.Errorf("leader with the default interval: baton_ticks %v, want 21 series, ran/ok at least 5", ts)
		}
		p.stop(t)
	})
}

// flakyControl is a real control store whose reads of the tick Accounts
// fail while fail is set.
type flakyControl struct {
	control.Store
	fail atomic.Bool
}

func (f *flakyControl) List(ctx context.Context, prefix string) ([]control.Entry, error) {
	if f.fail.Load() && strings.HasPrefix(prefix, "audit/") {
		return nil, errors.New("read of audit/ refused")
	}
	return f.Store.List(ctx, prefix)
}

// TestPolls_ReadErrorsOnStatusNotReadyz: while the standby cannot read
// the Accounts, its absence and audit polls fail: GET /status says so,
// with the error and when, the failures are counted, and /readyz stays
// 200; once the reads work again the errors leave /status.
func TestPolls_ReadErrorsOnStatusNotReadyz(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var flaky *flakyControl
		p := startPair(t, baton.Job{Name: "sync", Schedule: "@every 10s", Deadline: time.Hour, Run: func(context.Context) error { return nil }},
			func(name string, adv *baton.Advanced) {
				adv.AuditPollInterval = 5 * time.Second
				if name == "b" {
					flaky = &flakyControl{Store: adv.Control}
					flaky.fail.Store(true)
					adv.Control = flaky
				}
			})
		time.Sleep(12 * time.Second)
		st := status(t, p.standby)
		for poll, pe := range map[string]*httpapi.PollError{"absence": st.AbsencePollErr, "audit": st.AuditPollErr} {
			if pe == nil || !strings.Contains(pe.Error, "read of audit/ refused") || pe.At.IsZero() || time.Since(pe.At) > 5*time.Second {
				t.Errorf("standby's /status %s_poll_error = %+v, want the read's error, within a round", poll, pe)
			}
		}
		rec0 := httptest.NewRecorder()
		p.standby.Handler().ServeHTTP(rec0, httptest.NewRequest(http.MethodGet, "/status", nil))
		for _, field := range []string{`"absence_poll_error": {`, `"audit_poll_error": {`} {
			if !strings.Contains(rec0.Body.String(), field) {
				t.Errorf("standby's /status has no %s:\n%s", field, rec0.Body)
			}
		}
		if !st.Ready {
			t.Error("/status: not ready, want ready: a failed poll read is the backend's state")
		}
		rec := httptest.NewRecorder()
		p.standby.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		if rec.Code != http.StatusOK {
			t.Errorf("standby's /readyz = %d %s, want 200", rec.Code, rec.Body)
		}
		for _, name := range []string{"baton_audit_poll_errors_total", "baton_absence_poll_errors_total"} {
			if v, _ := gauge(t, p.standbyReg, name); v < 2 {
				t.Errorf("standby's %s = %v, want at least 2", name, v)
			}
		}
		if st := status(t, p.leader); st.AbsencePollErr != nil || st.AuditPollErr != nil {
			t.Errorf("leader's /status poll errors %+v, %+v, want none", st.AbsencePollErr, st.AuditPollErr)
		}
		flaky.fail.Store(false)
		time.Sleep(6 * time.Second)
		if st := status(t, p.standby); st.AbsencePollErr != nil || st.AuditPollErr != nil {
			t.Errorf("standby's /status poll errors after the reads work again: %+v, %+v, want none", st.AbsencePollErr, st.AuditPollErr)
		}
		p.stop(t)
	})
}

// status is b's GET /status.
func status(t *testing.T, b *baton.Baton) httpapi.Status {
	t.Helper()
	rec := httptest.NewRecorder()
	b.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status", nil))
	var st httpapi.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatalf("/status %d: %v: %s", rec.Code, err, rec.Body)
	}
	return st
}
