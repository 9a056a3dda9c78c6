package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/batonhq/baton/e2e/internal/history"
	"github.com/batonhq/baton/internal/proxytest"
)

// event is one record of a node's JSON log, with the keys the suite reads.
type event struct {
	Time       time.Time       `json:"time"`
	Msg        string          `json:"msg"`
	Token      uint64          `json:"token"`
	Job        string          `json:"job"`
	Tick       time.Time       `json:"tick"`
	Err        string          `json:"err"`
	HTTP       string          `json:"http"`
	TermLength json.RawMessage `json:"term_length"` // the elector's record of a term's end: a duration in ns, or absent
	Last       time.Time       `json:"last_claimed"`
}

// logLevel is the nodes' log level: debug, for the catch-up's line on
// every job (noneMissedMsg), unless BATON_E2E_LOG_LEVEL says otherwise.
func logLevel() string {
	if lvl := os.Getenv("BATON_E2E_LOG_LEVEL"); lvl != "" {
		return lvl
	}
	return "debug"
}

// askedMsg is how a leader says that it asks again for a tick's claim
// whose answer was lost.
const askedMsg = "claim failed, asking again"

// missedMsg is how a new leader's catch-up says which ticks of a job it
// found missed, after the last claimed tick it read; noneMissedMsg (at
// Debug: the nodes run at debug level) that it found none. Every job
// with a claim has one of the two, so the checker never reads a claim
// from a line's absence.
const (
	missedMsg      = "missed ticks while nobody led"
	noneMissedMsg  = "no ticks missed while nobody led"
	noneClaimedMsg = "no tick of the job claimed yet: nothing to catch up"
)

// misfireMsgs are the messages with which a node says it did not start a
// tick (with job and tick), and why.
var misfireMsgs = map[string]bool{
	"tick skipped: previous run still going":                 true,
	"tick skipped: queue full":                               true,
	"run not started: claim failed":                          true,
	"run not started: claim refused":                         true,
	"claim refused: term is stale; stopping":                 true,
	"run not started: term over":                             true,
	"run not started: term stopping":                         true,
	"run not started: pause state unknown":                   true,
	"run not started: tick already claimed":                  true,
	"tick skipped: job paused":                               true,
	"run not started: term stopping during its jitter delay": true,
}

// steppedMsg is how a leader's schedule loop says that the wall clock
// stepped forward, with the gap it skipped over ("from", "to"): the ticks
// in it count as missed, under each job's misfire policy.
const steppedMsg = "wall clock stepped forward: the ticks it skipped over count as missed"

// notFiredMsg is how a term says that it ended before its schedule loop
// began, with each job's ticks from "first" through "until" not fired.
const notFiredMsg = "ticks not fired: the term ended before its schedule loop began"

// catchUpFailed is how a new leader says that it could not read the last
// claimed ticks of a page of jobs, which then have no catch-up run.
const catchUpFailed = "catch-up skipped: reading last claimed ticks failed"

// interesting are the messages kept in memory; the rest stays in the file.
var interesting = map[string]bool{
	"node started":        true,
	"acquired leadership": true,
	"stepping down":       true,
	"leadership lost: cancelled runs in flight": true,
	"lost leadership":                true,
	"released leadership":            true,
	"released leadership with error": true,
	catchUpFailed:                    true,
	"jobs reloaded":                  true,
	"retry not started: term over":   true,
	"run ended":                      true,
}

// runKey identifies a run: job, tick (unix seconds), token.
type runKey struct {
	job   string
	tick  int64
	token uint64
}

// tailer reads the lines appended to a file since its last call.
type tailer struct {
	path    string
	off     int64
	partial []byte
}

func (t *tailer) lines() [][]byte {
	f, err := os.Open(t.path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(t.off, io.SeekStart); err != nil {
		return nil
	}
	b, _ := io.ReadAll(f)
	t.off += int64(len(b))
	b = append(t.partial, b...)
	var out [][]byte
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			break
		}
		out = append(out, b[:i])
		b = b[i+1:]
	}
	t.partial = append([]byte(nil), b...)
	return out
}

// slot is one place in the cluster: its proxies to the backend (one per
// server the node talks to: one, or one per member of a clustered
// backend) and the node process currently using them (a restarted node is
// a new process with a new identity on the same slot).
type slot struct {
	i       int
	proxies []*proxytest.Proxy
	gen     int
	proc    *proc
	standby bool // its nodes run with --standby
}

