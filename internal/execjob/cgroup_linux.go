package execjob

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// cgroup is one run's cgroup v2: a directory below this process's own
// cgroup, opened for clone3's CLONE_INTO_CGROUP. Its methods do nothing
// on a nil cgroup (the fallback).
type cgroup struct {
	dir string
	fd  int
}

var cgroupBase struct {
	once sync.Once
	dir  string // where the runs' cgroups are made; "" when they cannot be
	why  error  // why not
}

// CgroupSupport reports where runs' cgroups are made, or why they are not
// (the fallback applies then). BATON_CGROUPS=off is a reason.
func CgroupSupport() (string, error) {
	if os.Getenv(EnvCgroups) == "off" {
		return "", fmt.Errorf("%s=off", EnvCgroups)
	}
	cgroupBase.once.Do(func() { cgroupBase.dir, cgroupBase.why = findCgroupBase() })
	return cgroupBase.dir, cgroupBase.why
}

// newRunCgroup makes the cgroup of the run tagged tag, or returns nil
// where runs get none.
func newRunCgroup(tag string) *cgroup {
	base, err := CgroupSupport()
	if err != nil {
		return nil
	}
	c, err := makeCgroup(filepath.Join(base, "baton-"+strings.TrimSuffix(strings.ReplaceAll(tag, ".", "-"), "-")))
	if err != nil {
		return nil
	}
	return c
}

func makeCgroup(dir string) (*cgroup, error) {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		_ = os.Remove(dir)
		return nil, err
	}
	return &cgroup{dir: dir, fd: fd}, nil
}

// into makes a process started with attr begin in c.
func (c *cgroup) into(attr *syscall.SysProcAttr) {
	if c != nil {
		attr.UseCgroupFD, attr.CgroupFD = true, c.fd
	}
}

// path is c's directory, "" for nil.
func (c *cgroup) path() string {
	if c == nil {
		return ""
	}
	return c.dir
}

// killFile is c's cgroup.kill, "" without one.
func (c *cgroup) killFile() string {
	if c == nil {
		return ""
	}
	if _, err := os.Stat(filepath.Join(c.dir, "cgroup.kill")); err != nil {
		return ""
	}
	return filepath.Join(c.dir, "cgroup.kill")
}

// procs lists the pids in c.
func (c *cgroup) procs() []int {
	raw, _ := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
	var pids []int
	for _, f := range strings.Fields(string(raw)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// populated reports whether a live process is in c.
func (c *cgroup) populated() bool {
	raw, err := os.ReadFile(filepath.Join(c.dir, "cgroup.events"))
	if err != nil {
		return false // removed: nothing in it
	}
	return strings.Contains(string(raw), "populated 1")
}

// kill SIGKILLs every process in c (cgroup.kill, or each pid of
// cgroup.procs until none is left) and waits up to wait until c is
// empty. It returns how many processes were in c.
func (c *cgroup) kill(wait time.Duration) int {
	n := len(c.procs())
	if !c.populated() {
		return n
	}
	k := c.killFile()
	end := time.Now().Add(wait)
	for delay := time.Millisecond; c.populated(); delay = min(2*delay, 20*time.Millisecond) {
		if k == "" || os.WriteFile(k, []byte("1"), 0) != nil {
			for _, pid := range c.procs() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if time.Now().After(end) {
			break
		}
		time.Sleep(delay)
	}
	return n
}

// remove closes c and removes its directory.
func (c *cgroup) remove() {
	if c == nil {
		return
	}
	_ = syscall.Close(c.fd)
	if err := os.Remove(c.dir); err != nil && c.populated() {
		c.kill(killWait)
		_ = os.Remove(c.dir)
	}
}

// findCgroupBase finds the cgroup v2 hierarchy (mounted alone at
// /sys/fs/cgroup, or beside v1, e.g. at /sys/fs/cgroup/unified), this
// process's cgroup in it, and checks that a run can start in a cgroup made
// below it: it makes one, starts /bin/true in it, and removes it.
func findCgroupBase() (string, error) {
	own, err := ownCgroup()
	if err != nil {
		return "", err
	}
	mount, root, err := cgroup2Mount()
	if err != nil {
		return "", err
	}
	rel, ok := strings.CutPrefix(own, root)
	if !ok || (rel != "" && !strings.HasPrefix(rel, "/") && root != "/") {
		return "", fmt.Errorf("this process's cgroup %s is outside the cgroup2 mount at %s (its root %s)", own, mount, root)
	}
	if root == "/" {
		rel = own
	}
	base := filepath.Join(mount, rel)
	removeStale(base)
	probe, err := makeCgroup(filepath.Join(base, fmt.Sprintf("baton-%d-probe", os.Getpid())))
	if err != nil {
		return "", fmt.Errorf("cannot make a cgroup below %s: %w", base, err)
	}
	defer probe.remove()
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	probe.into(cmd.SysProcAttr)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("cannot start a process in a cgroup below %s: %w", base, err)
	}
	return base, nil
}

// ownCgroup is this process's cgroup v2 path, from /proc/self/cgroup's
// "0::PATH" line.
func ownCgroup() (string, error) {
	raw, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			if strings.HasSuffix(p, " (deleted)") {
				return "", fmt.Errorf("this process's cgroup %s was removed", p)
			}
			return p, nil
		}
	}
	return "", errors.New("no cgroup v2 line in /proc/self/cgroup")
}

// cgroup2Mount finds the cgroup2 mount in /proc/self/mountinfo: its mount
// point and the path of its root in the hierarchy.
func cgroup2Mount() (mount, root string, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	return parseMountinfo(f)
}

// parseMountinfo finds the cgroup2 mount in a mountinfo file.
func parseMountinfo(r io.Reader) (mount, root string, err error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, fs := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 6 || len(fs) < 1 || fs[0] != "cgroup2" {
			continue
		}
		if strings.Contains(","+fields[5]+",", ",ro,") {
			return "", "", fmt.Errorf("cgroup2 at %s is mounted read-only", unescape(fields[4]))
		}
		return unescape(fields[4]), unescape(fields[3]), nil
	}
	return "", "", errors.New("no cgroup2 mount in /proc/self/mountinfo")
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeStale removes the empty cgroups that runs of processes now gone
// left below base (a process killed before it could remove them).
func removeStale(base string) {
	dirs, _ := os.ReadDir(base)
	for _, d := range dirs {
		rest, ok := strings.CutPrefix(d.Name(), "baton-")
		if !ok || !d.IsDir() {
			continue
		}
		owner, _, _ := strings.Cut(rest, "-")
		if pid, err := strconv.Atoi(owner); err == nil && pid != os.Getpid() && syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.Remove(filepath.Join(base, d.Name()))
		}
	}
}
