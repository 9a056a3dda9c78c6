package redis_test

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/backends/redis"
	"github.com/batonhq/baton/backendtest"
	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/internal/certtest"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/ledger"
)

// setUser runs ACL SETUSER name on >pw rules on the server at addr as
// the default user.
func setUser(t *testing.T, addr, name, pw, rules string) {
	t.Helper()
	cli := goredis.NewClient(&goredis.Options{Addr: addr, DisableIdentity: true})
	defer cli.Close()
	args := []any{"ACL", "SETUSER", name, "reset", "on", ">" + pw}
	for _, r := range strings.Fields(rules) {
		args = append(args, r)
	}
	if err := cli.Do(ctxT(t, 5*time.Second), args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER %s: %v", name, err)
	}
}

// exercise runs a whole term with b: Check, Acquire, Leader, a claim, a
// finish, History, LastClaimed, Release; and a second candidate waiting
// on the channel.
func exercise(t *testing.T, b, b2 *redis.Backend) {
	t.Helper()
	if err := b.Check(ctxT(t, 5*time.Second)); err != nil {
		t.Fatalf("Check: %v", err)
	}
	l := backendtest.Acquire(t, b, "a", acquireWithin)
	if info, err := b.Leader(ctxT(t, 5*time.Second)); err != nil || info.Token != l.Token() || info.Identity.ID != "a" {
		t.Errorf("Leader = %+v, %v; want a with token %d", info, err, l.Token())
	}
	tick := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	led := b.Ledger()
	if err := led.Claim(ctxT(t, 5*time.Second), []ledger.Claim{{Job: "j", Tick: tick, Token: l.Token(), Instance: "a", Started: tick}})[0]; err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if err := led.Finish(ctxT(t, 5*time.Second), []ledger.Run{{Job: "j", Tick: tick, Token: l.Token(), Result: ledger.ResultOK}})[0]; err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if runs, err := led.History(ctxT(t, 5*time.Second), "j", 5); err != nil || len(runs) != 1 || runs[0].Result != ledger.ResultOK {
		t.Errorf("History = %+v, %v", runs, err)
	}
	if last, err := led.LastClaimed(ctxT(t, 5*time.Second), []string{"j"}); err != nil || !last[0].Equal(tick) {
		t.Errorf("LastClaimed = %v, %v", last, err)
	}
	cs := b.Control()
	v, err := cs.Put(ctxT(t, 5*time.Second), control.Put{Key: "run/r", Value: []byte("x"), Token: l.Token()})
	if err != nil {
		t.Fatalf("Control Put: %v", err)
	}
	if es, err := cs.List(ctxT(t, 5*time.Second), "run/"); err != nil || len(es) != 1 {
		t.Errorf("Control List = %v, %v", es, err)
	}
	if err := cs.Delete(ctxT(t, 5*time.Second), "run/r", v); err != nil {
		t.Errorf("Control Delete: %v", err)
	}
	got := make(chan election.Lease, 1)
	go func() {
		l2, err := b2.Acquire(ctxT(t, acquireWithin), election.Identity{ID: "b"})
		if err != nil {
			t.Errorf("b: Acquire: %v", err)
		}
		got <- l2
	}()
	time.Sleep(200 * time.Millisecond) // b waits on the channel
	released := time.Now()
	backendtest.Release(t, l)
	l2 := <-got
	if l2 == nil {
		t.FailNow()
	}
	if took := time.Since(released); took > time.Second {
		t.Errorf("b led %v after the release: the pub/sub wake-up did not arrive", took)
	}
	backendtest.Release(t, l2)
}

