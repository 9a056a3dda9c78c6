package execjob

import (
	"bytes"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// proc is one process as /proc/PID/stat shows it.
type proc struct {
	pid, ppid, pgrp int
	start           uint64 // start time, in clock ticks since boot: tells a reused pid apart
	zombie          bool
}

// readProc reads /proc/PID/stat.
func readProc(pid int) (proc, bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return proc{}, false
	}
	// After "pid (comm) ": state ppid pgrp session ... field 22 starttime.
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 20 {
		return proc{}, false
	}
	p := proc{pid: pid, zombie: f[0] == "Z" || f[0] == "X"}
	p.ppid, _ = strconv.Atoi(f[1])
	p.pgrp, _ = strconv.Atoi(f[2])
	p.start, _ = strconv.ParseUint(f[19], 10, 64)
	return p, true
}

// allProcs reads every process of /proc.
func allProcs() []proc {
	dirs, _ := os.ReadDir("/proc")
	ps := make([]proc, 0, len(dirs))
	for _, d := range dirs {
		if pid, err := strconv.Atoi(d.Name()); err == nil {
			if p, ok := readProc(pid); ok {
				ps = append(ps, p)
			}
		}
	}
	return ps
}

// hasEnv reports whether process pid's environment holds entry.
func hasEnv(pid int, entry []byte) bool {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for _, e := range bytes.Split(raw, []byte{0}) {
		if bytes.Equal(e, entry) {
			return true
		}
	}
	return false
}

// members finds the live processes of run p: in its process group, or
// whose environment holds its tag, or (in a subreaper, when no other run
// is in flight) children of this process that no os/exec Cmd started;
// and every descendant of those. This process is never one.
func (p *Procs) members() []proc {
	self := os.Getpid()
	ps := allProcs()
	children := map[int][]int{}
	byPid := map[int]proc{}
	for _, q := range ps {
		children[q.ppid] = append(children[q.ppid], q.pid)
		byPid[q.pid] = q
	}
	tag := []byte(EnvRunTag + "=" + p.tag)
	sweep := subreaper.on.Load() && !otherRuns(p)
	startMu.Lock()
	var seeds []int
	for _, q := range ps {
		switch {
		case q.pid == self || q.zombie:
		case q.pgrp == p.pgid, hasEnv(q.pid, tag):
			seeds = append(seeds, q.pid)
		case sweep && q.ppid == self && execPids[q.pid] == 0:
			seeds = append(seeds, q.pid)
		}
	}
	startMu.Unlock()
	seen := map[int]bool{self: true}
	var out []proc
	for len(seeds) > 0 {
		pid := seeds[len(seeds)-1]
		seeds = seeds[:len(seeds)-1]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		if q := byPid[pid]; !q.zombie {
			out = append(out, q)
		}
		seeds = append(seeds, children[pid]...)
	}
	return out
}

// pids lists the live processes of the run.
func (p *Procs) pids() []int {
	if p.cg != nil {
		return p.cg.procs()
	}
	var pids []int
	for _, q := range p.members() {
		pids = append(pids, q.pid)
	}
	return pids
}

// signalPid sends sig to pid through a pidfd.
func signalPid(pid int, sig syscall.Signal) {
	if q, ok := readProc(pid); ok {
		sendTo(q, sig)
	}
}

// sendTo sends sig to q through a pidfd, if q's pid is still q (not a
// process that has the pid since).
func sendTo(q proc, sig syscall.Signal) {
	fd, err := unix.PidfdOpen(q.pid, 0)
	if err != nil {
		if err == unix.ENOSYS {
			_ = syscall.Kill(q.pid, sig)
		}
		return
	}
	defer unix.Close(fd)
	if now, ok := readProc(q.pid); ok && now.start == q.start {
		_ = unix.PidfdSendSignal(fd, sig, nil, 0)
	}
}

// killScan SIGKILLs the run's processes, pass after pass (a process may
// fork while it is killed), until a pass finds none alive or wait has
// passed. It returns how many it found.
func (p *Procs) killScan(wait time.Duration) int {
	found := map[int]bool{}
	end := time.Now().Add(wait)
	for delay := time.Millisecond; ; delay = min(2*delay, 20*time.Millisecond) {
		ms := p.members()
		if len(ms) == 0 || time.Now().After(end) {
			break
		}
		for _, q := range ms {
			found[q.pid] = true
			sendTo(q, syscall.SIGKILL)
		}
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		reapOrphans()
		time.Sleep(delay)
	}
	return len(found)
}

// subreaper is this process's part as a child subreaper.
var subreaper struct {
	mu      sync.Mutex
	allowed bool
	on      atomic.Bool
}

// AllowSubreaper lets the fallback make this process a child subreaper
// (prctl PR_SET_CHILD_SUBREAPER) at its first run: the processes a run
// orphans (a double fork, a daemon) are then reparented to it instead of
// init, so that they stay in its tree and it reaps them. Only a program
// all of whose child processes are started by this package may call it,
// before it starts any: the reaper reaps, by pid (waitid P_PID), every
// zombie child of this process that no os/exec Cmd of this package
// started, and an exit status some other code waits for would be taken
// from it. The baton command calls it; the library never does.
func AllowSubreaper() {
	subreaper.mu.Lock()
	subreaper.allowed = true
	subreaper.mu.Unlock()
}

// becomeSubreaper makes this process a subreaper if AllowSubreaper
// allowed it, once, and starts the reaper: a goroutine for the rest of
// the process's life, woken by SIGCHLD.
func becomeSubreaper() {
	subreaper.mu.Lock()
	defer subreaper.mu.Unlock()
	if !subreaper.allowed || subreaper.on.Load() {
		return
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return
	}
	subreaper.on.Store(true)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	go func() {
		for range sig {
			reapOrphans()
		}
	}()
}

// reapOrphans reaps the zombie children of this process that no os/exec
// Cmd started (orphans of runs reparented to this subreaper), each by its
// pid. startMu keeps a process that os/exec has just started from being
// taken for one before its pid is registered.
func reapOrphans() {
	if !subreaper.on.Load() {
		return
	}
	self := os.Getpid()
	startMu.Lock()
	defer startMu.Unlock()
	for _, q := range allProcs() {
		if q.ppid == self && q.zombie && execPids[q.pid] == 0 {
			var info unix.Siginfo
			_ = unix.Waitid(unix.P_PID, q.pid, &info, unix.WEXITED|unix.WNOHANG, nil)
		}
	}
}
