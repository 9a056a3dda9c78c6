// Package appcheck checks the health of the application beside a
// sidecar: a GET of its health URL (a 2xx answer is healthy), or a TCP
// connect to each of its job endpoints. It keeps a verdict with
// hysteresis: a healthy application turns unhealthy after UnhealthyAfter
// failed checks in a row, and an unhealthy one healthy after
// HealthyAfter good checks in a row. Before the first check the verdict
// is unhealthy ("not checked yet"); the first check decides alone.
//
// A check starts every Interval and gives up after Timeout, which is at
// most the Interval, so an application that hangs is judged unhealthy
// within UnhealthyAfter × Interval + Timeout.
package appcheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Defaults of the Config fields left zero. A zero Interval is the
// Timeout if that is longer, and a zero Timeout the Interval if that is
// shorter.
const (
	DefaultInterval       = time.Second
	DefaultTimeout        = time.Second
	DefaultUnhealthyAfter = 3
	DefaultHealthyAfter   = 2
)

// Config configures a Checker. Exactly one of URL and Addrs is set.
type Config struct {
	URL            string        // GET; a 2xx answer is healthy
	Addrs          []string      // host:port each; healthy when every one accepts a TCP connection
	Interval       time.Duration // a check starts this often
	Timeout        time.Duration // bound on one check; at most Interval
	UnhealthyAfter int           // failed checks in a row that make a healthy app unhealthy
	HealthyAfter   int           // good checks in a row that make an unhealthy app healthy
}

// State is the verdict and what it rests on, as /status shows it.
type State struct {
	Check     string    `json:"check"` // what is checked, e.g. "GET http://127.0.0.1:8081/healthz"
	Healthy   bool      `json:"healthy"`
	Since     time.Time `json:"since,omitzero"`   // when the verdict last changed; zero before the first check
	Reason    string    `json:"reason,omitempty"` // the last failure, while unhealthy
	Failures  int       `json:"failures"`         // failed checks in a row
	Successes int       `json:"successes"`        // good checks in a row
	Checked   time.Time `json:"checked,omitzero"` // the last check
}

// Why is the reason an unhealthy app gives for not campaigning, e.g.
// "app unhealthy: GET http://127.0.0.1:8081/healthz: connection refused
// (3 checks)"; "" when healthy.
func (s State) Why() string {
	if s.Healthy {
		return ""
	}
	if s.Checked.IsZero() {
		return "app unhealthy: " + s.Check + ": not checked yet"
	}
	if s.Failures == 0 {
		return fmt.Sprintf("app unhealthy: %s (then %d good %s)", s.Reason, s.Successes, plural(s.Successes, "check"))
	}
	return fmt.Sprintf("app unhealthy: %s (%d %s)", s.Reason, s.Failures, plural(s.Failures, "check"))
}