// addrs are the addresses of the slot's proxies, in the order of the
// backend's targets.
func (s *slot) addrs() []string {
	out := make([]string, len(s.proxies))
	for i, p := range s.proxies {
		out[i] = p.Addr()
	}
	return out
}

// blackhole cuts the slot's node off from every server of the backend;
// heal ends it.
func (s *slot) blackhole() {
	for _, p := range s.proxies {
		p.Blackhole()
	}
}

func (s *slot) heal() {
	for _, p := range s.proxies {
		p.Heal()
	}
}

// setDelay delays every chunk each way on each of the slot's proxies.
func (s *slot) setDelay(d time.Duration) {
	for _, p := range s.proxies {
		p.SetDelay(d)
	}
}

// reset resets the connections of every proxy of the slot.
func (s *slot) reset() {
	for _, p := range s.proxies {
		p.Reset()
	}
}

// proc is one `demo node` process.
type proc struct {
	id      string
	slot    *slot
	cmd     *exec.Cmd
	stdin   io.Closer
	logPath string
	done    chan struct{} // closed when the process has exited

	mu         sync.Mutex
	tail       tailer
	events     []event // interesting ones, in order
	misfires   []history.Misfire
	lastClaims []history.LastClaim
	asked      []history.Misfire
	steps      []history.Step
	notFired   []history.NotFired
	lastRun    time.Time // last "run started"
	lastRunTok uint64
	runLogged  map[runKey]time.Time // "run started" records
	killedAt   time.Time
	frozen     bool
	exitErr    error
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// poll reads the new lines of the node's log.
func (p *proc) poll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	var cur uint64 // token of the term open at the line, for misfires
	for _, ev := range p.events {
		if ev.Msg == "acquired leadership" {
			cur = ev.Token
		}
	}
	for _, line := range p.tail.lines() {
		var ev event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil {
			continue
		}
		switch {
		case ev.Msg == "run started":
			p.lastRun, p.lastRunTok = ev.Time, ev.Token
			if p.runLogged == nil {
				p.runLogged = map[runKey]time.Time{}
			}
			p.runLogged[runKey{ev.Job, ev.Tick.Unix(), ev.Token}] = ev.Time
		case misfireMsgs[ev.Msg] && ev.Job != "" && !ev.Tick.IsZero():
			tok := ev.Token
			if tok == 0 {
				tok = cur
			}
			p.misfires = append(p.misfires, history.Misfire{Instance: p.id, Token: tok, Job: ev.Job, Tick: ev.Tick, At: ev.Time, Reason: ev.Msg})
		case ev.Msg == notFiredMsg && ev.Job != "":
			var span struct{ First, Until time.Time }
			if json.Unmarshal(line, &span) == nil {
				p.notFired = append(p.notFired, history.NotFired{Instance: p.id, Token: ev.Token, Job: ev.Job, First: span.First, Until: span.Until})
			}
		case ev.Msg == steppedMsg:
			var gap struct{ From, To time.Time }
			if json.Unmarshal(line, &gap) == nil {
				p.steps = append(p.steps, history.Step{Instance: p.id, Token: ev.Token, From: gap.From, To: gap.To})
			}
		case ev.Msg == askedMsg && ev.Job != "" && !ev.Tick.IsZero():
			p.asked = append(p.asked, history.Misfire{Instance: p.id, Token: ev.Token, Job: ev.Job, Tick: ev.Tick, At: ev.Time})
		case ev.Msg == noneClaimedMsg && ev.Job != "": // zero Tick: none claimed
			p.lastClaims = append(p.lastClaims, history.LastClaim{Instance: p.id, Token: ev.Token, Job: ev.Job})
		case (ev.Msg == missedMsg || ev.Msg == noneMissedMsg) && ev.Job != "" && !ev.Last.IsZero():
			p.lastClaims = append(p.lastClaims, history.LastClaim{Instance: p.id, Token: ev.Token, Job: ev.Job, Tick: ev.Last})
		case ev.Msg == catchUpFailed:
			// A page of jobs has no catch-up this term; the suite's
			// jobs all fit one page, so it is every job's (Job "").
			p.misfires = append(p.misfires, history.Misfire{Instance: p.id, Token: ev.Token, At: ev.Time, Reason: ev.Msg})
			p.events = append(p.events, ev)
		case interesting[ev.Msg]:
			if ev.Msg == "acquired leadership" {
				cur = ev.Token
			}
			p.events = append(p.events, ev)
		}
	}
}

