//go:build !linux

package execjob

import (
	"errors"
	"syscall"
	"time"
)

// Without Linux, a run's processes are its process group: cgroups, the
// search of /proc and the subreaper are Linux's.

type cgroup struct{ dir string }

// CgroupSupport: there are no cgroups here.
func CgroupSupport() (string, error) { return "", errors.New("cgroups are Linux's") }

func newRunCgroup(string) *cgroup           { return nil }
func (c *cgroup) into(*syscall.SysProcAttr) {}
func (c *cgroup) killFile() string          { return "" }
func (c *cgroup) path() string              { return "" }
func (c *cgroup) kill(time.Duration) int    { return 0 }
func (c *cgroup) remove()                   {}
func (c *cgroup) procs() []int              { return nil }
func (p *Procs) pids() []int                { return nil }
func signalPid(int, syscall.Signal)         {}
func becomeSubreaper()                      {}
func reapOrphans()                          {}

// AllowSubreaper does nothing here.
func AllowSubreaper() {}

// killScan SIGKILLs the run's process group; it returns 1 if there was
// one.
func (p *Procs) killScan(time.Duration) int {
	if syscall.Kill(-p.pgid, syscall.SIGKILL) == nil {
		return 1
	}
	return 0
}