// The ACL line of doc.go is enough, and nothing less: a user with exactly
// those rules runs a whole term; without one command, Check names it and
// prints the rules needed; a wrong password gives a clear error.
func TestSecurity_LeastPrivilegeACL(t *testing.T) {
	s := redistest.Start(t)
	e := "secure"
	setUser(t, s.Addr(), "baton", "s3cret", redis.ACLRules(e))
	cfg := redis.Config{Addr: s.Addr(), Username: "baton", Password: "s3cret", Election: e, Timing: election.Timing{TTL: 2 * time.Second}}
	b, b2 := newBackend(t, cfg), newBackend(t, cfg)
	exercise(t, b, b2)

	// Another election's keys are out of reach.
	other := cfg
	other.Election = "other"
	err := newBackend(t, other).Check(ctxT(t, 5*time.Second))
	if err == nil || !strings.Contains(err.Error(), "NOPERM") || !strings.Contains(err.Error(), "ACL SETUSER NAME on >PASSWORD") {
		t.Errorf("Check of another election: %v, want NOPERM with the rules needed", err)
	}

	// One command less: Check finds it.
	for _, cmd := range []string{"zrangebylex", "hdel"} {
		setUser(t, s.Addr(), "short-"+cmd, "pw", strings.Replace(redis.ACLRules(e), " +"+cmd, "", 1))
		short := cfg
		short.Username, short.Password = "short-"+cmd, "pw"
		err = newBackend(t, short).Check(ctxT(t, 5*time.Second))
		if want := "(" + strings.ToUpper(cmd) + " on baton:{secure}:check)"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check without +%s: %v, want NOPERM naming it", cmd, err)
		}
	}
	setUser(t, s.Addr(), "short", "pw", strings.Replace(redis.ACLRules(e), " +lset", "", 1))
	short := cfg
	short.Username, short.Password = "short", "pw"
	err = newBackend(t, short).Check(ctxT(t, 5*time.Second))
	if err == nil || !strings.Contains(err.Error(), "(LSET on baton:{secure}:check)") || !strings.Contains(err.Error(), `user "short" lacks a permission`) {
		t.Errorf("Check without +lset: %v, want NOPERM naming lset", err)
	} else {
		t.Logf("without +lset: %v", err)
	}

	// A wrong password.
	bad := cfg
	bad.Password = "wrong"
	err = newBackend(t, bad).Check(ctxT(t, 5*time.Second))
	if err == nil || !strings.Contains(err.Error(), "WRONGPASS") || !strings.Contains(err.Error(), `wrong Username or Password for user "baton" at `+s.Addr()) {
		t.Errorf("Check with a wrong password: %v", err)
	} else {
		t.Logf("wrong password: %v", err)
	}
}

// Check fails fast, naming the address, when nothing listens there.
func TestCheck_Unreachable(t *testing.T) {
	s := redistest.Start(t)
	addr := s.Addr()
	s.Stop()
	b := newBackend(t, redis.Config{Addr: addr, Election: "x"})
	start := time.Now()
	err := b.Check(ctxT(t, 10*time.Second))
	if err == nil || !strings.Contains(err.Error(), "cannot connect to "+addr) {
		t.Fatalf("Check: %v, want cannot connect to %s", err, addr)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Check took %v", took)
	}
	t.Logf("unreachable: %v", err)
}

// With TLS: the server listens with TLS only; a client trusting its CA
// runs a whole term, one that does not gets a TLS error from Check.
func TestSecurity_TLS(t *testing.T) {
	if !redistest.SupportsTLS() {
		t.Skip("the redis-server in PATH was built without TLS")
	}
	certs := certtest.New(t, "redis", "baton")
	s := redistest.StartWith(t, redistest.Options{TLS: &redistest.TLSFiles{
		CertFile: certs.Server.CertFile, KeyFile: certs.Server.KeyFile, CAFile: certs.CA.CertFile}})
	cfg := redis.Config{Addr: s.Addr(), Election: "tls", Timing: election.Timing{TTL: 2 * time.Second},
		TLS: &tls.Config{RootCAs: certs.CA.Pool(), MinVersion: tls.VersionTLS12}}
	exercise(t, newBackend(t, cfg), newBackend(t, cfg))

	untrusted := cfg
	untrusted.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	err := newBackend(t, untrusted).Check(ctxT(t, 5*time.Second))
	if err == nil || !strings.Contains(err.Error(), "TLS handshake failed") || !strings.Contains(err.Error(), "x509") {
		t.Errorf("Check without the CA: %v, want a TLS handshake error", err)
	} else {
		t.Logf("untrusted: %v", err)
	}
	plain := cfg
	plain.TLS = nil
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := newBackend(t, plain).Check(ctx); err == nil {
		t.Errorf("Check without TLS against a TLS-only server: nil error")
	}
}