// terms builds the node's terms from its log (call poll first). A term
// open when the node was killed stops at the kill.
func (p *proc) terms() []history.Term {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []history.Term
	var cur *history.Term
	var stepping, lost bool
	earlier := func(dst *time.Time, t time.Time) {
		if dst.IsZero() || t.Before(*dst) {
			*dst = t
		}
	}
	finish := func() {
		if cur != nil {
			out = append(out, *cur)
		}
		cur, stepping, lost = nil, false, false
	}
	for _, ev := range p.events {
		switch ev.Msg {
		case "acquired leadership":
			if cur != nil && cur.Token == ev.Token {
				continue // the SQL backend logs it too, just before the elector
			}
			finish()
			cur = &history.Term{Instance: p.id, Token: ev.Token, Start: ev.Time}
		case "stepping down":
			if cur != nil {
				stepping = true
				cur.SteppedDown = true
				earlier(&cur.Stop, ev.Time)
			}
		case "leadership lost: cancelled runs in flight":
			if cur != nil {
				lost = true
				earlier(&cur.Stop, ev.Time)
				earlier(&cur.Lost, ev.Time)
			}
		case "lost leadership", "released leadership", "released leadership with error":
			if cur == nil {
				continue
			}
			// The first of these is when the lease ended (the SQL backend
			// logs its release before the elector does); the elector's
			// own record, with "term_length", closes the term.
			earlier(&cur.End, ev.Time)
			if ev.Msg == "lost leadership" {
				lost = true
				earlier(&cur.Stop, ev.Time)
				earlier(&cur.Lost, ev.Time)
			}
			if len(ev.TermLength) == 0 {
				continue
			}
			cur.Graceful = ev.Msg == "released leadership" && stepping && !lost
			if !cur.Graceful {
				earlier(&cur.Stop, ev.Time)
			}
			finish()
		}
	}
	if cur != nil && !p.killedAt.IsZero() {
		cur.Killed = true
		earlier(&cur.Stop, p.killedAt)
	}
	finish()
	return out
}

// openTerm returns the node's term that is still open per its log.
func (p *proc) openTerm() (history.Term, bool) {
	if !p.alive() {
		return history.Term{}, false
	}
	ts := p.terms()
	if len(ts) == 0 {
		return history.Term{}, false
	}
	last := ts[len(ts)-1]
	if !last.Stop.IsZero() || !last.End.IsZero() {
		return history.Term{}, false
	}
	return last, true
}

func (p *proc) started() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ev := range p.events {
		if ev.Msg == "node started" {
			return true
		}
	}
	return false
}

func (p *proc) signal(sig syscall.Signal) error {
	return syscall.Kill(p.pid(), sig)
}

// startProc starts a node on slot s.
func (sc *scenario) startProc(s *slot) (*proc, error) {
	id := fmt.Sprintf("node-%d", s.i+1)
	if s.gen > 0 {
		if s.gen < 26 {
			id += string(rune('a' + s.gen))
		} else {
			id += fmt.Sprintf("-%d", s.gen+1)
		}
	}
	s.gen++
	logPath := fmt.Sprintf("%s/%s.log", sc.dir, id)
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var cmd *exec.Cmd
	if sc.sidecar != nil {
		cfg, err := sc.sidecarConfig(s)
		if err != nil {
			return nil, err
		}
		// Everything but the identity comes from the config file.
		args := append([]string{"run", "--config", cfg, "--id", id, "--stop-on-stdin-eof"}, sc.extraArgs...)
		cmd = exec.Command(batonBin, args...)
	} else {
		args := append([]string{"node"}, sc.be.args(s.addrs())...)
		args = append(args, "--election", sc.election, "--id", id, "--config", sc.jobsPath, "--http", "127.0.0.1:0",
			"--log-format", "json", "--stop-on-stdin-eof")
		args = append(args, "--log-level", logLevel())
		if s.standby {
			args = append(args, "--standby")
		}
		args = append(args, sc.extraArgs...)
		cmd = exec.Command(demoBin, args...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = sc.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The node stops gracefully when this pipe closes, however the test
	// process ends.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{id: id, slot: s, cmd: cmd, stdin: stdin, logPath: logPath, done: make(chan struct{}), tail: tailer{path: logPath}}
	go func() { // owned by the proc: the scenario waits on done before it returns
		err := cmd.Wait()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(p.done)
	}()
	sc.mu.Lock() // live() reads s.proc from the operator's goroutine too
	s.proc = p
	sc.procs = append(sc.procs, p)
	sc.mu.Unlock()
	return p, nil
}
