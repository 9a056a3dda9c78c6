package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/httpapi"
	"github.com/batonhq/baton/internal/cli"
	"github.com/batonhq/baton/internal/embedetcd"
	"github.com/batonhq/baton/internal/lines"
)

// child is one `demo node` process of the cluster.
type child struct {
	name string
	cmd  *exec.Cmd
	out  *lines.Writer // the node's output, printed line by line after "NAME | "
	done chan struct{} // closed when the process has exited and its output is written
	err  error         // Wait's result, set before done is closed
}

// runCluster runs the cluster until ctx ends, then stops its nodes
// gracefully. When now ends (a second signal), it kills the nodes at once
// and returns its cause.
func runCluster(ctx, now context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	nodes := fs.Int("nodes", 3, "number of node processes")
	config := fs.String("config", "", "jobs file for every node (default: the built-in jobs.example.yaml)")
	basePort := fs.Int("http-base-port", 0, "HTTP port of node-1 (node-N gets base+N-1); 0 picks free ports")
	electionName := fs.String("election", "demo", "election name")
	var lf cli.LogFlags
	lf.Register(fs)
	if err := demo.ParseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *nodes < 1 {
		return fmt.Errorf("--nodes %d: want at least 1", *nodes)
	}
	if _, err := lf.Logger(io.Discard); err != nil {
		return err
	}
	// Check the jobs file before starting anything: the nodes would all
	// fail on it.
	f, err := demo.LoadJobs(*config)
	if err != nil {
		return err
	}
	configPath := ""
	if *config != "" {
		if configPath, err = filepath.Abs(*config); err != nil {
			return err
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("demo cluster: find own binary: %w", err)
	}
	addrs, err := httpAddrs(*nodes, *basePort)
	if err != nil {
		return err
	}

	out := &syncOut{w: stdout}
	say := func(format string, args ...any) { out.line("cluster: " + fmt.Sprintf(format, args...)) }

	dir, err := os.MkdirTemp("", "baton-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := embedetcd.StartDir(filepath.Join(dir, "etcd"))
	if err != nil {
		return fmt.Errorf("demo cluster: %w", err)
	}
	defer srv.Stop()
	ep := srv.Endpoint()
	prefix := cli.EtcdPrefix(*electionName)

	etcdctl := "etcdctl"
	if st, err := os.Stat(filepath.Join(".bin", "etcdctl")); err == nil && !st.IsDir() {
		etcdctl = filepath.Join(".bin", "etcdctl")
	}
	histCmd := fmt.Sprintf("go run ./cmd/demo history --endpoints %s --election %s", ep, *electionName)
	if configPath != "" {
		histCmd += " --config " + configPath
	}
	say("etcd %s (data in %s)", ep, dir)
	say("election %s, jobs from %s, TTL %v", prefix, f.Path, ttlOf(f.Election.TTL))
	say("watch the leader:  %s --endpoints %s elect -l %s", etcdctl, ep, prefix)
	say("list candidates:   %s --endpoints %s get --prefix %s/", etcdctl, ep, prefix)
	if etcdctl == "etcdctl" {
		say("                   (`make tools` builds .bin/etcdctl)")
	}
	say("run history:       %s", histCmd)
	say("kill the leader:   kill -9 <pid>      crash: a follower leads within TTL + 1s")
	say("                   kill -TERM <pid>   graceful: its runs finish, then a follower leads at once")
	say("Ctrl-C stops every node gracefully, then etcd; a second Ctrl-C exits at once")

	var (
		childrenMu sync.Mutex // children grows here while a second signal may kill them
		children   []*child
		wg         sync.WaitGroup
	)
	defer wg.Wait()
	killAll := func(sig syscall.Signal) {
		childrenMu.Lock()
		defer childrenMu.Unlock()
		for _, c := range children {
			select {
			case <-c.done:
			default:
				// Each node leads its own process group (Setpgid), so a
				// Ctrl-C at the terminal reaches only this process, which
				// sends exactly one SIGTERM to each node. SIGKILL goes to
				// the whole group.
				pid := c.cmd.Process.Pid
				if sig == syscall.SIGKILL {
					pid = -pid
				}
				_ = syscall.Kill(pid, sig)
			}
		}
	}
	// A second signal kills every node at once, wherever this function is.
	stopKill := context.AfterFunc(now, func() { killAll(syscall.SIGKILL) })
	defer stopKill()

	for i := range *nodes {
		name := fmt.Sprintf("node-%d", i+1)
		nargs := []string{"node", "--backend", "etcd", "--endpoints", ep, "--election", *electionName, "--id", name,
			"--http", addrs[i], "--log-format", lf.Format, "--log-level", lf.Level, "--stop-on-stdin-eof"}
		if configPath != "" {
			nargs = append(nargs, "--config", configPath)
		}
		c := &child{name: name, out: &lines.Writer{Emit: func(l []byte) { out.line(name + " | " + string(l)) }}, done: make(chan struct{})}
		c.cmd = exec.Command(exe, nargs...)
		c.cmd.Stdout = c.out
		c.cmd.Stderr = c.out
		c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		c.cmd.WaitDelay = 2 * time.Second
		// The node stops gracefully when this pipe closes: when this
		// process exits, however it exits.
		if _, err := c.cmd.StdinPipe(); err != nil {
			return err
		}
		if err := c.cmd.Start(); err != nil {
			killAll(syscall.SIGTERM)
			return fmt.Errorf("demo cluster: start %s: %w", name, err)
		}
		childrenMu.Lock()
		children = append(children, c)
		childrenMu.Unlock()
		if now.Err() != nil {
			killAll(syscall.SIGKILL) // started after the second signal's kill
		}
		say("%s pid %d, status http://%s/status", name, c.cmd.Process.Pid, addrs[i])
		wg.Go(func() {
			c.err = c.cmd.Wait()
			c.out.Flush()
			status := "exit status 0"
			if c.err != nil {
				status = c.err.Error()
			}
			say("%s (pid %d) exited: %s", c.name, c.cmd.Process.Pid, status)
			close(c.done)
		})
	}

	viewCtx, stopView := context.WithCancel(context.Background())
	viewDone := make(chan struct{})
	go func() {
		defer close(viewDone)
		watchLeader(viewCtx, ep, prefix, say)
	}()
	defer func() {
		stopView()
		<-viewDone
	}()

	<-ctx.Done()
	say("stopping: SIGTERM to each node; runs drain, then each releases")
	killAll(syscall.SIGTERM)
	bound := shutdownBound(cli.ShutdownConfigOf(f))
	timer := time.NewTimer(bound)
	defer timer.Stop()
	var failed []error
	for _, c := range children {
		select {
		case <-c.done:
		case <-timer.C:
			say("nodes still running after %v: SIGKILL", bound)
			killAll(syscall.SIGKILL)
			<-c.done
		case <-now.Done():
			return context.Cause(now) // the nodes are being killed; the deferred calls wait for them
		}
	}
	for _, c := range children {
		var ee *exec.ExitError
		if errors.As(c.err, &ee) && !ee.Exited() {
			continue // killed by a signal before or during the stop, already reported
		}
		if c.err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", c.name, c.err))
		}
	}
	stopView()
	<-viewDone
	srv.Stop()
	say("all nodes stopped; etcd stopped")
	if len(failed) > 0 {
		return fmt.Errorf("demo cluster: %w", errors.Join(failed...))
	}
	return nil
}

func ttlOf(d time.Duration) time.Duration {
	if d == 0 {
		return etcd.DefaultTTL
	}
	return d
}

// shutdownBound is how long the cluster waits for its nodes to stop
// gracefully before it kills them: a node's shutdown budget, and time for
// the process to start and end around it.
func shutdownBound(c httpapi.ShutdownConfig) time.Duration {
	return httpapi.ShutdownBudget(c) + 5*time.Second
}

// httpAddrs returns n loopback addresses: base, base+1, ... or free ports.
func httpAddrs(n, base int) ([]string, error) {
	addrs := make([]string, n)
	if base > 0 {
		for i := range addrs {
			addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(base+i))
		}
		return addrs, nil
	}
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("demo cluster: pick a port: %w", err)
		}
		lns = append(lns, ln)
		addrs[i] = ln.Addr().String()
	}
	return addrs, nil
}

// watchLeader prints a line whenever the leader (the key with the lowest
// create revision under prefix) changes, polling every 100 ms until ctx
// ends.
func watchLeader(ctx context.Context, endpoint, prefix string, say func(string, ...any)) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		say("cannot watch the leader: %v", err)
		return
	}
	defer cli.Close()
	be, err := etcd.New(etcd.Config{Client: cli, Prefix: prefix})
	if err != nil {
		say("cannot watch the leader: %v", err)
		return
	}
	last := ""
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		li, err := be.Leader(lctx)
		cancel()
		cur := ""
		switch {
		case err == nil:
			cur = fmt.Sprintf("leader %s (pid %d) token %d", li.Identity.ID, li.Identity.PID, li.Token)
		case errors.Is(err, election.ErrNoLeader):
			cur = "no leader"
		}
		if cur != "" && cur != last {
			say("%s", cur)
			last = cur
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// syncOut writes whole lines to w, one at a time.
type syncOut struct {
	mu sync.Mutex
	w  io.Writer
}

func (o *syncOut) line(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	io.WriteString(o.w, s+"\n")
}
