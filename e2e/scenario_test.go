package e2e

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/e2e/internal/history"
	"github.com/batonhq/baton/internal/envtest"
)

// Fault kinds. Every one is injected at least once per backend by the
// short profile; "restart" follows each kill and SIGTERM.
const (
	fKillLeader     = "kill-leader"     // SIGKILL of the leader
	fKillFollower   = "kill-follower"   // SIGKILL of a follower
	fTermLeader     = "sigterm-leader"  // SIGTERM of the leader while a job runs
	fStopLeader     = "sigstop-leader"  // SIGSTOP of the leader for 0.5-3 TTL (long: 0.5-2), then SIGCONT
	fPartition      = "partition"       // one node's proxy blackholed for 0.5-3 TTL (long: 0.5-2)
	fLatency        = "latency"         // delay on the leader's proxy
	fReset          = "reset"           // connection resets
	fBackendRestart = "backend-restart" // etcd/Consul restart; SQL: the nodes' connections killed
	fRestart        = "restart"         // a killed or stopped node started again (new identity)
)

var faultKinds = []string{fKillLeader, fKillFollower, fTermLeader, fStopLeader, fPartition, fLatency, fReset, fBackendRestart}

// slack absorbs the time between a node's decision and its record: the
// fork and exec of the job's shell and `date`, and log lines written just
// after the instant they describe. The summary prints the largest start
// latency observed (job's start line minus the node's "run started").
const slack = 200 * time.Millisecond

// claimTimeout is the longest a node's claim, its retries included, is
// in flight (schedulerhost's ledgerTimeout).
const claimTimeout = 5 * time.Second

type profile struct {
	name     string
	duration time.Duration // long: inject faults until it has passed
	// lanes is the number of groups of nodes per backend (long profile;
	// 1 otherwise). Each group has an election of its own on the shared
	// backend and injects faults into its own nodes at the same time as
	// the others; only the first injects the backend's faults.
	lanes int
	// laneOf, if set, overrides lanes for the backends it names.
	laneOf map[string]int
}

// lanesOf returns the number of lanes of backend name.
func (p profile) lanesOf(name string) int {
	if n, ok := p.laneOf[name]; ok {
		return n
	}
	return max(p.lanes, 1)
}

func envProfile(t *testing.T) profile {
	switch p := envtest.Getenv("BATON_E2E_PROFILE", "short"); p {
	case "short":
		return profile{name: "short", lanes: 1}
	case "long":
		d, err := time.ParseDuration(envtest.Getenv("BATON_E2E_DURATION", "30m"))
		if err != nil || d <= 0 {
			t.Fatalf("BATON_E2E_DURATION: want a positive duration such as 30m: %v", err)
		}
		p := profile{name: "long", duration: d, lanes: 3, laneOf: map[string]int{}}
		// BATON_E2E_LANES: a number for every backend, or
		// name=number items (the others keep 3), comma-separated.
		for _, item := range strings.Split(envtest.Getenv("BATON_E2E_LANES", "3"), ",") {
			name, num, named := strings.Cut(strings.TrimSpace(item), "=")
			if !named {
				num = name
			}
			n, err := strconv.Atoi(num)
			if err != nil || n < 1 || n > 8 {
				t.Fatalf("BATON_E2E_LANES %q: %q: want a number of node groups from 1 to 8, or backend=number", os.Getenv("BATON_E2E_LANES"), item)
			}
			if named {
				p.laneOf[name] = n
			} else {
				p.lanes = n
			}
		}
		return p
	default:
		t.Fatalf("BATON_E2E_PROFILE %q: want short or long", p)
	}
	return profile{}
}

// envSeed is BATON_E2E_SEED, to replay the fault choices of an earlier
// run, or a new seed.
func envSeed(t *testing.T) uint64 {
	s := os.Getenv("BATON_E2E_SEED")
	if s == "" {
		return uint64(time.Now().UnixNano())
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("BATON_E2E_SEED %q: %v", s, err)
	}
	return v
}

