package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/e2e/internal/history"
)

// fAppStop kills the application beside the leading sidecar (SIGKILL),
// then starts it again on its port: the sidecar should step down and a
// sidecar whose app answers lead (issue 28, finding 4).
const fAppStop = "app-stop"

// appHealthYAML is the sidecar's configuration of its app's health URL,
// written into each sidecar's config: a leader whose app stops answering
// steps down, and one that still leads after the bound is a problem.
const appHealthYAML = "app:\n  health_url: %s\n"

// stopApp kills l's app, waits for another sidecar to lead, and starts
// the app again. The ticks of l's term while its app was down fail;
// they are accounted for as such (sidecar.appDown).
func (sc *scenario) stopApp(l *proc) {
	sd, be := sc.sidecar, sc.be
	tm, _ := l.openTerm()
	sd.mu.Lock()
	a := sd.apps[l.slot.i]
	sd.mu.Unlock()
	if a == nil {
		sc.problem("%s: no app on slot %d", fAppStop, l.slot.i+1)
		return
	}
	// Between the app's runs: a request the app took before its death
	// has a start line and no end, and the drain check would count it.
	// One moment must hold both: no run of nap or slow in flight, and
	// mid-second 1 to 3 s after a nap tick (nap every 5 s, tick every
	// second and done in milliseconds), so that no tick falls between
	// the look and the kill. slow runs 3 s of every 4: such a moment
	// comes at least every 12 s.
	if !waitFor(30*time.Second, func() bool {
		now := time.Now()
		sec, ms := now.Unix()%5, now.Nanosecond()/int(time.Millisecond)
		return sec >= 1 && sec <= 3 && ms >= 300 && ms <= 650 &&
			!sc.inFlight(l, "nap", 3*time.Second) && !sc.inFlight(l, "slow", 4*time.Second)
	}) {
		sc.note("info-"+fAppStop, l.id, "no moment without a run of nap or slow in flight in 30 s")
	}
	from := time.Now()
	a.stop()
	sc.note(fAppStop, l.id, "its app killed (port %d)", a.port)
	// A healthy instance should lead within a crash failover and the
	// time to see the app down (a TTL at most, say).
	bound := be.crashBound + be.ttl
	var nl *proc
	led := waitFor(bound+5*time.Second, func() bool {
		nl, _ = sc.leader()
		return nl != nil && nl != l
	})
	took := time.Since(from)
	var what string
	if led {
		what = fmt.Sprintf("%s led %v after %s's app was killed (bound %v)", nl.id, took.Round(time.Millisecond), l.id, bound)
		if took > bound {
			sc.problem("%s", what+": too slow")
		}
	} else {
		what = fmt.Sprintf("%s still led %v after its app was killed; no healthy instance took over", l.id, took.Round(time.Millisecond))
		sc.problem("%s", what)
	}
	sc.note("info-"+fAppStop, l.id, "%s", what)
	na, err := sc.startApp(l.slot.i, a.port)
	if err != nil {
		sc.problem("%s: restarting the app of slot %d: %v", fAppStop, l.slot.i+1, err)
	}
	to := time.Now()
	sc.note(fAppStop+"-end", l.id, "app started again on port %d", a.port)
	sd.mu.Lock()
	if na != nil {
		sd.apps[l.slot.i] = na
	}
	sd.stops = append(sd.stops, what)
	// Every tick of the sidecar's jobs with a schedule the checker judges
	// (tick every second, nap every 5 s) in the span, on l's term.
	for t := from.Truncate(time.Second); !t.After(to.Add(slack)); t = t.Add(time.Second) {
		jobs := []string{"tick"}
		if t.Unix()%5 == 0 {
			jobs = append(jobs, "nap")
		}
		for _, j := range jobs {
			sd.appDown = append(sd.appDown, history.Misfire{Instance: l.id, Token: tm.Token, Job: j, Tick: t.UTC(), At: t,
				Reason: "the leader's app was down"})
		}
	}
	sd.mu.Unlock()
}

// appStopSummary is the summary's line on the apps stopped under their
// leaders.
func (sd *sidecar) appStopSummary() string {
	sd.mu.Lock()
	defer sd.mu.Unlock()
	out := ""
	for _, s := range sd.stops {
		out += fmt.Sprintf("    app stopped under the leader: %s\n", s)
	}
	return out
}

// fenceSummary counts the side effects of the sidecar job "slow" in the
// run log at path: applied ("X") and refused by the fence ("R": a later
// term's request had reached an app first).
func fenceSummary(path string) string {
	applied, refused := 0, 0
	for _, l := range readLines(path) {
		switch {
		case strings.HasPrefix(l, "X slow "):
			applied++
		case strings.HasPrefix(l, "R slow "):
			refused++
		}
	}
	return fmt.Sprintf("    sidecar job slow (ignores the disconnect, fenced write): %d side effects applied, %d refused for a stale token\n", applied, refused)
}

func TestFenceSummary(t *testing.T) {
	p := filepath.Join(t.TempDir(), "runs.log")
	log := "S slow 2026-11-26T20:00:00Z 5 n1 1 0\nX slow 2026-11-26T20:00:00Z 5 n1 2 applied\n" +
		"R slow 2026-11-26T20:00:04Z 5 n1 3 stale\nX slowly 2026-11-26T20:00:04Z 5 n1 3 applied\n"
	if err := os.WriteFile(p, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := fenceSummary(p); !strings.Contains(got, ": 1 side effects applied, 1 refused") {
		t.Errorf("%q", got)
	}
}
