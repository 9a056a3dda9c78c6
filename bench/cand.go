package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/batonhq/baton/backends/consul"
	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/backends/redis"
	batonsql "github.com/batonhq/baton/backends/sql"
	batonmysql "github.com/batonhq/baton/backends/sql/mysql"
	"github.com/batonhq/baton/backends/sql/postgres"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/schedulerhost"
)

// cand is one candidate instance (what would be one process) of some
// system under test. Times are recorded by the candidate itself, on the
// goroutine where the event happens.
type cand struct {
	id string

	ledOnce, lostOnce, runOnce sync.Once
	led, lost, running         chan struct{}
	ledAt, lostAt              time.Time

	proxy *countProxy // nil when connected directly
	// cutFn and countFn replace the proxy's Blackhole and Counts for
	// candidates that have no network (client-go on its in-memory lock).
	cutFn   func()
	countFn func() map[string]int64

	// stop asks the instance to stop gracefully (SIGTERM) and blocks until
	// it has released and stopped.
	stop func()
	// kill tears the instance down after a cut, without letting anything
	// it still has to say reach the server (the proxy drops held bytes).
	kill func()
}

func newCand(id string) *cand {
	return &cand{id: id, led: make(chan struct{}), lost: make(chan struct{}), running: make(chan struct{})}
}

// closeProxy closes the candidate's proxy, if it has one.
func (c *cand) closeProxy() {
	if c.proxy != nil {
		c.proxy.Close()
	}
}

func (c *cand) markLed() {
	c.ledOnce.Do(func() { c.ledAt = time.Now(); close(c.led) })
}

func (c *cand) markLost() {
	c.lostOnce.Do(func() { c.lostAt = time.Now(); close(c.lost) })
}

func (c *cand) markRunning() { c.runOnce.Do(func() { close(c.running) }) }

// cut blackholes the candidate's connection to the backend: a crash as
// the backend sees it (no release, no more renewals), while the process
// goes on, so that its own loss detection can be timed.
func (c *cand) cut() {
	if c.cutFn != nil {
		c.cutFn()
		return
	}
	c.proxy.Blackhole()
}

// counts returns the requests this candidate has sent so far, by kind.
func (c *cand) counts() map[string]int64 {
	if c.countFn != nil {
		return c.countFn()
	}
	return c.proxy.Counts()
}

// system makes candidates of one election implementation.
type system struct {
	name  string
	proto string // countProxy protocol
	ttl   time.Duration
	// hasJob: the candidate runs a job while leading (baton), so loss
	// detection is the job's context being cancelled.
	hasJob bool
	// poll is a follower's poll interval, if it polls.
	poll time.Duration
	// spread is the random part of the settle time before a graceful
	// stop: the period of whatever timer the waiting instance looks at
	// the backend by (poll interval, client-go's retry period with its
	// jitter), so that the stop falls at a random phase of it.
	spread time.Duration
	// target is the server address.
	target string
	// start starts a candidate in election lane, connected through p
	// (when not nil) or directly to target. mode says which job the
	// leader runs: "idle" (none due) or "hold" (one that runs until
	// cancelled).
	start func(c *cand, lane, addr, mode string) error
}

// launch creates and starts a candidate; viaProxy puts a countProxy in
// front of its connection.
func (s *system) launch(lane, id, mode string, viaProxy bool) (*cand, error) {
	c := newCand(id)
	addr := s.target
	if viaProxy && s.proto != "" {
		p, err := newCountProxy(s.target, s.proto)
		if err != nil {
			return nil, err
		}
		c.proxy, addr = p, p.Addr()
	}
	if err := s.start(c, lane, addr, mode); err != nil {
		c.closeProxy()
		return nil, fmt.Errorf("%s: start %s: %w", s.name, id, err)
	}
	return c, nil
}

