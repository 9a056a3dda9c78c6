package cli

import (
	"log/slog"
	"slices"
	"time"

	"github.com/batonhq/baton/httpapi"
	"github.com/batonhq/baton/internal/jobsfile"
	"github.com/batonhq/baton/schedulerhost"
)

// fileReloader is a httpapi.Reloader that reads a jobs file again. The
// election section, the application check and the backend and node
// settings are read only at start: a change there is logged and ignored.
// The node serializes its calls.
type fileReloader struct {
	start    *jobsfile.File // the file the node started with
	cur      *jobsfile.File // the file whose jobs the Host runs
	read     func() (*jobsfile.File, error)
	election string
	instance string
	grace    time.Duration // the commands' kill grace, fixed at start
	log      *slog.Logger
}

// newFileReloader returns a Reloader of f, read again by read (nil:
// jobsfile.Load of f's path).
func newFileReloader(f *jobsfile.File, read func() (*jobsfile.File, error), election, instance string, log *slog.Logger) *fileReloader {
	if read == nil {
		read = func() (*jobsfile.File, error) { return jobsfile.Load(f.Path) }
	}
	return &fileReloader{start: f, cur: f, read: read, election: election, instance: instance,
		grace: ShutdownConfigOf(f).WithDefaults().KillGrace, log: log}
}

func (r *fileReloader) Source() string { return r.cur.Path }

// Reload reads the file again and gives its jobs to host. A bad file is
// refused as a whole: the error names FILE:LINE: FIELD for each problem.
func (r *fileReloader) Reload(host *schedulerhost.Host) (httpapi.ReloadSummary, error) {
	f, err := r.read()
	if err != nil {
		return httpapi.ReloadSummary{}, err
	}
	jobs, err := hostJobs(f, r.election, r.instance, r.grace, r.log)
	if err != nil {
		return httpapi.ReloadSummary{}, err
	}
	if _, err := host.SetJobs(jobs); err != nil {
		return httpapi.ReloadSummary{}, f.Locate(err)
	}
	sum := diffJobs(r.cur, f)
	r.cur = f
	if f.Election != r.start.Election {
		r.log.Warn("reload: the election section changed; it is read only at start (restart the node to apply it)", "file", f.Path)
	}
	if !appCheckSame(r.start, f) {
		r.log.Warn("reload: the application check (app section, or the http jobs' endpoints it connects to) changed; it is read only at start (restart the node to apply it)", "file", f.Path)
	}
	if !slices.EqualFunc(f.Settings, r.start.Settings, func(a, b jobsfile.Setting) bool {
		return a.Section == b.Section && a.Key == b.Key && a.Value == b.Value
	}) {
		r.log.Warn("reload: the backend or node settings (or election.name) changed; they are read only at start (restart the node to apply them)", "file", f.Path)
	}
	return sum, nil
}

// diffJobs names the jobs of f added, removed, changed and unchanged
// since cur.
func diffJobs(cur, f *jobsfile.File) httpapi.ReloadSummary {
	sum := httpapi.ReloadSummary{JobsHash: f.JobsHash()}
	old := make(map[string]jobsfile.Job, len(cur.Jobs))
	for _, j := range cur.Jobs {
		old[j.Name] = j
	}
	for _, j := range f.Jobs {
		o, ok := old[j.Name]
		delete(old, j.Name)
		switch {
		case !ok:
			sum.Added = append(sum.Added, j.Name)
		case jobsfile.SameJob(o, j):
			sum.Unchanged = append(sum.Unchanged, j.Name)
		default:
			sum.Changed = append(sum.Changed, j.Name)
		}
	}
	for _, j := range cur.Jobs {
		if _, ok := old[j.Name]; ok {
			sum.Removed = append(sum.Removed, j.Name)
		}
	}
	return sum
}

// appCheckSame reports whether old and f ask for the same application
// check.
func appCheckSame(old, f *jobsfile.File) bool {
	a, b := old.App, f.App
	a.Line, b.Line = 0, 0
	c1, u1, s1 := old.AppCheck()
	c2, u2, s2 := f.AppCheck()
	return a == b && c1 == c2 && u1 == u2 && slices.Equal(s1, s2)
}
