package main

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestMarkdown_ExplainsOnce renders a report in which two targets of each
// of three kinds are not met. Each kind's explanation must be printed
// once, under a heading of its own, and each of its targets must link to
// that heading.
func TestMarkdown_ExplainsOnce(t *testing.T) {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	one := func(v time.Duration) dist { return dist{s: []time.Duration{v}} }
	r := &results{}
	for _, jobs := range []int{1000, 10000} {
		r.lateness = append(r.lateness,
			latRow{runner: "baton", jobs: jobs, d: one(ms(30))},
			latRow{runner: "robfig", jobs: jobs, d: one(ms(20))})
		r.ledger = append(r.ledger, ledRow{backend: "etcd", jobs: jobs, batch: 124, d: one(ms(500)),
			claimWrites: 9, finishCalls: 11, cpu: ms(50)})
		r.ledgerBase = append(r.ledgerBase,
			latRow{runner: "baton", jobs: jobs, d: one(ms(29))},
			latRow{runner: "floor", jobs: jobs, d: one(ms(11))})
	}
	md := r.markdown()

	headings := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ (.*)$`).FindAllStringSubmatch(md, -1) {
		headings[anchor(m[1])] = true
	}
	links := regexp.MustCompile(`\]\(#([^)]*)\)`).FindAllStringSubmatch(md, -1)
	for _, l := range links {
		if !headings[l[1]] {
			t.Errorf("link to #%s: no such heading", l[1])
		}
	}
	for _, key := range []string{"lateness", "ledger", "no-ledger"} {
		e := explanations[key]
		if n := strings.Count(md, e.text); n != 1 {
			t.Errorf("%s: explanation printed %d times, want 1", key, n)
		}
		if n := strings.Count(md, "\n### "+e.title+"\n"); n != 1 {
			t.Errorf("%s: heading printed %d times, want 1", key, n)
		}
		if n := strings.Count(md, "(#"+anchor(e.title)+")"); n != 2 {
			t.Errorf("%s: %d links to it, want 2 (one per target)", key, n)
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", md)
	}
}

func TestAnchor(t *testing.T) {
	for in, want := range map[string]string{
		"Lateness with the ledger":  "lateness-with-the-ledger",
		"The Host without a ledger": "the-host-without-a-ledger",
		"2. Crash failover":         "2-crash-failover",
	} {
		if got := anchor(in); got != want {
			t.Errorf("anchor(%q) = %q, want %q", in, got, want)
		}
	}
}