// batonRun runs an Elector with a Host on b until ctx ends; it fills c's
// stop and kill.
func batonRun(c *cand, b election.Backend, mode string, cleanup func()) error {
	job := schedulerhost.Job{Name: "idle", Schedule: "@every 1h", Run: func(context.Context) error { return nil }}
	if mode == "hold" {
		job = schedulerhost.Job{Name: "hold", Schedule: "* * * * * *", Run: func(ctx context.Context) error {
			c.markRunning()
			<-ctx.Done()
			if errors.Is(context.Cause(ctx), election.ErrLeadershipLost) {
				c.markLost()
			}
			return ctx.Err()
		}}
	}
	host, err := schedulerhost.New(schedulerhost.Config{Jobs: []schedulerhost.Job{job}, Logger: quiet, ShutdownTimeout: 5 * time.Second, KillGrace: time.Second})
	if err != nil {
		return err
	}
	el, err := election.New(election.Config{Backend: b, Identity: election.Identity{ID: c.id}, Logger: quiet})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		el.Run(ctx, func(ctx context.Context, term election.Term) error {
			c.markLed()
			return host.Lead(ctx, term)
		})
	}()
	c.stop = func() {
		cancel()
		<-done
		cleanup()
		c.closeProxy()
	}
	c.kill = func() {
		cancel()
		c.closeProxy()
		go func() { <-done; cleanup() }()
	}
	return nil
}

func batonEtcd(e *env, ttl time.Duration) *system {
	return &system{name: fmt.Sprintf("baton etcd (TTL %v)", ttl), proto: "h2", ttl: ttl, hasJob: true, target: e.etcdAddr,
		start: func(c *cand, lane, addr, mode string) error {
			cli, err := e.etcdClient(addr)
			if err != nil {
				return err
			}
			b, err := etcd.New(etcd.Config{Client: cli, Prefix: "/bench/" + lane, Timing: election.Timing{TTL: ttl}, Logger: quiet})
			if err != nil {
				cli.Close()
				return err
			}
			return batonRun(c, b, mode, func() { cli.Close() })
		}}
}

func batonConsul(e *env, ttl time.Duration) *system {
	return &system{name: fmt.Sprintf("baton Consul (TTL %v)", ttl), proto: "http", ttl: ttl, hasJob: true, target: e.consul.HTTPAddr,
		start: func(c *cand, lane, addr, mode string) error {
			cli, err := e.consul.Client(addr)
			if err != nil {
				return err
			}
			b, err := consul.New(consul.Config{Client: cli, Key: "bench/" + lane + "/leader", Timing: election.Timing{TTL: ttl}, Logger: quiet})
			if err != nil {
				return err
			}
			return batonRun(c, b, mode, func() {})
		}}
}

func batonSQL(e *env, d batonsql.Dialect, ttl time.Duration) *system {
	s := &system{ttl: ttl, hasJob: true, poll: batonsql.DefaultPollInterval, spread: batonsql.DefaultPollInterval}
	if d == batonsql.Postgres {
		s.name, s.proto, s.target = fmt.Sprintf("baton PostgreSQL (TTL %v)", ttl), "pg", e.pgTarget()
	} else {
		s.name, s.proto, s.target = fmt.Sprintf("baton MariaDB (TTL %v)", ttl), "mysql", e.myCfg.Addr
	}
	s.start = func(c *cand, lane, addr, mode string) error {
		var db *sql.DB
		var err error
		var drv batonsql.Driver
		cfg := batonsql.Config{Table: e.sqlTable, Election: lane, Timing: election.Timing{TTL: ttl}, Logger: quiet}
		if d == batonsql.Postgres {
			db, err = e.openPG(addr)
			drv = postgres.Driver(e.pgListen(addr))
		} else {
			db, err = e.openMy(addr)
			drv = batonmysql.Driver()
		}
		if err != nil {
			return err
		}
		cfg.DB = db
		b, err := batonsql.New(cfg, drv)
		if err != nil {
			db.Close()
			return err
		}
		return batonRun(c, b, mode, func() { db.Close() })
	}
	return s
}

