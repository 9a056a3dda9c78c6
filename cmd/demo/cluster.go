package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
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
	"github.com/batonhq/baton/internal/jobsfile"
)

// runCluster runs the cluster until ctx ends, then stops its nodes
// gracefully. When now ends (a second signal), it kills the nodes at once
// and returns its cause.
//
// Its phases: the flags and the jobs file checked (parseCluster); etcd
// started and the commands to watch it printed (printHints); the nodes
// started (nodeSet.start); the leader watched until ctx ends; the nodes
// stopped (nodeSet.wait), then etcd.
func runCluster(ctx, now context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseCluster(args, stderr)
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
	prefix := cli.EtcdPrefix(o.election)
	o.printHints(say, ep, prefix, dir)

	ns := &nodeSet{say: say}
	defer ns.wg.Wait()
	// A second signal kills every node at once, wherever this function is.
	stopKill := context.AfterFunc(now, func() { ns.killAll(syscall.SIGKILL) })
	defer stopKill()
	for i := range o.nodes {
		if err := ns.start(now, o, i, ep, out); err != nil {
			return err
		}
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
	ns.killAll(syscall.SIGTERM)
	failed, err := ns.wait(now, shutdownBound(cli.ShutdownConfigOf(o.jobs)))
	if err != nil {
		return err // the nodes are being killed; the deferred calls wait for them
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

// clusterOpts is what demo cluster's flags ask for, checked.
type clusterOpts struct {
	nodes      int
	configPath string // the jobs file's absolute path; "" for the built-in one
	election   string
	lf         cli.LogFlags
	jobs       *jobsfile.File
	exe        string   // this binary, which each node runs
	addrs      []string // each node's HTTP address
}

// parseCluster parses and checks demo cluster's flags, and loads the
// jobs file, picking the nodes' HTTP addresses. It starts nothing.
func parseCluster(args []string, stderr io.Writer) (*clusterOpts, error) {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	nodes := fs.Int("nodes", 3, "number of node processes")
	config := fs.String("config", "", "jobs file for every node (default: the built-in jobs.example.yaml)")
	basePort := fs.Int("http-base-port", 0, "HTTP port of node-1 (node-N gets base+N-1); 0 picks free ports")
	electionName := fs.String("election", "demo", "election name")
	o := &clusterOpts{}
	o.lf.Register(fs)
	if err := demo.ParseFlags(fs, args, stderr); err != nil {
		return nil, err
	}
	if *nodes < 1 {
		return nil, fmt.Errorf("--nodes %d: want at least 1", *nodes)
	}
	o.nodes, o.election = *nodes, *electionName
	if _, err := o.lf.Logger(io.Discard); err != nil {
		return nil, err
	}
	// Check the jobs file before starting anything: the nodes would all
	// fail on it.
	var err error
	if o.jobs, err = demo.LoadJobs(*config); err != nil {
		return nil, err
	}
	if *config != "" {
		if o.configPath, err = filepath.Abs(*config); err != nil {
			return nil, err
		}
	}
	if o.exe, err = os.Executable(); err != nil {
		return nil, fmt.Errorf("demo cluster: find own binary: %w", err)
	}
	if o.addrs, err = httpAddrs(*nodes, *basePort); err != nil {
		return nil, err
	}
	return o, nil
}

// printHints says where etcd is and the commands to watch the cluster.
func (o *clusterOpts) printHints(say func(string, ...any), ep, prefix, dir string) {
	etcdctl := "etcdctl"
	if st, err := os.Stat(filepath.Join(".bin", "etcdctl")); err == nil && !st.IsDir() {
		etcdctl = filepath.Join(".bin", "etcdctl")
	}
	histCmd := fmt.Sprintf("go run ./cmd/demo history --endpoints %s --election %s", ep, o.election)
	if o.configPath != "" {
		histCmd += " --config " + o.configPath
	}
	say("etcd %s (data in %s)", ep, dir)
	say("election %s, jobs from %s, TTL %v", prefix, o.jobs.Path, ttlOf(o.jobs.Election.TTL))
	say("watch the leader:  %s --endpoints %s elect -l %s", etcdctl, ep, prefix)
	say("list candidates:   %s --endpoints %s get --prefix %s/", etcdctl, ep, prefix)
	if etcdctl == "etcdctl" {
		say("                   (`make tools` builds .bin/etcdctl)")
	}
	say("run history:       %s", histCmd)
	say("kill the leader:   kill -9 <pid>      crash: a follower leads within TTL + 1s")
	say("                   kill -TERM <pid>   graceful: its runs finish, then a follower leads at once")
	say("Ctrl-C stops every node gracefully, then etcd; a second Ctrl-C exits at once")
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
