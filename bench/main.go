// Command bench measures baton beside the tools users would otherwise
// pick (raw etcd concurrency.Election, consul api.Lock, client-go
// leaderelection, robfig/cron's runner, gocron v2) and writes a markdown
// report. Run it from bench/:
//
//	go run . -out ../docs/benchmarks.md
//
// Servers: an embedded etcd in a child process (this binary), a Consul dev
// agent (../.bin/consul, see tools/consul/build.sh), PostgreSQL and
// MariaDB on 127.0.0.1 (BATON_TEST_POSTGRES_DSN, BATON_TEST_MYSQL_DSN), a
// redis-server of its own (redis-server in PATH, on a free loopback port).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	goredis "github.com/redis/go-redis/v9"

	batonsql "github.com/batonhq/baton/backends/sql"
)

type options struct {
	out         string
	trials      int
	quick       bool
	only        map[string]bool
	latWindow   time.Duration // lateness window at 1,000 and 10,000 jobs
	latWindow1  time.Duration // lateness window at 1 job (one sample a second)
	idleWindow  time.Duration
	scaleN      int
	crashTrials int
	crashLanes  func(ttl time.Duration) int
	sqlLanes    int
	catchUpJobs int
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "etcd-child" {
		etcdChild(os.Args[2])
		return
	}
	mysql.SetLogger(log.New(io.Discard, "", 0)) // proxies closing connections under it is expected here
	goredis.SetLogger(discardRedisLog{})        // likewise: go-redis logs its pool's dial failures itself
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	var o options
	var only string
	flag.StringVar(&o.out, "out", "", "write the markdown report to this file (e.g. ../docs/benchmarks.md)")
	flag.IntVar(&o.trials, "trials", 50, "trials per figure")
	flag.BoolVar(&o.quick, "quick", false, "few trials and short windows, for development (not for publishing)")
	flag.StringVar(&only, "only", "", "comma-separated sections to run: lateness,handover,crash,idle,scale,ledger,accounting,tracing (default all)")
	var ledgerJobsFlag, ledgerBackendsFlag, cpuProfile string
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (this process: the hosts and clients, not the servers) to this file")
	flag.StringVar(&ledgerJobsFlag, "ledger-jobs", "", "comma-separated job counts for the ledger section (default 1,100,1000,10000)")
	flag.StringVar(&ledgerBackendsFlag, "ledger-backends", "", "comma-separated backends for the ledger section (default etcd,postgres,mariadb,consul,redis,kube)")
	flag.Parse()
	if ledgerJobsFlag != "" {
		ledgerJobs = nil
		for _, f := range strings.Split(ledgerJobsFlag, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("-ledger-jobs: %q is not a job count", f)
			}
			ledgerJobs = append(ledgerJobs, n)
		}
	}
	if ledgerBackendsFlag != "" {
		ledgerBackends = nil
		for _, f := range strings.Split(ledgerBackendsFlag, ",") {
			if _, ok := backendNames[strings.TrimSpace(f)]; !ok {
				return fmt.Errorf("-ledger-backends: unknown backend %q (etcd, postgres, mariadb, consul, redis, kube)", f)
			}
			ledgerBackends = append(ledgerBackends, strings.TrimSpace(f))
		}
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	o.only = map[string]bool{}
	for _, s := range strings.Split(only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.only[s] = true
		}
	}
	o.latWindow, o.latWindow1, o.idleWindow, o.scaleN, o.crashTrials, o.sqlLanes = 5*time.Second, time.Duration(o.trials)*time.Second, time.Minute, 50, o.trials, 8
	o.catchUpJobs = 10000
	o.crashLanes = func(ttl time.Duration) int {
		switch {
		case ttl <= 2*time.Second:
			return 10
		case ttl <= 5*time.Second:
			return 17
		default:
			return 25
		}
	}
	if o.quick {
		o.trials, o.latWindow, o.latWindow1, o.idleWindow, o.scaleN, o.crashTrials, o.sqlLanes = 5, 2*time.Second, 5*time.Second, 10*time.Second, 10, 4, 2
		o.crashLanes = func(time.Duration) int { return 2 }
		o.catchUpJobs = 1000
	}
	want := func(s string) bool { return len(o.only) == 0 || o.only[s] }

	began := time.Now()
	ctx := context.Background()
	// The tracing section needs etcd alone: with it alone, no other
	// server runs beside its trials.
	needAll := want("handover") || want("crash") || want("idle") || want("scale") || want("ledger") || want("accounting")
	needNet := needAll || want("tracing")
	r := &results{opts: o, began: began, machine: describeMachine(), load: [2]string{loadAvg()}}
	var e *env
	if needNet {
		var err error
		logf("starting servers")
		e, err = startEnv(ctx, needAll, needAll)
		if err != nil {
			return err
		}
		defer e.close()
		r.redisVersion = redisVersion()
	}

	if want("lateness") {
		for _, jobs := range []int{1, 1000, 10000} {
			for _, runner := range []string{"baton", "robfig", "gocron", "floor"} {
				w := o.latWindow
				if jobs == 1 {
					w = o.latWindow1
				}
				logf("lateness: %s, %d jobs, %v", runner, jobs, w)
				d, missing, err := latenessRun(runner, jobs, 2*time.Second, w)
				if err != nil {
					return err
				}
				r.lateness = append(r.lateness, latRow{runner: runner, jobs: jobs, d: d, missing: missing, window: w})
			}
		}
	}

	if want("handover") {
		for _, s := range handoverSystems(e) {
			logf("handover: %s", s.name)
			row := hoRow{sys: s}
			if s.name == cgName {
				row.d, row.err = handoverLanes(s, "ho-cg", o.trials, 10)
			} else {
				row.d, row.err = handover(s, "ho-"+slug(s.name), o.trials)
			}
			r.handover = append(r.handover, row)
		}
	}

	var wg sync.WaitGroup
	if want("idle") {
		for i, s := range idleSystems(e) {
			wg.Go(func() {
				res := idleLoad(s, fmt.Sprintf("idle-%d", i), 5*time.Second, o.idleWindow)
				r.mu.Lock()
				r.idle = append(r.idle, idleRow{sys: s, order: i, res: res})
				r.mu.Unlock()
			})
		}
	}
	if want("crash") {
		logf("crash failover and loss detection: all systems side by side")
		for i, s := range crashSystems(e) {
			lanes := o.crashLanes(s.ttl)
			if s.poll > 0 {
				lanes = o.sqlLanes
			}
			wg.Go(func() {
				res := crash(s, fmt.Sprintf("crash-%d", i), o.crashTrials, lanes)
				r.mu.Lock()
				r.crash = append(r.crash, crashRow{sys: s, order: i, res: res, lanes: lanes})
				r.mu.Unlock()
				logf("crash: %s done (%d trials)", s.name, res.failover.n())
			})
		}
	}
	wg.Wait()

	if want("scale") {
		time.Sleep(2 * time.Second)
		c0 := e.etcdCPU()
		time.Sleep(10 * time.Second)
		r.etcdBaseline = (e.etcdCPU() - c0) * 6
		for _, kind := range []string{"baton", "raw"} {
			logf("scale: %d %s candidates", o.scaleN, kind)
			r.scale = append(r.scale, scale(e, kind, o.scaleN, o.trials, 20*time.Second))
		}
	}

	if want("ledger") {
		for _, backend := range ledgerBackends {
			for _, jobs := range ledgerJobs {
				logf("ledger: %s, %d jobs", backend, jobs)
				row := ledgerTrial(e, backend, jobs, 2*time.Second, o.latWindow, noControl)
				if row.err != nil {
					logf("ledger: %s, %d jobs: %v", backend, jobs, row.err)
				}
				r.ledger = append(r.ledger, row)
			}
		}
		for _, jobs := range ledgerJobs {
			for _, runner := range []string{"baton", "floor"} {
				logf("ledger: %s without a ledger, %d jobs", runner, jobs)
				d, missing, err := latenessRun(runner, jobs, 2*time.Second, o.latWindow)
				if err != nil {
					return err
				}
				r.ledgerBase = append(r.ledgerBase, latRow{runner: runner, jobs: jobs, d: d, missing: missing, window: o.latWindow})
			}
		}
		for _, backend := range ledgerBackends {
			logf("ledger: catch-up of %d jobs on %s", o.catchUpJobs, backend)
			c := catchUpTrial(e, backend, o.catchUpJobs)
			if c.err != nil {
				logf("ledger: catch-up on %s: %v", backend, c.err)
			}
			r.catchUp = append(r.catchUp, c)
		}
	}

	if want("accounting") {
		r.acc = accountingSection(e, o)
	}

	if want("tracing") {
		r.trace = traceLateness(e, o)
	}

	r.took = time.Since(began)
	r.load[1] = loadAvg()
	md := r.markdown()
	fmt.Println(md)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(md), 0o644); err != nil {
			return err
		}
		logf("wrote %s", o.out)
	}
	return nil
}

