// Package consulsrv runs a single Consul server agent for the e2e suite:
// not a dev agent but `consul agent -server -bootstrap-expect=1` with a data
// directory, so that Restart keeps the raft state. A dev agent keeps its
// state in memory and restarts its indexes from scratch, which would break
// the rule that fencing tokens (the lock's ModifyIndex) strictly increase.
package consulsrv

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Server is a running Consul server agent. Its methods are safe for
// concurrent use.
type Server struct {
	// HTTPAddr is the HTTP API address (host:port); it stays the same
	// across Restart.
	HTTPAddr string
	// Dir holds the data directory and the log file.
	Dir string

	bin   string
	ports [4]int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// Start starts a server with its data and log in dir (created if needed)
// on free loopback ports and waits until it has a raft leader and its node
// is registered. The caller must call Close.
func Start(ctx context.Context, bin, dir string) (*Server, error) {
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	var last error
	for range 3 {
		ports, err := freePorts()
		if err != nil {
			return nil, err
		}
		s := &Server{Dir: dir, bin: bin, ports: ports, HTTPAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))}
		if last = s.start(ctx); last == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, last
}

func (s *Server) start(ctx context.Context) error {
	logf, err := os.OpenFile(filepath.Join(s.Dir, "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	p := s.ports
	args := []string{"agent", "-server", "-bootstrap-expect=1", "-data-dir=" + filepath.Join(s.Dir, "data"),
		"-node=baton-e2e", "-bind=127.0.0.1", "-client=127.0.0.1", "-advertise=127.0.0.1",
		"-http-port=" + strconv.Itoa(p[0]), "-serf-lan-port=" + strconv.Itoa(p[1]),
		"-serf-wan-port=" + strconv.Itoa(p[2]), "-server-port=" + strconv.Itoa(p[3]),
		"-dns-port=-1", "-grpc-port=-1", "-grpc-tls-port=-1", "-log-level=warn",
		"-hcl=disable_update_check = true",
		"-hcl=connect { enabled = false }",
		"-hcl=peering { enabled = false }",
		"-hcl=performance { raft_multiplier = 1 }",
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("consulsrv: start %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	go func() { // owned by the Server: stop waits for it
		err := cmd.Wait()
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(exited)
	}()
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := s.waitReady(wctx, exited); err != nil {
		s.stop()
		return fmt.Errorf("consulsrv: agent on %s not ready: %w\n%s", s.HTTPAddr, err, s.LogTail(4096))
	}
	return nil
}

func (s *Server) waitReady(ctx context.Context, exited chan struct{}) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	get := func(path string) (string, error) {
		req, err := http.NewRequestWithContext(ctx, "GET", "http://"+s.HTTPAddr+path, nil)
		if err != nil {
			return "", err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return "", fmt.Errorf("%s: %s", path, resp.Status)
		}
		return strings.TrimSpace(string(b)), err
	}
	var last error
	for {
		select {
		case <-exited:
			return fmt.Errorf("agent exited")
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
		leader, err := get("/v1/status/leader")
		if err != nil || leader == `""` || leader == "" {
			last = fmt.Errorf("no raft leader yet (%v)", err)
			continue
		}
		node, err := get("/v1/health/node/baton-e2e")
		if err != nil || !strings.Contains(node, `"serfHealth"`) || !strings.Contains(node, `"passing"`) {
			last = fmt.Errorf("node not registered and healthy yet (%v)", err)
			continue
		}
		return nil
	}
}

// Restart stops the agent (SIGTERM; SIGKILL after 10 s) and starts it
// again on the same ports and data directory, then waits until it is
// ready. Sessions and keys survive; Consul resets session TTL timers when
// its leader is elected.
func (s *Server) Restart(ctx context.Context) error {
	s.stop()
	var err error
	for range 20 { // the old listeners may take a moment to be released
		if err = s.start(ctx); err == nil {
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return err
}

func (s *Server) stop() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Close stops the agent. It does not remove Dir.
func (s *Server) Close() { s.stop() }

// LogTail returns up to the last n bytes of the agent's output.
func (s *Server) LogTail(n int) string {
	b, err := os.ReadFile(filepath.Join(s.Dir, "agent.log"))
	if err != nil {
		return fmt.Sprintf("(agent log: %v)", err)
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func freePorts() ([4]int, error) {
	var ports [4]int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return ports, err
		}
		lns = append(lns, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}