// TestFaults runs the fault scenario on every backend named by
// BATON_E2E_BACKENDS, in parallel, and checks each history.
func TestFaults(t *testing.T) {
	skipUnlessLong(t, "starts servers and node processes")
	prof := envProfile(t)
	seed := envSeed(t)
	// The short profile runs etcd and Consul clustered and PostgreSQL
	// with a standby, as production does; the other tests of the suite
	// cover the single servers.
	def := "etcd-cluster,postgres-ha,mysql,consul-cluster,redis"
	if prof.name == "long" {
		def = "etcd,postgres"
	}
	names := strings.Split(envtest.Getenv("BATON_E2E_BACKENDS", def), ",")
	fmt.Printf("e2e: profile %s, seed %d (replay: BATON_E2E_SEED=%d), backends %s\n", prof.name, seed, seed, strings.Join(names, ","))
	var mu sync.Mutex
	var summaries []string
	var outcomes []*outcome
	t.Run("backends", func(t *testing.T) {
		for _, name := range names {
			name = strings.TrimSpace(name)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				s, o := runBackend(t, name, prof, seed)
				mu.Lock()
				summaries = append(summaries, s)
				if o != nil {
					outcomes = append(outcomes, o)
				}
				mu.Unlock()
			})
		}
	})
	sort.Strings(summaries)
	fmt.Printf("e2e summary (profile %s, seed %d):\n%s", prof.name, seed, strings.Join(summaries, ""))
	if path := os.Getenv("BATON_E2E_REPORT"); path != "" && len(outcomes) > 0 {
		if err := writeReport(path, outcomes); err != nil {
			t.Errorf("BATON_E2E_REPORT: %v", err)
		} else {
			fmt.Printf("e2e: report of %d backend(s) written to %s\n", len(outcomes), path)
		}
	}
}

// scenario is one backend's run.
type scenario struct {
	t    *testing.T
	be   *backend
	prof profile
	seed uint64
	rng  *rand.Rand
	// lane is the scenario's group of nodes on a backend shared by
	// lanes groups (0 of 1 but in the long profile); election is the
	// election name its nodes use.
	lane, lanes int
	election    string
	dir         string
	jobsPath    string
	runsPath    string
	slots       []*slot
	started     time.Time
	// extraArgs are added to every node's command line.
	extraArgs []string
	// sidecar, if set, makes every node a `baton run` sidecar beside an
	// app of its own (sidecar_test.go).
	sidecar *sidecar

	mu       sync.Mutex
	procs    []*proc
	timeline []history.Fault
	frozen   []history.Interval
	pauses   []history.Pause // acknowledged, by the operator
	counts   map[string]int
	problems []string // liveness failures, reported with the violations
	outcome  *outcome // set by check
	// checkedJobs are the jobs whose every tick check judged.
	checkedJobs map[string]history.Policy
}

func (sc *scenario) note(kind, target, format string, args ...any) {
	f := history.Fault{At: time.Now(), Kind: kind, Target: target, Detail: fmt.Sprintf(format, args...)}
	sc.mu.Lock()
	sc.timeline = append(sc.timeline, f)
	if kind != "" && !strings.HasSuffix(kind, "-end") && !strings.HasPrefix(kind, "info") {
		sc.counts[kind]++
	}
	sc.mu.Unlock()
	sc.t.Logf("%s %s: %-16s %-10s %s", sc.be.name, f.At.Format("15:04:05.000"), kind, target, f.Detail)
}

// label names the scenario's backend, and its lane if there are several.
func (sc *scenario) label() string {
	if sc.lanes > 1 {
		return fmt.Sprintf("%s lane %d", sc.be.name, sc.lane+1)
	}
	return sc.be.name
}

func (sc *scenario) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	sc.mu.Lock()
	sc.problems = append(sc.problems, time.Now().Format("15:04:05.000")+" "+msg)
	sc.mu.Unlock()
	sc.t.Logf("%s: PROBLEM: %s", sc.be.name, msg)
}

func (sc *scenario) ttlTimes(lo, hi float64) time.Duration {
	f := lo + sc.rng.Float64()*(hi-lo)
	return time.Duration(f * float64(sc.be.ttl)).Round(time.Millisecond)
}

