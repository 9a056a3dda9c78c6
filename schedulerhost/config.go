package schedulerhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/ledger"
)

// Overlap says what happens when a job's tick comes while an earlier run of
// the same job is still going in this process, whichever term started it:
// a run an earlier term abandoned (it ignored its cancellation and
// outlived Lead, see Host.Abandoned) counts until it returns.
type Overlap string

// Overlap policies.
const (
	OverlapSkip  Overlap = "skip"  // default: the tick is not run; counted and logged
	OverlapAllow Overlap = "allow" // runs start side by side
	OverlapQueue Overlap = "queue" // the tick runs when the earlier run ends
)

// Misfire says what a new leader does with ticks missed while nobody led
// (read from the Ledger's last claimed tick), and what a leader does with
// ticks a forward step of the wall clock skipped over (see the package
// doc, Clock steps).
type Misfire string

// Misfire policies.
const (
	MisfireSkip    Misfire = "skip"     // missed ticks are counted and not run
	MisfireRunOnce Misfire = "run-once" // default: one run for the whole gap, as the newest missed tick
	MisfireRunAll  Misfire = "run-all"  // one run per missed tick, oldest first, at most MaxCatchUp
)

// Job is one scheduled job.
type Job struct {
	// Name identifies the job in the ledger, logs and metrics. Required,
	// unique within a Host.
	Name string
	// Schedule is a cron spec: 5 fields, or 6 with leading seconds;
	// descriptors such as @hourly; an optional CRON_TZ=Zone prefix, else
	// Config.Location. At DST changes a fixed time of day runs once, and
	// an hour field of * runs at every real hour (see the package doc).
	// Or an interval, "@every 10s" or "@every 2h offset 15m": its ticks
	// are the whole multiples of the interval since
	// 1970-01-01T00:00:00Z, plus the offset (EverySchedule), the same on
	// every instance and in every term. Required.
	Schedule string
	// Run does the work. Its context carries the fencing token
	// (election.TokenFromContext) and the tick (TickFromContext). It ends
	// with a cause: wrapping election.ErrLeadershipLost on loss,
	// ErrShutdownTimeout when a graceful stop gave up waiting,
	// ErrJobTimeout after Timeout. Required.
	Run func(ctx context.Context) error
	// Timeout bounds one run, each attempt of it (Retries) on its own.
	// Zero means no limit.
	Timeout time.Duration
	// Overlap is the overlap policy. Empty means OverlapSkip.
	Overlap Overlap
	// Misfire is the catch-up policy for ticks missed during a failover.
	// Empty means MisfireRunOnce. Without a Ledger there is no catch-up.
	Misfire Misfire
	// MisfireGrace is how old a missed tick may be and still be caught up.
	// Zero means one period of the schedule, capped at 1 minute.
	MisfireGrace time.Duration
	// MaxCatchUp caps the runs of MisfireRunAll. Zero means 10.
	MaxCatchUp int
	// Retries is how many times a failed run is tried again, within the
	// same tick and claim: after an attempt returns an error or panics,
	// but not after a Timeout nor once its context ended (loss,
	// shutdown). Zero means none; at most MaxRetries. See the package
	// doc, Retries.
	Retries int
	// RetryBackoff is the wait before the first retry; each next wait
	// doubles, up to RetryBackoffMax. Zero means DefaultRetryBackoff.
	RetryBackoff time.Duration
	// RetryBackoffMax caps the wait between attempts. Zero means
	// DefaultRetryBackoffMax, or RetryBackoff if that is longer.
	RetryBackoffMax time.Duration
	// Jitter, if positive, delays each run of a tick by JitterDelay(Name,
	// tick, Jitter), in [0, Jitter): the same delay on every instance, so
	// a new leader computes the one the old leader waited. The tick is
	// claimed after the delay; the tick's identity stays its nominal time.
	// It must be shorter than the shortest gap between the schedule's
	// ticks. See the package doc, Jitter.
	Jitter time.Duration
	// Deadline, if positive, is how long after a due tick a run that
	// ended ok must stand for it: Host.Absence reports the job overdue
	// once the latest tick at least Deadline old has no such run (see
	// absence.go). Every instance reads it, followers too, so that an
	// alert fires when the leader is gone. Zero means none; it must not
	// be negative.
	Deadline time.Duration
}

