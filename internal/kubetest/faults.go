package kubetest

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/batonhq/baton/internal/envtest"
)

// The faults the e2e suite injects into the server pair: each acts on the
// real processes and returns once the server answers again.

// KillAPI kills the kube-apiserver (SIGKILL) and starts it again with the
// same flags and port; it returns once /readyz answers.
func (s *Server) KillAPI(ctx context.Context) error {
	exited, err := s.relaunch(syscall.SIGKILL, "apiserver.log", s.apiBin, s.apiArgs, &s.api, &s.apiDone)
	if err != nil {
		return err
	}
	return s.wait(ctx, s.URL+"/readyz", exited, s.pool)
}

// SignalAPI sends sig to the kube-apiserver: SIGSTOP and SIGCONT freeze
// and thaw it.
func (s *Server) SignalAPI(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.api.Process.Signal(sig)
}

// RestartEtcd stops etcd under the API server (SIGTERM: it persists what
// it acknowledged) and starts it again on the same data and ports; it
// returns once etcd and the API server answer.
func (s *Server) RestartEtcd(ctx context.Context) error {
	exited, err := s.relaunch(syscall.SIGTERM, "etcd.log", s.etcdBin, s.etcdArgs, &s.etcd, &s.etcdDone)
	if err != nil {
		return err
	}
	if err := s.wait(ctx, s.etcdURL+"/health", exited, nil); err != nil {
		return fmt.Errorf("kubetest: etcd after restart: %w", err)
	}
	s.mu.Lock()
	apiDone := s.apiDone
	s.mu.Unlock()
	return s.wait(ctx, s.URL+"/readyz", apiDone, s.pool)
}

// relaunch sends sig to one process of the pair (*cmd, which closes *done
// when it exits), waits for it to exit, and starts it again with the same
// binary, flags and log in its place. It returns the new process's done.
func (s *Server) relaunch(sig syscall.Signal, log, bin string, args []string, cmd **exec.Cmd, done *chan struct{}) (chan struct{}, error) {
	s.mu.Lock()
	old, exited := *cmd, *done
	s.mu.Unlock()
	old.Process.Signal(sig)
	<-exited
	c, e, err := launch(filepath.Join(s.Dir, log), bin, args...)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	*cmd, *done = c, e
	s.mu.Unlock()
	return e, nil
}

// StartSecondAPI starts another kube-apiserver on the same etcd, with the
// same certificate and tokens, on a port of its own, and returns its
// host:port once it answers, and its stop (SIGTERM, then wait). Close
// stops it too.
func (s *Server) StartSecondAPI(ctx context.Context) (addr string, stop func(), err error) {
	ports, err := envtest.FreePorts(1)
	if err != nil {
		return "", nil, err
	}
	args := slices.Clone(s.apiArgs)
	i := slices.Index(args, "--secure-port")
	args[i+1] = fmt.Sprint(ports[0])
	cmd, exited, err := launch(filepath.Join(s.Dir, fmt.Sprintf("apiserver-%d.log", ports[0])), s.apiBin, args...)
	if err != nil {
		return "", nil, err
	}
	s.mu.Lock()
	s.second, s.secondDone = append(s.second, cmd), append(s.secondDone, exited)
	s.mu.Unlock()
	addr = fmt.Sprintf("127.0.0.1:%d", ports[0])
	stop = func() { stopProcess(cmd, exited) }
	if err := s.wait(ctx, "https://"+addr+"/readyz", exited, s.pool); err != nil {
		stop()
		return "", nil, fmt.Errorf("kubetest: second kube-apiserver: %w", err)
	}
	return addr, stop, nil
}

func stopProcess(cmd *exec.Cmd, exited chan struct{}) {
	cmd.Process.Signal(syscall.SIGTERM)
	<-exited
}
