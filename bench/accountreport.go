package main

import (
	"fmt"
	"strings"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/audit"
	"github.com/batonhq/baton/schedulerhost"
)

// accResults are the accounting section's figures.
type accResults struct {
	reads    []accReadRow
	worst    int // the stored size of the largest Account
	worstErr error
	follow   []accFollowRow
	lateness []accLateRow
	// sideBySide: the followers' minutes ran beside the audits' reads.
	sideBySide bool
}

func fmtBytes(n int64) string {
	switch {
	case n >= 10<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 10<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// kindsStr is a request count by kind: "12 (11 read, 1 other)".
func kindsStr(m map[string]int64) string {
	var total int64
	var parts []string
	for _, k := range kinds {
		if m[k] > 0 {
			total += m[k]
			parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", total, strings.Join(parts, ", "))
}

func (r *results) accountingMarkdown(w func(string, ...any)) {
	a := r.acc
	if a == nil {
		return
	}
	w("\n## 8. The tick accounting's cost\n\n")
	if len(a.reads) > 0 {
		r.accReadsMarkdown(w)
	}
	if len(a.lateness) > 0 {
		r.accLatenessMarkdown(w)
	}
	if len(a.follow) > 0 {
		r.accFollowMarkdown(w)
	}
}

func (r *results) accReadsMarkdown(w func(string, ...any)) {
	a := r.acc
	w("### Reads and bytes of an audit\n\n")
	w("Each job is on `%s` (every minute). Its Account (package `audit`, key `audit/<job>` in the control store) holds a typical day, written with `audit.Save` unfenced (Token 0), 16 writes at a time: its 1,440 ticks in ten ranges (two terms of two instances, two failed runs and a timeout, the tick in flight at the failover lost, two ticks missed while nobody led). One job also has %d ledger entries (its last %d ticks, claimed and finished in a real term). A `schedulerhost.Host` with the jobs that never leads (a follower, with the backend's `Leader` read as `baton.New` gives it) then calls `Host.Audit` of that job over the last 24 h, and of every job; its requests and the bytes the server sent are counted at the proxy. ", everyMinute, schedulerhost.AbsenceHistory, schedulerhost.AbsenceHistory)
	if a.worstErr == nil {
		w("An Account takes %s stored at its largest: it is fitted within `audit.MaxBytes` (%s) by folding its oldest ranges into counts (the largest measured here: ranges of alternate ok and failed ticks, each failure with an error of `audit.MaxError` bytes). ", fmtBytes(int64(a.worst)), fmtBytes(audit.MaxBytes))
	}
	w("Kubernetes is not in the table: the proxy passes its TLS uncounted, and its accounts' ConfigMap (768 KiB) holds about 500 typical accounts, 90 of the largest.\n\n")
	w("| Backend | Jobs | Account stored | writing them | one job's audit: requests | bytes | took | every job's audit: requests | bytes | took | with %d entries per job (est.) |\n|---|---|---|---|---|---|---|---|---|---|---|\n", schedulerhost.AbsenceHistory)
	var summary string
	var oneReads int64
	for _, l := range a.reads {
		if l.err != nil {
			w("| %s | %d | | | error: %v | | | | | | |\n", backendNames[l.backend], l.jobs, l.err)
			continue
		}
		if summary == "" {
			summary, oneReads = l.summary, l.one.total()
		}
		est := l.all.bytes + int64(l.jobs-1)*(l.histFull-l.histEmpty)
		w("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", backendNames[l.backend], l.jobs, fmtBytes(int64(l.acctBytes)), fmtDur(l.fill),
			kindsStr(l.one.requests), fmtBytes(l.one.bytes), fmtDur(l.one.took),
			kindsStr(l.all.requests), fmtBytes(l.all.bytes), fmtDur(l.all.took), fmtBytes(est))
	}
	if summary != "" {
		w("\nThe one job's report: %s. ", summary)
	}
	if oneReads > 0 {
		w("An audit of one job made %d requests: its Account, the terms, who leads (the leader's lease, for its note of refused claims) and its History; of J jobs, J + 3 (docs/operations.md). ", oneReads)
	}
	if big, ok := slowestAll(a.reads); ok {
		w("Every job's audit reads the jobs' histories one after another: at %d jobs on %s it took %s; an absence round with as many jobs with a deadline reads as many histories the same way, every %v by default. ", big.jobs, backendNames[big.backend], fmtDur(big.all.took), baton.DefaultAbsencePollInterval)
	}
	w("One job's audit reads its Account alone, whatever the job count: its key closes with \"/\" (`audit.Key`), so the List of it (`audit.Load`) returns no other job's (job-70, job-700, ...). ")
	w("Only the one job has ledger entries: the last column adds, for every other job, the bytes of a History read of %d entries less those of an empty one, measured on the same backend.\n\n", schedulerhost.AbsenceHistory)
}

func (r *results) accFollowMarkdown(w func(string, ...any)) {
	a := r.acc
	w("### A follower's reads per minute\n\n")
	w("A `baton.New` instance with J every-minute jobs, each with a deadline, runs as a follower (another candidate holds the lease on a connection of its own) with the default intervals: the absence poll every %v and the audit poll every %v. Its requests are counted at the proxy over a minute, from 7 s after its start: six absence rounds and one audit round, each whole inside it. docs/operations.md states 6 × (J + 3) + (J + 3) reads a minute for it: each absence round reads who leads, the pauses, the accounts and each job's history; the audit round the accounts, the terms, who leads and each job's history. Writes are its entry in the registry of instances; blocking and renew requests are its campaign (a watch, a keepalive), and on the SQL backends so are some reads: a follower asks for the lease every PollInterval (1 s).%s\n\n", baton.DefaultAbsencePollInterval, baton.DefaultAuditPollInterval, sideNote(a.sideBySide))
	w("| Backend | Jobs | reads / min | documented | writes | blocking | renew | other | bytes / min |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, f := range a.follow {
		if f.err != nil {
			w("| %s | %d | error: %v | | | | | | |\n", backendNames[f.backend], f.jobs, f.err)
			continue
		}
		w("| %s | %d | %d | %d | %d | %d | %d | %d | %s |\n", backendNames[f.backend], f.jobs, f.counts[kRead], formulaReads(f.jobs),
			f.counts[kWrite], f.counts[kBlocking], f.counts[kRenew], f.counts[kOther], fmtBytes(f.bytes))
	}
	w("\nEvery absence round reads every job's Account (its check of the newest ok tick), so a follower's bytes a minute grow with J times the Account's size: %s stored per job here, at most %s.\n\n", fmtBytes(int64(typicalSize(a.reads))), fmtBytes(audit.MaxBytes))
}

// typicalSize is the stored size of a typical Account, from the rows.
func typicalSize(rows []accReadRow) int {
	for _, l := range rows {
		if l.acctBytes > 0 {
			return l.acctBytes
		}
	}
	return 0
}

// slowestAll is the row whose every-job audit took longest.
func slowestAll(rows []accReadRow) (accReadRow, bool) {
	var best accReadRow
	ok := false
	for _, l := range rows {
		if l.err == nil && (!ok || l.all.took > best.all.took) {
			best, ok = l, true
		}
	}
	return best, ok
}

// prefixSiblings is how many of the most jobs' names start with the
// audited job's (job-7): the accounts its audit.Load lists.
func sideNote(side bool) string {
	if side {
		return " (Quick mode: the minutes ran beside the audits' reads, which may slow a round across the minute's edge.)"
	}
	return ""
}
