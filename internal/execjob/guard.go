package execjob

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// guardScript waits on file descriptor 3, the read end of a pipe whose
// only write end this process holds. When this process dies (SIGKILL, a
// crash, the OOM killer), the kernel closes the write end, the read
// returns nothing, and the guard sends SIGKILL to its process group,
// which is the job's: a job that traps SIGTERM, and whatever it started
// in the background, do not outlive the process that leads. A "q" line
// (Guard.Release) lets the guard exit without killing. The guard ignores
// the signals a job or a graceful stop sends the group.
const guardScript = `trap '' HUP INT TERM; read -r x <&3; [ "$x" = q ] || kill -KILL 0`

// Guard is a process that leads a job's process group and kills the
// group if this process dies. It is this process's child, so nothing is
// left to reap when it is released.
type Guard struct {
	cmd *exec.Cmd
	w   *os.File
}

// StartGuard starts a guard leading a new process group; start the job in
// it (Pgid) afterwards.
func StartGuard() (*Guard, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command("/bin/sh", "-c", guardScript)
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("execjob: start a guard: %w", err)
	}
	return &Guard{cmd: cmd, w: w}, nil
}

// Pgid is the guard's process group, the job's.
func (g *Guard) Pgid() int { return g.cmd.Process.Pid }

// StartGuarded starts cmd in a process group that a new guard leads, so
// that no moment after cmd's start finds it unguarded. If the guard
// cannot start, unguarded is told why and cmd leads a group of its own.
// It returns the guard (nil without one: Release it once cmd has exited)
// and cmd's process group.
func StartGuarded(cmd *exec.Cmd, unguarded func(error)) (*Guard, int, error) {
	g, err := StartGuard()
	if err != nil {
		unguarded(err)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: g.Pgid()}
	}
	if err := cmd.Start(); err != nil {
		g.Release()
		return nil, 0, err
	}
	if afterStart != nil {
		afterStart()
	}
	if g == nil {
		return nil, cmd.Process.Pid, nil
	}
	return g, g.Pgid(), nil
}

// Release tells the guard to exit without killing, and waits for it.
// Call it once, after the job's shell has exited and before the group's
// leftovers are killed. Safe when the group, guard included, was killed,
// and on a nil Guard.
func (g *Guard) Release() {
	if g == nil {
		return
	}
	_, _ = g.w.Write([]byte("q\n"))
	_ = g.w.Close()
	_ = g.cmd.Wait()
}