// discardRedisLog is go-redis's process-wide logger here: it drops what
// go-redis prints outside the backend's Logger (pool dial failures after
// a proxy is closed under a client).
type discardRedisLog struct{}

func (discardRedisLog) Printf(context.Context, string, ...any) {}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func handoverSystems(e *env) []*system {
	return append([]*system{
		batonEtcd(e, 5*time.Second),
		rawEtcd(e, 5*time.Second),
		batonConsul(e, 10*time.Second),
		rawConsul(e, 10*time.Second),
		batonSQL(e, batonsql.Postgres, 5*time.Second),
		batonSQL(e, batonsql.MySQL, 5*time.Second),
		batonRedis(e, 5*time.Second),
		newClientGo(true),
	}, kubeSystems(e, kubeTTL)...)
}

// idleSystems are the handover systems whose requests the proxy can
// count: not the Kubernetes rows, whose TLS it passes through unread.
func idleSystems(e *env) []*system {
	var out []*system
	for _, s := range handoverSystems(e) {
		if s.proto != "tls" {
			out = append(out, s)
		}
	}
	return out
}

func crashSystems(e *env) []*system {
	var s []*system
	for _, ttl := range []time.Duration{2 * time.Second, 5 * time.Second, 10 * time.Second} {
		s = append(s, batonEtcd(e, ttl), rawEtcd(e, ttl))
	}
	s = append(s, batonConsul(e, 10*time.Second), rawConsul(e, 10*time.Second))
	for _, ttl := range []time.Duration{2 * time.Second, 5 * time.Second} {
		s = append(s, batonSQL(e, batonsql.Postgres, ttl), batonSQL(e, batonsql.MySQL, ttl))
	}
	s = append(s, batonRedis(e, 5*time.Second))
	s = append(s, kubeSystems(e, kubeTTL)...)
	return append(s, newClientGo(true), newClientGo(false))
}

// handoverLanes runs handover trials in independent elections side by
// side (for client-go, whose handover takes seconds by design).
func handoverLanes(s *system, prefix string, trials, lanes int) (dist, error) {
	var mu sync.Mutex
	var d dist
	var firstErr error
	inLanes(trials, lanes, func(l, n int) {
		dd, err := handover(s, fmt.Sprintf("%s-%d", prefix, l), n)
		mu.Lock()
		d.add(dd.s...)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	})
	return d, firstErr
}
