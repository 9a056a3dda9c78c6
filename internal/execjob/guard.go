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
// returns nothing, and the guard kills the run: when the run has a
// cgroup ($D; the guard is outside it), every process in it through
// cgroup.kill (or by pid), then removes it once empty; else twice over
// (forks in flight) every process whose environment holds the run's tag
// ($T, EnvRunTag=TAG), then its process group: a job that traps SIGTERM, and whatever it
// started, in a session of its own or not, do not outlive the process
// that leads. A "q" line (Guard.Release) lets the guard exit without
// killing. The guard ignores the signals a job or a graceful stop sends.
const guardScript = `trap '' HUP INT TERM; read -r x <&3; [ "$x" = q ] && exit 0
if [ -n "$D" ]; then
	for i in $(seq 500); do
		grep -q 'populated 1' "$D/cgroup.events" || break
		echo 1 > "$D/cgroup.kill" 2>/dev/null || kill -KILL $(cat "$D/cgroup.procs") 2>/dev/null
		sleep 0.02
	done
	rmdir "$D"
	exit 0
fi
nl='
'
for pass in 1 2; do
	for d in /proc/[0-9]*; do
		case "$nl$( { tr '\0' '\n' < "$d/environ"; } 2>/dev/null)$nl" in
		*"$nl$T$nl"*) kill -KILL "${d#/proc/}" 2>/dev/null;;
		esac
	done
done
kill -KILL 0`

// Guard is a process that leads a job's process group and kills the
// job's processes if this process dies. It is this process's child, so
// nothing is left to reap when it is released.
type Guard struct {
	cmd *exec.Cmd
	w   *os.File
}

// startGuard starts a guard leading a new process group, outside the
// run's cgroup cg if it has one, that kills the run marked with tag (NAME=TAG)
// when this process dies; start the job in its group (Pgid) afterwards.
func startGuard(cg *cgroup, tag string) (*Guard, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command("/bin/sh", "-c", guardScript)
	cmd.ExtraFiles = []*os.File{r}
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "T=" + tag, "D=" + cg.path()}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("execjob: start a guard: %w", err)
	}
	return &Guard{cmd: cmd, w: w}, nil
}

// Pgid is the guard's process group, the job's.
func (g *Guard) Pgid() int { return g.cmd.Process.Pid }

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