// Config configures a Host. Zero values mean the documented defaults.
type Config struct {
	// Jobs to run while leading. At least one.
	Jobs []Job
	// Location is the default time zone of the schedules (a spec's
	// CRON_TZ= wins). Nil means UTC.
	Location *time.Location
	// ShutdownTimeout is how long a graceful stop waits for runs in
	// flight, and how long a loss waits for cancelled runs to return,
	// before Lead returns. Zero means 25 s.
	ShutdownTimeout time.Duration
	// KillGrace is how long a graceful stop waits after cancelling the
	// runs still going at ShutdownTimeout. Zero means 5 s.
	KillGrace time.Duration
	// Ledger, if not nil, is claimed before every run and enables
	// misfire catch-up and run history.
	Ledger ledger.Ledger
	// Instance identifies this instance in the ledger and in the term
	// records (Control). Required with a Ledger.
	Instance string
	// Control, if not nil, is the election's control store (package
	// control): every leader honours the pauses it holds (a paused job's
	// ticks are claimed and recorded as skipped, not run) and runs the
	// run-now requests it holds; Lead records each term in it (terms.go).
	// Take it from a backend of the same election (for example etcd's
	// (*Backend).Control).
	Control control.Store
	// Accounts, if not nil, is where the tick accounts live (package
	// audit; a backend's driver.Accounter); nil means Control.
	Accounts control.Store
	// Leader, if not nil, reads who leads now (an election.LeaderReader's
	// Leader): Audit reads the leader's note there, which tells of claims
	// the backend refuses (audit.Refusal).
	Leader func(ctx context.Context) (election.LeaderInfo, error)
	// RunNowPoll is how often a leader with a Control store looks for
	// run-now requests. Zero means 500 ms.
	RunNowPoll time.Duration
	// NoAccounting, if true, switches the tick accounting off (package
	// audit): a leader with a Control store writes each job's Account
	// there (at most one write per changed job every
	// AccountWriteInterval, and the reads of its start; see
	// account.go) unless this is set. Host.Audit still reads what
	// other leaders wrote. It is how a benchmark measures the
	// accounting's cost.
	NoAccounting bool
	// Observer, if not nil, is told about runs, for metrics.
	Observer Observer
	// Tracer, if not nil, is told about each run and each tick that did
	// not run, for tracing (package tracing implements it on
	// OpenTelemetry; tracer.go). Nil costs nothing: no step, no
	// allocation.
	Tracer Tracer
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Defaults.
const (
	DefaultShutdownTimeout = 25 * time.Second
	DefaultMaxCatchUp      = 10
	DefaultRunNowPoll      = 500 * time.Millisecond
	maxDefaultGrace        = time.Minute
)

// DefaultKillGrace is Config.KillGrace when zero: how long a graceful
// stop waits, after ShutdownTimeout, for the runs it cancelled then. It is
// also a command job's time between SIGTERM and SIGKILL when the job sets
// none (the KillGrace of internal/execjob's Command), and the kill grace
// of node.ShutdownBudget when the node's config sets none.
const DefaultKillGrace = 5 * time.Second

var specParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule parses a cron spec the way a Host does: with robfig/cron
// v3, and baton's policy at DST transitions (see the package doc, Time
// zones and DST); "@every" specs, anchored on the Unix epoch, give an
// EverySchedule.
func ParseSchedule(spec string) (cron.Schedule, error) {
	// robfig/cron v3 slices up to the first space after TZ= or CRON_TZ=,
	// and panics when there is none.
	if (strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=")) && !strings.Contains(spec, " ") {
		return nil, fmt.Errorf("%s: want a schedule after the zone, separated by a space", spec)
	}
	if e, ok, err := parseEvery(spec); ok {
		if err != nil {
			return nil, err
		}
		return e, nil
	}
	if err := checkLists(spec); err != nil {
		return nil, err
	}
	s, err := specParser.Parse(spec)
	if err != nil {
		return nil, err
	}
	// robfig/cron gives up after five years and returns the zero time.
	if s.Next(time.Now()).IsZero() {
		return nil, fmt.Errorf("%s: never fires (no matching time in the next five years)", spec)
	}
	return withDSTPolicy(s), nil
}

// checkLists refuses a field whose comma-separated list has an empty
// element (",", "1,,2", "1,"): robfig/cron reads it as matching nothing,
// and its Next then searches for five years before it gives up.
func checkLists(spec string) error {
	fields := strings.Fields(spec)
	if len(fields) > 0 && (strings.HasPrefix(fields[0], "TZ=") || strings.HasPrefix(fields[0], "CRON_TZ=")) {
		fields = fields[1:]
	}
	for i, f := range fields {
		if !strings.Contains(f, ",") {
			continue
		}
		for _, e := range strings.Split(f, ",") {
			if e == "" {
				return fmt.Errorf("%s: field %d %q: empty element in a list", spec, i+1, f)
			}
		}
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Location == nil {
		c.Location = time.UTC
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.KillGrace == 0 {
		c.KillGrace = DefaultKillGrace
	}
	if c.RunNowPoll == 0 {
		c.RunNowPoll = DefaultRunNowPoll
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	jobs := make([]Job, len(c.Jobs))
	copy(jobs, c.Jobs)
	for i := range jobs {
		j := &jobs[i]
		if j.Overlap == "" {
			j.Overlap = OverlapSkip
		}
		if j.Misfire == "" {
			j.Misfire = MisfireRunOnce
		}
		if j.MaxCatchUp == 0 {
			j.MaxCatchUp = DefaultMaxCatchUp
		}
	}
	c.Jobs = jobs
	return c
}

// Validate reports every problem with c at once, each naming the field
// (and job) and the value.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.Jobs) == 0 {
		add("Jobs: at least one job is required")
	}
	if c.ShutdownTimeout < 0 {
		add("ShutdownTimeout %v: must be positive", c.ShutdownTimeout)
	}
	if c.KillGrace < 0 {
		add("KillGrace %v: must be positive", c.KillGrace)
	}
	if c.RunNowPoll < 10*time.Millisecond {
		add("RunNowPoll %v: must be at least 10ms", c.RunNowPoll)
	}
	if c.Control != nil && c.Instance == "" {
		add("Instance %q: required with a Control store", c.Instance)
	}
	if c.Ledger != nil && c.Instance == "" {
		add("Instance %q: required with a Ledger", c.Instance)
	}
	seen := map[string]int{}
	for i, j := range c.Jobs {
		where := fmt.Sprintf("Jobs[%d]", i)
		if j.Name == "" {
			add("%s.Name %q: required", where, j.Name)
		} else {
			where = fmt.Sprintf("job %q", j.Name)
			if k, dup := seen[j.Name]; dup {
				add("%s: Name %q: duplicate of Jobs[%d]", where, j.Name, k)
			}
			seen[j.Name] = i
		}
		if j.Schedule == "" {
			add("%s: Schedule %q: required", where, j.Schedule)
		} else if _, err := ParseSchedule(j.Schedule); err != nil {
			add("%s: Schedule %q: %v", where, j.Schedule, err)
		}
		if j.Run == nil {
			add("%s: Run: required", where)
		}
		if j.Timeout < 0 {
			add("%s: Timeout %v: must not be negative", where, j.Timeout)
		}
		switch j.Overlap {
		case OverlapSkip, OverlapAllow, OverlapQueue:
		default:
			add("%s: Overlap %q: want skip, allow or queue", where, j.Overlap)
		}
		switch j.Misfire {
		case MisfireSkip, MisfireRunOnce, MisfireRunAll:
		default:
			add("%s: Misfire %q: want skip, run-once or run-all", where, j.Misfire)
		}
		if j.MisfireGrace < 0 {
			add("%s: MisfireGrace %v: must not be negative", where, j.MisfireGrace)
		}
		if j.MaxCatchUp < 0 {
			add("%s: MaxCatchUp %d: must not be negative", where, j.MaxCatchUp)
		}
		if j.Deadline < 0 {
			add("%s: Deadline %v: must not be negative", where, j.Deadline)
		}
		validateRetries(where, j, add)
		validateJitter(where, j, add)
	}
	if err := errors.Join(errs...); err != nil {
		return &ConfigError{Problems: err}
	}
	return nil
}

// Observer is told about a Host's runs, synchronously, on the Host's
// goroutines; its methods must not block. Metrics implement it.
type Observer interface {
	RunStarted(job string, tick time.Time, lateness time.Duration)
	RunFinished(job string, result ledger.Result, took time.Duration)
	Misfired(job string, ticks int)
	OverlapSkipped(job string)
	Drained(took time.Duration, left int)
}

// AccountObserver, if the Observer implements it too, is told of each
// write of the tick accounting that failed: what is "account" (a leader's
// fenced write of a job's Account; its records are asked again at the
// next write, or go to a late note) or "late-note" (the unfenced note a
// term leaves of what it could not write; kept in memory for the Host's
// next term). Metrics implement it.
type AccountObserver interface {
	AccountWriteFailed(what string)
}