// cutLength is how long a SIGSTOP or a partition lasts: 0.5-3 TTL in
// the short profile; 0.5-2 TTL in the long one, which is about the number
// of faults (both sides of the TTL are still covered: a cut shorter than
// the TTL keeps the term, a longer one ends it).
func (sc *scenario) cutLength() time.Duration {
	if sc.prof.name == "long" {
		return sc.ttlTimes(0.5, 2)
	}
	return sc.ttlTimes(0.5, 3)
}

func (sc *scenario) pause(lo, hi time.Duration) {
	time.Sleep(lo + time.Duration(sc.rng.Int64N(int64(hi-lo)+1)))
}

// live returns the processes of the slots that are running.
func (sc *scenario) live() []*proc {
	var out []*proc
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, s := range sc.slots {
		if s.proc != nil && s.proc.alive() {
			out = append(out, s.proc)
		}
	}
	return out
}

// leader returns the running, unfrozen node whose log shows an open term.
func (sc *scenario) leader() (*proc, history.Term) {
	for _, p := range sc.live() {
		p.poll()
		if p.frozen {
			continue
		}
		if tm, ok := p.openTerm(); ok {
			return p, tm
		}
	}
	return nil, history.Term{}
}

// waitFor polls cond every 100 ms until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// settle waits until every slot's node has started and a leader has run a
// job since since. It reports a liveness problem if that takes too long.
func (sc *scenario) settle(since time.Time) (*proc, bool) {
	var l *proc
	ok := waitFor(3*sc.be.crashBound+30*time.Second, func() bool {
		for _, p := range sc.live() {
			p.poll()
			if !p.started() {
				return false
			}
		}
		var tm history.Term
		l, tm = sc.leader()
		if l == nil {
			return false
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.lastRun.After(since) && l.lastRunTok == tm.Token
	})
	if !ok {
		sc.problem("no leader running jobs %v after %s", time.Since(since).Round(time.Millisecond), since.Format("15:04:05.000"))
	}
	return l, ok
}

// napInFlight reports whether p has a run of the sleeping job started and
// not ended, per the run log.
func (sc *scenario) napInFlight(p *proc) bool { return sc.inFlight(p, "nap", 1200*time.Millisecond) }

// inFlight reports whether p has a run of job started less than age ago
// and not ended, per the run log.
func (sc *scenario) inFlight(p *proc, job string, age time.Duration) bool {
	f, err := os.Open(sc.runsPath)
	if err != nil {
		return false
	}
	defer f.Close()
	starts, err := history.ParseRunLog(f)
	if err != nil {
		return false
	}
	if _, err := f.Seek(0, 0); err != nil {
		return false
	}
	ends, err := history.ParseEnds(f)
	if err != nil {
		return false
	}
	ended := map[string]bool{}
	for _, e := range ends {
		ended[e.Job+e.Tick.String()+strconv.FormatUint(e.Token, 10)] = true
	}
	for _, s := range starts {
		if s.Job == job && s.Instance == p.id && !ended[s.Job+s.Tick.String()+strconv.FormatUint(s.Token, 10)] &&
			time.Since(s.At) < age {
			return true
		}
	}
	return false
}

// bothJobsRan reports whether the run log has a start of each job.
func (sc *scenario) bothJobsRan() bool {
	f, err := os.Open(sc.runsPath)
	if err != nil {
		return false
	}
	defer f.Close()
	starts, _ := history.ParseRunLog(f)
	seen := map[string]bool{}
	for _, s := range starts {
		seen[s.Job] = true
	}
	return seen["tick"] && seen["nap"]
}

// kill sends SIGKILL to p and waits for it to exit. The kill time is
// taken before the signal, so that nothing of p happens after it but the
// job processes it had already started.
func (sc *scenario) kill(p *proc, kind string) {
	p.mu.Lock()
	frozen := p.frozen
	p.mu.Unlock()
	at := time.Now()
	p.mu.Lock()
	p.killedAt = at
	p.mu.Unlock()
	_ = p.signal(syscall.SIGKILL)
	if frozen {
		_ = p.signal(syscall.SIGCONT)
	}
	<-p.done
	if kind != "" {
		sc.note(kind, p.id, "pid %d", p.pid())
	}
}

// restartSlot starts a new node on the slot. A node exits at start-up
// when it cannot reach its backend (its check names the endpoint); in the
// soak another lane may be faulting the shared backend then. Like a
// supervisor (systemd's Restart=on-failure), restartSlot starts the slot
// again a second later, until a node starts or the settle bound passes.
// A failed start outside every backend fault's span (lengthened by the
// crash bound) is a problem: nothing should have kept the node from its
// backend then.
func (sc *scenario) restartSlot(s *slot) {
	deadline := time.Now().Add(3*sc.be.crashBound + 30*time.Second)
	for {
		p, err := sc.startProc(s)
		if err != nil {
			sc.problem("restart slot %d: %v", s.i+1, err)
			return
		}
		sc.note(fRestart, p.id, "pid %d on slot %d (new identity)", p.pid(), s.i+1)
		waitFor(time.Until(deadline), func() bool {
			p.poll()
			return p.started() || !p.alive()
		})
		if p.alive() || p.started() {
			return // started, or still starting: settle waits for it
		}
		at := time.Now()
		p.mu.Lock()
		exitErr := p.exitErr
		p.mu.Unlock()
		sc.note("info-start-failed", p.id, "exited before it started (%v): %s", exitErr, lastLine(p.logPath))
		inFault := false
		for _, w := range sc.be.excused(sc.be.crashBound) {
			if !at.Before(w.From) && !at.After(w.To) {
				inFault = true
			}
		}
		if !inFault {
			sc.problem("%s exited before it started, outside any backend fault: %v", p.id, exitErr)
		}
		if time.Now().After(deadline) {
			sc.problem("slot %d: no node started within %v", s.i+1, 3*sc.be.crashBound+30*time.Second)
			return
		}
		time.Sleep(time.Second)
	}
}

// lastLine returns the last line of the file at path, for a note.
func lastLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// inject runs one fault to its end (healed, continued, restarted).
// freezeSettle is how long a frozen leader's run log is given to show a
// drain run that began as the node froze (sigstop-leader).
const freezeSettle = 750 * time.Millisecond

func (sc *scenario) inject(kind string, l *proc) {
	be := sc.be
	followers := func() []*proc {
		var out []*proc
		for _, p := range sc.live() {
			if p != l {
				out = append(out, p)
			}
		}
		return out
	}
	switch kind {
	case fKillLeader:
		sc.kill(l, kind)
		newL := sc.waitNewLeader(l)
		if newL != nil {
			sc.pause(0, time.Second)
		}
		sc.restartSlot(l.slot)
	case fKillFollower:
		fs := followers()
		if len(fs) == 0 {
			sc.problem("no follower to kill")
			return
		}
		p := fs[sc.rng.IntN(len(fs))]
		sc.kill(p, kind)
		sc.pause(500*time.Millisecond, 2*time.Second)
		sc.restartSlot(p.slot)
	case fTermLeader:
		mid := waitFor(12*time.Second, func() bool { return sc.napInFlight(l) })
		detail := "while its sleeping job runs"
		if !mid {
			detail = "no sleeping job in flight found within 12 s"
		}
		_ = l.signal(syscall.SIGTERM)
		sc.note(kind, l.id, "pid %d, %s", l.pid(), detail)
		select {
		case <-l.done:
		case <-time.After(30 * time.Second):
			sc.problem("%s still running 30 s after SIGTERM: SIGKILL", l.id)
			sc.kill(l, "")
		}
		sc.note("info-exited", l.id, "after SIGTERM: %v", l.exitErr)
		if l.exitErr != nil {
			sc.problem("%s exited with %v after SIGTERM, want status 0", l.id, l.exitErr)
		}
		sc.waitNewLeader(l)
		sc.restartSlot(l.slot)
	case fStopLeader:
		d := max(sc.cutLength(), freezeSettle)
		// A job already running when its node is frozen past the TTL
		// is beyond what a lease can stop (docs/guarantees.md, limits): the freeze
		// comes between two runs of "drain", whose runs are long.
		// A run counts as in flight until its end line, up to 10 s old (a
		// run of a killed process never writes one); under load a run of
		// drain lasts well over its 2.5 s. If none ends within 12 s, the
		// freeze is skipped: it would test what no lease can stop.
		if !waitFor(12*time.Second, func() bool { return !sc.inFlight(l, "drain", 10*time.Second) }) {
			sc.note("info-"+kind, l.id, "skipped: drain still in flight after 12 s")
			return
		}
		l.mu.Lock()
		l.frozen = true
		l.mu.Unlock()
		from := time.Now()
		_ = l.signal(syscall.SIGSTOP)
		// The check above reads the whole run log: a drain run may have
		// started between it and the SIGSTOP. A frozen node starts
		// nothing, so a run in flight now began before the freeze; its
		// process, not frozen, writes its start line within
		// freezeSettle. Then the freeze ends at once, well within the
		// lease.
		time.Sleep(freezeSettle)
		// The thaw is stamped before the SIGCONT: a node's first line
		// after waking can come before a stamp taken after the signal (in
		// the kube soak, a skip 5 ms before it, taken after the note).
		var to time.Time
		if sc.inFlight(l, "drain", 10*time.Second) {
			to = time.Now()
			_ = l.signal(syscall.SIGCONT)
			sc.note("info-"+kind, l.id, "thawed after %v: a drain run had started as it froze", to.Sub(from).Round(time.Millisecond))
		} else {
			sc.note(kind, l.id, "for %v", d)
			time.Sleep(d - freezeSettle)
			to = time.Now()
			_ = l.signal(syscall.SIGCONT)
		}
		l.mu.Lock()
		l.frozen = false
		l.mu.Unlock()
		sc.mu.Lock()
		sc.frozen = append(sc.frozen, history.Interval{Instance: l.id, From: from, To: to})
		sc.mu.Unlock()
		sc.note(kind+"-end", l.id, "SIGCONT")
	case fPartition:
		p := l
		if fs := followers(); len(fs) > 0 && sc.rng.IntN(3) == 0 {
			p = fs[sc.rng.IntN(len(fs))]
		}
		d := sc.cutLength()
		role := "follower"
		if p == l {
			role = "leader"
			// The leader's term is lost while "drain" runs: the cut
			// comes just after one of its runs started, which the
			// loss must end (SIGTERM, which the job traps) before
			// another leader can start a run.
			if waitFor(6*time.Second, func() bool { return sc.inFlight(l, "drain", 300*time.Millisecond) }) {
				role += " (drain just started)"
			}
		}
		p.slot.blackhole()
		sc.note(kind, p.id, "%s cut off from the backend for %v", role, d)
		time.Sleep(d)
		p.slot.heal()
		sc.note(kind+"-end", p.id, "healed")
	case fLatency:
		delay := time.Duration(50+sc.rng.IntN(250)) * time.Millisecond
		d := sc.ttlTimes(1, 2)
		slots := []*slot{l.slot}
		what := "leader's proxies"
		if sc.rng.IntN(2) == 0 {
			slots, what = sc.slots, "every proxy"
		}
		for _, s := range slots {
			s.setDelay(delay)
		}
		sc.note(kind, l.id, "%v per chunk each way on the %s for %v", delay, what, d)
		time.Sleep(d)
		for _, s := range slots {
			s.setDelay(0)
		}
		sc.note(kind+"-end", l.id, "no delay")
	case fReset:
		n := 2 + sc.rng.IntN(3)
		for i := range n {
			l.slot.reset()
			if i == n-1 {
				for _, s := range sc.slots {
					s.reset()
				}
			}
			time.Sleep(time.Duration(100+sc.rng.IntN(400)) * time.Millisecond)
		}
		sc.note(kind, l.id, "leader's connections reset %d times, then every node's", n)
	case fAppStop:
		sc.stopApp(l)
	case fBackendRestart:
		defer be.window()()
		sc.note(kind, be.name, "%s", be.restartKind)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := be.restart(ctx)
		cancel()
		if err != nil {
			sc.problem("backend restart: %v", err)
		}
		sc.note(kind+"-end", be.name, "back")
	default:
		for _, f := range be.faults {
			if f.kind != kind {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			end := be.window()
			err := f.run(ctx, sc, kind)
			end()
			cancel()
			if err != nil {
				sc.problem("%s: %v", kind, err)
			}
			return
		}
		sc.problem("unknown fault kind %q", kind)
	}
}

// kinds are the fault kinds of the scenario: the common ones, then the
// backend's own.
func (sc *scenario) kinds() []string {
	out := slices.Clone(faultKinds)
	if sc.lane > 0 {
		// The backend is the first lane's to fault.
		return slices.DeleteFunc(out, func(k string) bool { return k == fBackendRestart })
	}
	for _, f := range sc.be.faults {
		out = append(out, f.kind)
	}
	return out
}

// waitNewLeader waits for a node other than old to lead.
func (sc *scenario) waitNewLeader(old *proc) *proc {
	var l *proc
	waitFor(3*sc.be.crashBound+30*time.Second, func() bool {
		l, _ = sc.leader()
		return l != nil && l != old
	})
	if l == nil || l == old {
		sc.problem("no new leader after %s went away", old.id)
		return nil
	}
	return l
}

// variant changes what runScenario runs.
type variant struct {
	// label names the variant in the artifacts directory ("" for the
	// fault suite itself).
	label string
	// plan, if set, is the short profile's faults, in this order.
	plan []string
	// sidecar runs `baton run` sidecars calling HTTP jobs of an app
	// (sidecar_test.go) instead of `demo node` with shell jobs.
	sidecar bool
	// be, if set, is a backend shared with other lanes; lane and lanes
	// say which group of nodes this scenario is.
	be          *backend
	lane, lanes int
}

// runBackend runs the fault scenario on backend name: one group of nodes,
// or in the long profile prof.lanes groups at once on one backend, each
// with an election of its own, whose outcomes it merges.
func runBackend(t *testing.T, name string, prof profile, seed uint64) (string, *outcome) {
	lanes := prof.lanesOf(name)
	if lanes <= 1 {
		return runScenario(t, name, prof, seed, variant{})
	}
	dir, err := os.MkdirTemp("", "baton-e2e-"+name+"-backend-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("BATON_E2E_KEEP") == "1" {
			fmt.Printf("e2e %s: backend's data kept in %s\n", name, dir)
			return
		}
		os.RemoveAll(dir)
	})
	be := startBackend(t, name, dir)
	sums := make([]string, lanes)
	outs := make([]*outcome, lanes)
	var wg sync.WaitGroup
	for i := range lanes {
		// Not t.Parallel: the lanes must all run at once, whatever
		// the -parallel limit.
		wg.Go(func() {
			t.Run(fmt.Sprintf("lane%d", i+1), func(t *testing.T) {
				sums[i], outs[i] = runScenario(t, name, prof, seed, variant{be: be, lane: i, lanes: lanes})
			})
		})
	}
	wg.Wait()
	for _, o := range outs {
		if o == nil {
			return strings.Join(sums, ""), nil
		}
	}
	return strings.Join(sums, ""), mergeLanes(outs)
}

