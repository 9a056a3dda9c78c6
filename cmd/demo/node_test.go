package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/batonhq/baton/internal/consultest"
	"github.com/batonhq/baton/internal/etcdtest"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/node"
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

func nodeStatus(t *testing.T, url string) node.Status {
	t.Helper()
	resp, err := http.Get(url + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st node.Status
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

// longJobs starts a one-minute run every second, and lets a drain wait a
// minute for it.
const longJobs = `election:
  ttl: 2s
  shutdown_timeout: 1m
jobs:
  - name: long
    schedule: "* * * * * *"
    builtin: sleep
    duration: 1m
`

// TestNode_SecondSignalExitsAtOnce: SIGTERM starts a drain that would wait
// for a long job; a second SIGTERM exits at once with status 2.
func TestNode_SecondSignalExitsAtOnce(t *testing.T) {
	srv := etcdtest.Start(t)
	cfg := writeFile(t, "jobs.yaml", longJobs)
	n := startProc(t, "n1 | ", "node", "--endpoints", srv.Endpoint(), "--election", "second", "--id", "n1", "--config", cfg, "--log-format", "json")
	n.waitFor(0, 30*time.Second, "a long run", func(ev event) bool { return ev.msg == "run started" && ev.job == "long" })
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	n.waitFor(0, 10*time.Second, "the drain", func(ev event) bool { return ev.msg == "draining" })
	select {
	case <-n.exited:
		t.Fatalf("exited on the first SIGTERM while a 1 m job runs (%v)", n.err)
	case <-time.After(300 * time.Millisecond):
	}
	at := time.Now()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitExit(t, n.exited, 5*time.Second, "still running 5 s after the second SIGTERM")
	var ee *exec.ExitError
	if !errors.As(n.err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("exit after the second SIGTERM: %v, want status 2", n.err)
	}
	t.Logf("exited %v after the second SIGTERM", time.Since(at).Round(time.Millisecond))
}

// TestCluster_SecondSignal: a second Ctrl-C makes the cluster exit at once
// with status 2 and kill its nodes.
func TestCluster_SecondSignal(t *testing.T) {
	cfg := writeFile(t, "jobs.yaml", longJobs)
	c := startCluster(t, "--nodes", "2", "--config", cfg, "--log-format", "json")
	c.waitFor(0, 30*time.Second, "a long run", func(ev event) bool { return ev.msg == "run started" && ev.job == "long" })
	pids := []int{c.pidOf("node-1"), c.pidOf("node-2")}
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	c.waitFor(0, 10*time.Second, "the drain", func(ev event) bool { return ev.msg == "draining" })
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	waitExit(t, c.exited, 10*time.Second, "cluster still running 10 s after the second SIGINT")
	var ee *exec.ExitError
	if !errors.As(c.err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("cluster exit: %v, want status 2", c.err)
	}
	waitUntil(t, "the nodes gone", func() bool {
		for _, pid := range pids {
			if alive(pid) {
				return false
			}
		}
		return true
	})
}

// alive reports whether pid runs (a zombie waiting for its reaper does not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err != nil || !strings.Contains(string(b), ") Z ")
}