// batonRedis is baton on the bench's redis-server. A waiting instance is
// woken by the election's pub/sub channel and otherwise tries to acquire
// every RenewInterval (TTL/3), so the handover's stop falls at a random
// phase of that period (spread).
func batonRedis(e *env, ttl time.Duration) *system {
	return &system{name: fmt.Sprintf("baton Redis (TTL %v)", ttl), proto: "redis", ttl: ttl, hasJob: true, spread: redisRenew(ttl), target: e.redis.Addr(),
		start: func(c *cand, lane, addr, mode string) error {
			b, err := redis.New(redis.Config{Addr: addr, Election: "bench/" + lane, Timing: election.Timing{TTL: ttl}, Logger: quiet})
			if err != nil {
				return err
			}
			return batonRun(c, b, mode, func() { b.Close() })
		}}
}

// redisRenew is the Redis backend's default RenewInterval at ttl: the
// period of a leader's renewals and of a waiting instance's acquire
// attempts.
func redisRenew(ttl time.Duration) time.Duration {
	return election.Timing{TTL: ttl}.WithDefaults(redis.DefaultTTL).RenewInterval
}

// rawEtcd is concurrency.Election on a concurrency.Session, used as its
// docs show: Campaign, lead until stopped, Resign, close the session.
// Loss is the session's Done channel.
func rawEtcd(e *env, ttl time.Duration) *system {
	return &system{name: fmt.Sprintf("raw concurrency.Election (TTL %v)", ttl), proto: "h2", ttl: ttl, target: e.etcdAddr,
		start: func(c *cand, lane, addr, mode string) error {
			cli, err := e.etcdClient(addr)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				defer cli.Close()
				sess, err := concurrency.NewSession(cli, concurrency.WithTTL(int(ttl/time.Second)), concurrency.WithContext(ctx))
				if err != nil {
					return
				}
				defer sess.Close()
				el := concurrency.NewElection(sess, "/bench-raw/"+lane)
				if err := el.Campaign(ctx, c.id); err != nil {
					return
				}
				c.markLed()
				select {
				case <-sess.Done():
					c.markLost()
					<-ctx.Done()
				case <-ctx.Done():
				}
				rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
				el.Resign(rctx)
				rcancel()
			}()
			c.stop = func() {
				cancel()
				<-done
				c.closeProxy()
			}
			c.kill = func() {
				cancel()
				c.closeProxy()
			}
			return nil
		}}
}

// rawConsul is api.Lock with a 10 s session TTL and a 1 ms lock-delay
// (the defaults are 15 s and 15 s), the rest at its defaults.
func rawConsul(e *env, ttl time.Duration) *system {
	return &system{name: fmt.Sprintf("raw consul api.Lock (TTL %v, LockDelay 1ms)", ttl), proto: "http", ttl: ttl, target: e.consul.HTTPAddr,
		start: func(c *cand, lane, addr, mode string) error {
			cli, err := e.consul.Client(addr)
			if err != nil {
				return err
			}
			lock, err := cli.LockOpts(&api.LockOptions{Key: "bench/" + lane + "/rawlock",
				SessionOpts: &api.SessionEntry{Name: "bench " + c.id, TTL: ttl.String(), LockDelay: time.Millisecond, Behavior: api.SessionBehaviorRelease}})
			if err != nil {
				return err
			}
			stopCh := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				lost, err := lock.Lock(stopCh)
				if err != nil || lost == nil {
					return
				}
				c.markLed()
				select {
				case <-lost:
					c.markLost()
					<-stopCh
				case <-stopCh:
				}
				lock.Unlock()
			}()
			c.stop = func() {
				close(stopCh)
				<-done
				c.closeProxy()
			}
			c.kill = func() {
				close(stopCh)
				c.closeProxy()
			}
			return nil
		}}
}