// runScenario runs the whole scenario on backend name and returns its
// summary and its outcome (nil if the scenario stopped before its check).
func runScenario(t *testing.T, name string, prof profile, seed uint64, v variant) (string, *outcome) {
	h := fnv.New64a()
	h.Write([]byte(name))
	sc := &scenario{t: t, prof: prof, seed: seed, rng: rand.New(rand.NewPCG(seed, h.Sum64()+uint64(v.lane))), counts: map[string]int{},
		lane: v.lane, lanes: max(v.lanes, 1), election: "e2e"}
	if sc.lanes > 1 {
		sc.election = fmt.Sprintf("e2e-%d", v.lane+1)
	}
	jobs := func(be *backend, sc *scenario) string { return jobsFile(be, sc.runsPath) }
	token := operatorToken
	if v.sidecar {
		token = ""
		sc.sidecar = &sidecar{}
		jobs = func(*backend, *scenario) string { return "# each sidecar has its own config: baton-N.yaml\n" }
	}
	label := v.label
	if sc.lanes > 1 {
		label = fmt.Sprintf("lane%d", v.lane+1)
	}
	startCluster(t, name, sc, clusterOpts{label: label, jobs: jobs, be: v.be, token: token})
	dir := sc.dir
	// Enforced unless BATON_E2E_AUDIT is report or 0 (audit_test.go).
	aud := sc.startAuditor()
	// Ticks are judged from the moment both jobs have run once: a new
	// leader catches up from a job's last claimed tick, and before the
	// first claim there is none.
	if !waitFor(30*time.Second, sc.bothJobsRan) {
		t.Fatalf("%s: the jobs did not both run within 30 s; logs in %s", name, dir)
	}
	from := time.Now()
	// The operator pauses, resumes and runs jobs now through the nodes'
	// HTTP API while the faults go on (operator_test.go).
	var op *operator
	if !v.sidecar {
		op = sc.startOperator()
	}

	// The faults: each type once in an order the seed picks (short), or
	// types picked at random until the duration has passed (long).
	var plan []string
	switch {
	case prof.name == "short" && v.plan != nil:
		plan = v.plan
	case prof.name == "short":
		plan = sc.kinds()
		sc.rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	}
	end := sc.started.Add(prof.duration)
	lastProgress := time.Now()
	var settled *proc // the leader the last settle found
	for i := 0; ; i++ {
		var kind string
		if prof.name == "short" {
			if i >= len(plan) {
				break
			}
			kind = plan[i]
		} else {
			if time.Now().After(end) {
				break
			}
			if time.Since(lastProgress) >= 5*time.Minute {
				lastProgress = time.Now()
				sc.mu.Lock()
				n := 0
				for k, c := range sc.counts {
					if k != fRestart {
						n += c
					}
				}
				fmt.Printf("e2e %s: %v of %v, %d faults injected, %d node processes so far\n", sc.label(),
					time.Since(sc.started).Round(time.Second), prof.duration, n, len(sc.procs))
				sc.mu.Unlock()
			}
			kinds := sc.kinds()
			kind = kinds[sc.rng.IntN(len(kinds))]
		}
		var l *proc
		if prof.name == "short" || settled == nil {
			if prof.name == "short" {
				sc.pause(500*time.Millisecond, 2*time.Second)
			}
			var ok bool
			if l, ok = sc.settle(time.Now()); !ok {
				break
			}
		} else {
			// The long profile is about the number of faults: the
			// next one starts on the leader that the last settle
			// found running a job after the last fault ended.
			l = settled
		}
		sc.inject(kind, l)
		var ok bool
		if settled, ok = sc.settle(time.Now()); !ok {
			break
		}
	}
	opSum := op.stop()
	time.Sleep(3 * time.Second)
	to := time.Now().Add(-1500 * time.Millisecond)
	sc.stopAll()
	sum := sc.check(from, to) + aud.compare(sc, from, to) + opSum
	if sc.sidecar != nil {
		sum += sc.checkAttempts() + fenceSummary(sc.runsPath) + sc.sidecar.appStopSummary()
	}
	return sum, sc.outcome
}

// stopAll stops every node gracefully, followers first, and kills what
// does not exit in time.
func (sc *scenario) stopAll() {
	l, _ := sc.leader()
	var order []*proc
	for _, p := range sc.live() {
		if p != l {
			order = append(order, p)
		}
	}
	for _, group := range [][]*proc{order, {l}} {
		for _, p := range group {
			if p != nil {
				_ = p.signal(syscall.SIGTERM)
			}
		}
		for _, p := range group {
			if p == nil {
				continue
			}
			select {
			case <-p.done:
			case <-time.After(30 * time.Second):
				sc.problem("%s still running 30 s after SIGTERM at the end: SIGKILL", p.id)
				sc.kill(p, "")
			}
		}
	}
	sc.note("info-stopped", sc.be.name, "every node stopped")
}

// cleanup kills whatever is left (after a t.Fatal).
func (sc *scenario) cleanup() {
	sc.mu.Lock()
	procs := slices.Clone(sc.procs)
	sc.mu.Unlock()
	for _, p := range procs {
		if p.alive() {
			_ = p.signal(syscall.SIGCONT)
			_ = p.signal(syscall.SIGKILL)
			<-p.done
		}
		p.stdin.Close()
	}
}
