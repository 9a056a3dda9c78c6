package consultest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/batonhq/baton/internal/envtest"
)

// errExited marks a start that failed because the process exited before
// it was ready (a port taken since it was picked, most often): trying
// again on other ports may help.
var errExited = errors.New("agent exited")

// start runs the agent's process and waits until it is ready. On error
// the process is stopped.
func (a *Agent) start(ctx context.Context) error {
	logf, err := os.OpenFile(a.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(a.Binary, a.args...)
	cmd.Dir = a.Dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // no terminal signals
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("consultest: start %s: %w", a.Binary, err)
	}
	exited := make(chan struct{})
	a.mu.Lock()
	a.cmd, a.exited, a.err = cmd, exited, nil
	a.mu.Unlock()
	go func() { // owned by the Agent: stop waits for it
		err := cmd.Wait()
		a.mu.Lock()
		a.err = err
		a.mu.Unlock()
		close(exited)
	}()
	wctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	if err := a.waitReady(wctx, exited); err != nil {
		log := a.LogTail(4096)
		a.stop()
		return fmt.Errorf("consultest: agent %s on %s not ready: %w\n%s", a.NodeName, a.HTTPAddr, err, log)
	}
	return nil
}

// waitReady polls the agent until it knows a raft leader and the catalog
// holds its node: with a passing serfHealth check, unless it is a dev
// agent.
func (a *Agent) waitReady(ctx context.Context, exited <-chan struct{}) error {
	var last error
	for {
		select {
		case <-exited:
			a.mu.Lock()
			err := a.err
			a.mu.Unlock()
			return fmt.Errorf("%w: %v", errExited, err)
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
		if last = a.ready(ctx); last == nil {
			return nil
		}
	}
}

// ready reports why the agent is not ready yet, or nil.
func (a *Agent) ready(ctx context.Context) error {
	var leader string
	if err := a.getJSON(ctx, "/v1/status/leader", &leader); err != nil || leader == "" {
		return fmt.Errorf("no raft leader yet (%v)", err)
	}
	if a.dev {
		var node *struct{ Node *struct{ Node string } }
		if err := a.getJSON(ctx, "/v1/catalog/node/"+url.PathEscape(a.NodeName), &node); err != nil || node == nil || node.Node == nil {
			return fmt.Errorf("node not registered yet (%v)", err)
		}
		return nil
	}
	// After a Kill and Restart the catalog still holds the node, with a
	// critical serfHealth check until the leader sees the new process.
	var checks []struct{ CheckID, Status string }
	if err := a.getJSON(ctx, "/v1/health/node/"+url.PathEscape(a.NodeName), &checks); err != nil {
		return fmt.Errorf("node health: %v", err)
	}
	for _, c := range checks {
		if c.CheckID == "serfHealth" {
			if c.Status != "passing" {
				return fmt.Errorf("node's serfHealth check is %s", c.Status)
			}
			return nil
		}
	}
	return errors.New("node not registered yet")
}

// running reports whether the agent's process has been started and has
// not exited.
func (a *Agent) running() bool {
	a.mu.Lock()
	exited := a.exited
	a.mu.Unlock()
	if exited == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM to the current process, then SIGKILL after
// stopGrace, and waits for it to exit. It returns at once if the process
// has already exited.
func (a *Agent) stop() {
	a.mu.Lock()
	cmd, exited := a.cmd, a.exited
	a.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	envtest.Terminate(cmd.Process, exited, stopGrace)
}
