package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/batonhq/baton/backends/consul/consultest"
	"github.com/batonhq/baton/backends/etcd/etcdtest"
	"github.com/batonhq/baton/internal/testenv"
)

// TestNode_Backends runs two `demo node` processes on one election of each
// backend: the first leads and runs the jobs, the second reports it as the
// leader in /status, takes over when the first gets SIGTERM, and both exit
// 0.
func TestNode_Backends(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and servers")
	}
	t.Run("etcd", func(t *testing.T) {
		srv := etcdtest.Start(t)
		testTwoNodes(t, "2s", "--backend", "etcd", "--endpoints", srv.Endpoint())
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := testenv.Getenv("BATON_TEST_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
		requireDB(t, "pgx", dsn)
		testTwoNodes(t, "2s", "--backend", "postgres", "--dsn", dsn, "--table", "baton_demo_test")
	})
	t.Run("mysql", func(t *testing.T) {
		dsn := testenv.Getenv("BATON_TEST_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/test?parseTime=true")
		requireDB(t, "mysql", dsn)
		testTwoNodes(t, "2s", "--backend", "mysql", "--dsn", dsn, "--table", "baton_demo_test")
	})
	t.Run("consul", func(t *testing.T) {
		a := consultest.StartT(t)
		testTwoNodes(t, "10s", "--backend", "consul", "--consul-addr", a.HTTPAddr)
	})
}

func requireDB(t *testing.T, driver, dsn string) {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err = db.PingContext(ctx)
		cancel()
		db.Close()
	}
	if err != nil {
		testenv.Unavailable(t, "%s %s: %v", driver, dsn, err)
	}
}

func nodeStatus(t *testing.T, url string) statusDoc {
	t.Helper()
	resp, err := http.Get(url + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st statusDoc
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func testTwoNodes(t *testing.T, ttl string, backend ...string) {
	cfg := writeFile(t, "jobs.yaml", fmt.Sprintf(`election:
  ttl: %s
  poll_interval: 200ms
  shutdown_timeout: 10s
jobs:
  - name: tick
    schedule: "* * * * * *"
    builtin: log
  - name: env
    schedule: "* * * * * *"
    command: echo "$BATON_JOB $BATON_TOKEN"
`, ttl))
	name := fmt.Sprintf("nodetest_%d", time.Now().UnixNano())
	node := func(id string) *cluster {
		args := append([]string{"node"}, backend...)
		args = append(args, "--election", name, "--id", id, "--config", cfg, "--log-format", "json")
		return startProc(t, id+" | ", args...)
	}
	a := node("n1")
	aStarted, _ := a.waitFor(0, 30*time.Second, "n1 started", func(ev event) bool { return ev.msg == "node started" })
	acq, _ := a.waitFor(0, 30*time.Second, "n1 leading", isAcquired)
	a.waitFor(0, 10*time.Second, "a run on n1", func(ev event) bool { return ev.msg == "run ended" && ev.job == "env" && ev.result == "ok" })
	a.waitFor(0, 10*time.Second, "the command's output", func(ev event) bool {
		return ev.msg == "output" && ev.job == "env" && ev.token == acq.token
	})

	b := node("n2")
	bStarted, _ := b.waitFor(0, 30*time.Second, "n2 started", func(ev event) bool { return ev.msg == "node started" })
	st := nodeStatus(t, bStarted.http)
	if st.Leading || st.Leader == nil || st.Leader.Identity.ID != "n1" || st.Leader.Token != acq.token || !st.Healthy {
		t.Errorf("n2 /status: leading %v, leader %+v, healthy %v; want n1 with token %d", st.Leading, st.Leader, st.Healthy, acq.token)
	}
	st = nodeStatus(t, aStarted.http)
	if !st.Leading || st.Term == nil || st.Term.Token != acq.token || len(st.Jobs) != 2 || st.Jobs[0].LastRun == nil {
		t.Errorf("n1 /status: %+v", st)
	}

	mark := b.len()
	termAt := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	next, _ := b.waitFor(mark, 15*time.Second, "n2 leading after SIGTERM of n1", isAcquired)
	if next.token <= acq.token {
		t.Errorf("n2's token %d not above n1's %d", next.token, acq.token)
	}
	t.Logf("n2 leads %v after SIGTERM to n1 (token %d -> %d)", next.time.Sub(termAt).Round(time.Millisecond), acq.token, next.token)
	<-a.exited
	if a.err != nil {
		t.Errorf("n1 exit after SIGTERM: %v, want 0", a.err)
	}
	b.waitFor(mark, 10*time.Second, "a run on n2", func(ev event) bool { return ev.msg == "run ended" && ev.job == "tick" })
	if err := b.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-b.exited
	if b.err != nil {
		t.Errorf("n2 exit after SIGINT: %v, want 0", b.err)
	}
}
