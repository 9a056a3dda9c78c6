package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"

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

// nodeSet is the cluster's node processes. The zero value with say set
// is ready; the owner waits for wg before it returns.
type nodeSet struct {
	say func(string, ...any)
	wg  sync.WaitGroup // one per started node: its Wait and exit line

	mu       sync.Mutex // children grows here while a second signal may kill them
	children []*child
}

// killAll sends sig to every node not exited yet: SIGTERM to the node,
// SIGKILL to its whole process group. It does not wait.
func (ns *nodeSet) killAll(sig syscall.Signal) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	for _, c := range ns.children {
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

// start starts node i of o, a `demo node` process on etcd at ep whose
// output goes to out, and a goroutine (in wg) that waits for it and says
// when it exited. A node started after now ended is killed at once.
// When it fails to start, the nodes already started get SIGTERM.
func (ns *nodeSet) start(now context.Context, o *clusterOpts, i int, ep string, out *syncOut) error {
	name := fmt.Sprintf("node-%d", i+1)
	nargs := []string{"node", "--backend", "etcd", "--endpoints", ep, "--election", o.election, "--id", name,
		"--http", o.addrs[i], "--log-format", o.lf.Format, "--log-level", o.lf.Level, "--stop-on-stdin-eof"}
	if o.configPath != "" {
		nargs = append(nargs, "--config", o.configPath)
	}
	c := &child{name: name, out: &lines.Writer{Emit: func(l []byte) { out.line(name + " | " + string(l)) }}, done: make(chan struct{})}
	c.cmd = exec.Command(o.exe, nargs...)
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
		ns.killAll(syscall.SIGTERM)
		return fmt.Errorf("demo cluster: start %s: %w", name, err)
	}
	ns.mu.Lock()
	ns.children = append(ns.children, c)
	ns.mu.Unlock()
	if now.Err() != nil {
		ns.killAll(syscall.SIGKILL) // started after the second signal's kill
	}
	ns.say("%s pid %d, status http://%s/status", name, c.cmd.Process.Pid, o.addrs[i])
	ns.wg.Go(func() {
		c.err = c.cmd.Wait()
		c.out.Flush()
		status := "exit status 0"
		if c.err != nil {
			status = c.err.Error()
		}
		ns.say("%s (pid %d) exited: %s", c.name, c.cmd.Process.Pid, status)
		close(c.done)
	})
	return nil
}

// wait blocks until every node has exited, killing them all with
// SIGKILL if some still run after bound, and returns the errors of those
// that failed (not those a signal killed: they were reported). When now
// ends first it returns now's cause at once: the nodes are being killed.
func (ns *nodeSet) wait(now context.Context, bound time.Duration) (failed []error, err error) {
	timer := time.NewTimer(bound)
	defer timer.Stop()
	for _, c := range ns.children {
		select {
		case <-c.done:
		case <-timer.C:
			ns.say("nodes still running after %v: SIGKILL", bound)
			ns.killAll(syscall.SIGKILL)
			<-c.done
		case <-now.Done():
			return nil, context.Cause(now)
		}
	}
	for _, c := range ns.children {
		var ee *exec.ExitError
		if errors.As(c.err, &ee) && !ee.Exited() {
			continue // killed by a signal before or during the stop, already reported
		}
		if c.err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", c.name, c.err))
		}
	}
	return failed, nil
}
