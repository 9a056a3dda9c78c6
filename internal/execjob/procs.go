package execjob

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// EnvRunTag marks every process of one run: the command's shell gets it,
// and whatever the shell starts inherits it, in a session of its own or
// not. Without a cgroup (see Procs), it is how the processes that left the
// run's process group are found. A process that clears its environment
// (env -i) is not found by it.
const EnvRunTag = "BATON_RUN_TAG"

// EnvCgroups set to "off" makes runs use the fallback (the process
// group, the run's tag, and a subreaper where AllowSubreaper allowed
// one) even where a cgroup could be made for them.
const EnvCgroups = "BATON_CGROUPS"

// killWait bounds how long Kill waits for the run's processes to be gone
// after SIGKILL (a process in uninterruptible sleep dies when it wakes).
const killWait = 10 * time.Second

// Procs is every process of one run: the command, and all it starts,
// whether it stays in the run's process group or not.
//
// On Linux, where cgroup v2 is mounted and this process may create a
// cgroup below its own (root, or a unit with Delegate=yes), each run gets
// a cgroup of its own, the command is started in it (clone3 with
// CLONE_INTO_CGROUP, so that nothing it forks is ever outside), a kill
// writes cgroup.kill (or SIGKILLs each pid of cgroup.procs on kernels
// before 5.14) and waits until cgroup.events says "populated 0".
//
// Elsewhere (cgroups read-only, as in a hardened pod, or BATON_CGROUPS=off)
// the fallback finds the run's processes in /proc: those in its process
// group, those whose environment holds the run's tag (EnvRunTag), and
// every descendant of either; and, in a process that AllowSubreaper made
// a subreaper, its own children that no os/exec Cmd started once no other
// run is in flight (orphans reparented to it). It SIGKILLs them through
// pidfds (no pid reused in between is hit) until a pass finds none.
type Procs struct {
	tag   string
	pgid  int
	guard *Guard
	cg    *cgroup // nil: the fallback
	execd []int   // pids os/exec waits for (the command, the guard)

	closeOnce sync.Once
	left      int
}

var (
	// startMu is held while a process is started and its pid registered,
	// and by the reaper while it decides which zombies are its to reap.
	startMu sync.Mutex
	// execPids are the pids of processes os/exec started here and will
	// wait for: the reaper never reaps them.
	execPids = map[int]int{}
	// active are the runs whose processes may be alive.
	active = map[*Procs]struct{}{}
	runSeq atomic.Uint64
)

// StartRun starts cmd as a run's processes, guarded (Guard): in a cgroup
// of the run's where the machine allows, else in a process group that
// the guard leads. It adds EnvRunTag to cmd.Env (nil: os.Environ()). If
// the guard cannot start, unguarded is told why and cmd leads a group of
// its own. Call Close once cmd has exited.
func StartRun(cmd *exec.Cmd, unguarded func(error)) (*Procs, error) {
	p := &Procs{tag: fmt.Sprintf("%d.%d.", os.Getpid(), runSeq.Add(1))}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env[:len(cmd.Env):len(cmd.Env)], EnvRunTag+"="+p.tag)
	if p.cg = newRunCgroup(p.tag); p.cg == nil {
		becomeSubreaper()
	}
	startMu.Lock()
	defer startMu.Unlock()
	g, err := startGuard(p.cg, EnvRunTag+"="+p.tag)
	attr := &syscall.SysProcAttr{Setpgid: true}
	if err != nil {
		unguarded(err)
	} else {
		attr.Pgid = g.Pgid()
		p.guard = g
		p.execd = append(p.execd, g.Pgid())
	}
	p.cg.into(attr)
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		p.guard.Release()
		p.cg.remove()
		return nil, err
	}
	p.execd = append(p.execd, cmd.Process.Pid)
	for _, pid := range p.execd {
		execPids[pid]++
	}
	active[p] = struct{}{}
	if afterStart != nil {
		afterStart()
	}
	p.pgid = cmd.Process.Pid
	if p.guard != nil {
		p.pgid = p.guard.Pgid()
	}
	return p, nil
}

// Pgid is the run's process group (the guard's, the command's).
func (p *Procs) Pgid() int { return p.pgid }

// Where says how the run's processes are tracked: its cgroup's path, or
// the fallback.
func (p *Procs) Where() string {
	if p.cg != nil {
		return "cgroup " + p.cg.dir
	}
	return "process group " + strconv.Itoa(p.pgid) + " and tag " + p.tag
}

// Signal sends sig to every process of the run (the guard ignores the
// ones a stop sends).
func (p *Procs) Signal(sig syscall.Signal) {
	if p.cg == nil {
		_ = syscall.Kill(-p.pgid, sig)
	}
	for _, pid := range p.pids() {
		signalPid(pid, sig)
	}
}

// Kill SIGKILLs every process of the run and returns once none is alive
// (or killWait has passed). It returns how many it found.
func (p *Procs) Kill() int {
	if p.cg != nil {
		return p.cg.kill(killWait) // the guard, outside it, lives on until Close
	}
	return p.killScan(killWait)
}

// Close ends the run once its command has exited: the guard is released,
// whatever the command left running is killed (Kill), the cgroup removed.
// It returns how many processes were left. Safe to call more than once.
func (p *Procs) Close() int {
	p.closeOnce.Do(func() {
		p.guard.Release()
		startMu.Lock()
		for _, pid := range p.execd {
			if execPids[pid]--; execPids[pid] <= 0 {
				delete(execPids, pid)
			}
		}
		startMu.Unlock()
		p.left = p.Kill()
		p.cg.remove()
		startMu.Lock()
		delete(active, p)
		startMu.Unlock()
		reapOrphans()
	})
	return p.left
}

// KillAll SIGKILLs the processes of every run of this process, at once,
// and waits until they are gone: for an exit that cannot wait for the
// runs' own stops (a second SIGINT or SIGTERM). It returns how many
// processes it found.
func KillAll() int {
	startMu.Lock()
	runs := make([]*Procs, 0, len(active))
	for p := range active {
		runs = append(runs, p)
	}
	startMu.Unlock()
	var wg sync.WaitGroup
	var n atomic.Int64
	for _, p := range runs {
		wg.Go(func() { n.Add(int64(p.Kill())) })
	}
	wg.Wait()
	return int(n.Load())
}

// otherRuns reports whether a run other than p may have processes alive.
func otherRuns(p *Procs) bool {
	startMu.Lock()
	defer startMu.Unlock()
	for q := range active {
		if q != p {
			return true
		}
	}
	return false
}
