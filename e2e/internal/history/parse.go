package history

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// runLine is one parsed line of a run log.
type runLine struct {
	job      string
	tick     time.Time
	token    uint64
	instance string
	at       time.Time
	last     string // catch-up flag ("S") or status ("E")
	line     int
}

// parseRunLines reads the lines of rd that start with kind: "<kind> <job>
// <tick RFC3339> <token> <instance> <unix ns> <last>", each made a T by
// conv.
func parseRunLines[T any](rd io.Reader, kind, atName string, conv func(runLine) T) ([]T, error) {
	out := []T{}
	sc := bufio.NewScanner(rd)
	n := 0
	for sc.Scan() {
		n++
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != kind {
			continue
		}
		if len(f) != 7 {
			return nil, fmt.Errorf("run log line %d: %d fields, want 7: %q", n, len(f), sc.Text())
		}
		tick, err := time.Parse(time.RFC3339Nano, f[2])
		if err != nil {
			return nil, fmt.Errorf("run log line %d: tick: %w", n, err)
		}
		tok, err := strconv.ParseUint(f[3], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("run log line %d: token: %w", n, err)
		}
		ns, err := strconv.ParseInt(f[5], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("run log line %d: %s: %w", n, atName, err)
		}
		out = append(out, conv(runLine{job: f[1], tick: tick, token: tok, instance: f[4], at: time.Unix(0, ns), last: f[6], line: n}))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// ParseRunLog reads the lines jobs append: "S <job> <tick RFC3339> <token>
// <instance> <start unix ns> <catch-up>" at the start of a run, and "E
// ..." lines at the end (ignored here). The last field of a start is 0,
// or for a catch-up run 1 or the first missed tick it stands for (RFC
// 3339: BATON_CATCH_UP_FROM), or for a run now its request's id (or "-").
func ParseRunLog(rd io.Reader) ([]Start, error) {
	return parseRunLines(rd, "S", "start", func(l runLine) Start {
		s := Start{Job: l.job, Tick: l.tick, Token: l.token, Instance: l.instance, At: l.at, CatchUp: l.last == "1", Line: l.line}
		if from, err := time.Parse(time.RFC3339Nano, l.last); err == nil {
			s.CatchUp, s.CatchUpFrom = true, from
		} else if l.last != "0" && l.last != "1" && l.last != "-" {
			s.Request = l.last
		}
		return s
	})
}

// ParseEnds reads the "E <job> <tick RFC3339> <token> <instance> <end unix
// ns> <status>" lines of a run log.
func ParseEnds(rd io.Reader) ([]End, error) {
	return parseRunLines(rd, "E", "end", func(l runLine) End {
		return End{Job: l.job, Tick: l.tick, Token: l.token, Instance: l.instance, At: l.at, Line: l.line}
	})
}
