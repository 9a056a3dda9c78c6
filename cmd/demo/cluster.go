package main

import (
	"bytes"
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

	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/backends/etcd/etcdtest"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/schedulerhost"
)

// child is one `demo node` process of the cluster.
type child struct {
	name string
	cmd  *exec.Cmd
	out  *prefixWriter
	done chan struct{} // closed when the process has exited and its output is written
	err  error         // Wait's result, set before done is closed
}

func runCluster(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	nodes := fs.Int("nodes", 3, "number of node processes")
	config := fs.String("config", "", "jobs file for every node (default: the built-in jobs.example.yaml)")
	basePort := fs.Int("http-base-port", 0, "HTTP port of node-1 (node-N gets base+N-1); 0 picks free ports")
	electionName := fs.String("election", "demo", "election name")
	var lf logFlags
	lf.register(fs)
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *nodes < 1 {
		return fmt.Errorf("--nodes %d: want at least 1", *nodes)
	}
	if _, err := lf.logger(io.Discard); err != nil {
		return err
	}
	// Check the jobs file before starting anything: the nodes would all
	// fail on it.
	f, err := loadJobs(*config)
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
	srv, err := etcdtest.StartDir(filepath.Join(dir, "etcd"))
	if err != nil {
		return fmt.Errorf("demo cluster: %w", err)
	}
	defer srv.Stop()
	ep := srv.Endpoint()
	prefix := etcdPrefix(*electionName)

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

	var children []*child
	var wg sync.WaitGroup
	defer wg.Wait()
	killAll := func(sig syscall.Signal) {
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
	removeHook := onExitNow(func() {
		killAll(syscall.SIGKILL)
		os.RemoveAll(dir)
	})
	defer removeHook()

	for i := range *nodes {
		name := fmt.Sprintf("node-%d", i+1)
		nargs := []string{"node", "--backend", "etcd", "--endpoints", ep, "--election", *electionName, "--id", name,
			"--http", addrs[i], "--log-format", lf.format, "--log-level", lf.level, "--stop-on-stdin-eof"}
		if configPath != "" {
			nargs = append(nargs, "--config", configPath)
		}
		c := &child{name: name, out: &prefixWriter{out: out, prefix: name + " | "}, done: make(chan struct{})}
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
		children = append(children, c)
		say("%s pid %d, status http://%s/status", name, c.cmd.Process.Pid, addrs[i])
		wg.Go(func() {
			c.err = c.cmd.Wait()
			c.out.flush()
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
	bound := shutdownBound(f.Election.ShutdownTimeout, killGrace(f), f.Election.ReleaseTimeout)
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

// shutdownBound is how long the cluster waits for its nodes to drain and
// release before it kills them.
func shutdownBound(shutdown, grace, release time.Duration) time.Duration {
	if shutdown == 0 {
		shutdown = schedulerhost.DefaultShutdownTimeout
	}
	if release == 0 {
		release = election.DefaultReleaseTimeout
	}
	return shutdown + grace + killGraceMargin + release + 10*time.Second
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
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second, Logger: nopZap()})
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

// prefixWriter writes each line written to it to out, after prefix.
type prefixWriter struct {
	out    *syncOut
	prefix string

	mu  sync.Mutex
	buf []byte
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.out.line(w.prefix + string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

func (w *prefixWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.out.line(w.prefix + string(w.buf))
		w.buf = nil
	}
}