// Gate is the reason an instance does not campaign, "" when it may. It
// is stricter than the verdict: a healthy app whose last check failed
// is suspect, and an instance whose app may be down does not take over
// (a leader steps down only when the verdict turns, UnhealthyAfter
// failures in a row).
func (s State) Gate() string {
	if !s.Healthy {
		return s.Why()
	}
	if s.Failures > 0 {
		return fmt.Sprintf("app suspect: %s (%d failed %s in a row)", s.Reason, s.Failures, plural(s.Failures, "check"))
	}
	return ""
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// Checker runs the checks. Create it with New; call Run once.
type Checker struct {
	cfg    Config
	client *http.Client
	mu     sync.Mutex
	st     State
}

// New checks cfg, applies the defaults and returns a Checker. Errors name
// the field and the value.
func New(cfg Config) (*Checker, error) {
	var errs []error
	if (cfg.URL == "") == (len(cfg.Addrs) == 0) {
		errs = append(errs, errors.New("appcheck: set exactly one of URL and Addrs"))
	}
	for name, d := range map[string]time.Duration{"Interval": cfg.Interval, "Timeout": cfg.Timeout} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("appcheck: %s %v: must not be negative", name, d))
		}
	}
	for name, n := range map[string]int{"UnhealthyAfter": cfg.UnhealthyAfter, "HealthyAfter": cfg.HealthyAfter} {
		if n < 0 {
			errs = append(errs, fmt.Errorf("appcheck: %s %d: must not be negative", name, n))
		}
	}
	if cfg.Interval > 0 && cfg.Timeout > cfg.Interval {
		errs = append(errs, fmt.Errorf("appcheck: Timeout %v: longer than Interval %v: checks could not start every Interval, "+
			"and a hung application would be judged later than UnhealthyAfter × Interval + Timeout (want Timeout at most Interval)",
			cfg.Timeout, cfg.Interval))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	switch {
	case cfg.Interval == 0 && cfg.Timeout == 0:
		cfg.Interval, cfg.Timeout = DefaultInterval, DefaultTimeout
	case cfg.Interval == 0:
		cfg.Interval = max(DefaultInterval, cfg.Timeout)
	case cfg.Timeout == 0:
		cfg.Timeout = min(DefaultTimeout, cfg.Interval)
	}
	if cfg.UnhealthyAfter == 0 {
		cfg.UnhealthyAfter = DefaultUnhealthyAfter
	}
	if cfg.HealthyAfter == 0 {
		cfg.HealthyAfter = DefaultHealthyAfter
	}
	cfg.Addrs = append([]string(nil), cfg.Addrs...)
	check := "GET " + cfg.URL
	if cfg.URL == "" {
		check = "tcp " + strings.Join(cfg.Addrs, ", ")
	}
	tr := &http.Transport{DisableKeepAlives: true, Proxy: nil}
	return &Checker{cfg: cfg, client: &http.Client{Transport: tr, Timeout: cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		st: State{Check: check}}, nil
}

// Config returns the configuration with its defaults applied.
func (c *Checker) Config() Config { return c.cfg }

// State returns the current verdict. Any goroutine may call it.
func (c *Checker) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st
}

// Run checks at once, then every Interval, until ctx ends. It calls
// changed, on Run's goroutine, with the new state each time the verdict
// or the campaign gate (State.Gate) opens or closes, the first check
// included.
func (c *Checker) Run(ctx context.Context, changed func(State)) {
	tk := time.NewTicker(c.cfg.Interval)
	defer tk.Stop()
	for {
		err := c.check(ctx)
		if ctx.Err() != nil {
			return
		}
		if st, flipped := c.record(err, time.Now()); flipped && changed != nil {
			changed(st)
		}
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}

// record adds one check's outcome and reports whether the verdict
// changed.
func (c *Checker) record(err error, now time.Time) (State, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := &c.st
	first := st.Checked.IsZero()
	st.Checked = now
	was, wasOpen := st.Healthy, st.Healthy && st.Failures == 0
	if err != nil {
		st.Failures++
		st.Successes = 0
		st.Reason = err.Error()
		if first || (st.Healthy && st.Failures >= c.cfg.UnhealthyAfter) {
			st.Healthy = false
		}
	} else {
		st.Successes++
		st.Failures = 0
		if first || (!st.Healthy && st.Successes >= c.cfg.HealthyAfter) {
			st.Healthy = true
		}
	}
	if st.Healthy && st.Failures == 0 {
		st.Reason = ""
	}
	if first || st.Healthy != was {
		st.Since = now
		return *st, true
	}
	return *st, (st.Healthy && st.Failures == 0) != wasOpen
}

// check runs one check: nil when the app answered.
func (c *Checker) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	if c.cfg.URL == "" {
		var d net.Dialer
		for _, a := range c.cfg.Addrs {
			conn, err := d.DialContext(ctx, "tcp", a)
			if err != nil {
				return fmt.Errorf("tcp %s: %s", a, short(err, c.cfg.Timeout))
			}
			conn.Close()
		}
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.URL, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %v", c.cfg.URL, err)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %s", c.cfg.URL, short(err, c.cfg.Timeout))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("GET %s: HTTP %d", c.cfg.URL, resp.StatusCode)
	}
	return nil
}

// short is the part of a dial or request error a person needs:
// "connection refused", "no answer within 1s".
func short(err error, timeout time.Duration) string {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Sprintf("no answer within %v", timeout)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Sprintf("no answer within %v", timeout)
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err.Error()
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}
