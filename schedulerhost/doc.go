// Package schedulerhost runs cron jobs for one term of leadership.
//
// A Host is built once (New parses every schedule and rejects bad input
// up front) and its Lead method is handed to an election.Elector:
//
//	elector.Run(ctx, host.Lead)
//
// SetJobs replaces the job set later, validated the same way, also while
// leading: the term goes on with the new set (see its doc for what
// happens to added, removed and changed jobs).
//
// While leading, one timer over a heap of next ticks fires each job at the
// nominal times its schedule gives; a tick's identity is (job, nominal
// time), carried in the run's context (TickFromContext) together with the
// term's fencing token (election.TokenFromContext).
//
// Before a run starts, the Host re-checks the term (election.Term.Check)
// and, with a Ledger, claims the tick in the backend, atomically with a
// check that the term still holds; a claimed tick is never started twice.
// A job's claims are made one at a time, in tick order. A claim whose
// outcome stays unknown is asked again; if the Host gives up, the tick
// counts as claimed, its run does not start, and the Host writes its
// history entry as not started (ledger.ResultCancelled, "not started: claim
// outcome unknown") rather than leave it "running" (if that write fails
// too, it is logged); no leader runs the tick later (see ledger.Ledger.Claim).
// A new leader reads each job's last claimed tick and applies the job's
// Misfire policy to the ticks missed in between.
//
// Schedules are read in Config.Location (UTC if nil) or a spec's own
// CRON_TZ= zone. At a daylight-saving change a job at a fixed time of day
// runs once: a local time a spring-forward skips runs at the first instant
// after the gap, one a fall-back repeats runs at its first occurrence;
// jobs whose hour field is "*" run at every real instant that matches.
// An @every interval is elapsed time, anchored on the Unix epoch: the
// ticks of "@every 2h offset 15m" are the instants a whole multiple of 2h
// after 1970-01-01T00:00:00Z, plus 15m (EverySchedule), so every leader
// computes the same ones, however often the lead changes hands. The zone
// database is embedded (time/tzdata), for containers without zoneinfo.
//
// A run is one tick and one claim. With Job.Retries, a failed attempt is
// followed by another under the same claim, after a backoff, while the
// term holds; AttemptFromContext says which attempt a context belongs to,
// and the history entry (ledger.Run.Attempts) how many were made. With
// Job.Jitter, a run waits JitterDelay after its tick before it claims it.
//
// With a control store (Config.Control) the leader honours pauses and
// runs now, and Lead records each term there (control.Jobs.Terms): its
// token and instance when it begins, and how it ended (lost, shut down,
// stepped down, released) when Lead returns.
//
// With a control store, unless Config.NoAccounting, the leader also keeps
// the tick accounting (package audit) that Host.Audit reads on any
// instance: what became of each due tick, recorded in memory as it
// happens and written per job, fenced by the term's token, at most once
// per AccountWriteInterval for each job that changed, and once more when
// the term ends. Its start costs one fence, one read of the Accounts and
// one ledger History read per job (merging what an earlier term ran but
// never wrote).
//
// With a Tracer (Config.Tracer; package tracing implements it on
// OpenTelemetry), each run is a span that covers its attempts, carried by
// the job's context, and each tick the accounting records as not run is
// told to it. This package links no tracing SDK: nil costs nothing.
//
// More in this file, after the package clause (read the source):
// Clock steps; Time zones and DST; Retries; Jitter.
package schedulerhost

// Details, kept out of the go doc overview above.
//
// # Clock steps
//
// Ticks are named by the wall clock; the lease and every timer run on the
// monotonic clock. The loop fires ticks by schedule time, which follows
// the wall clock except that it never moves back:
//
//   - A forward step (the wall clock jumps ahead of the monotonic clock by
//     more than 100 ms, seen within a minute at most): ticks that were due
//     by the monotonic clock fire as usual; the ticks the step skipped over
//     are missed ticks, and the job's Misfire policy decides which run,
//     with the same grace and cap as at the start of a term (MisfireGrace
//     measured from the new wall clock). They run as one catch-up run
//     under the overlap policy, claimed in order and run one after
//     another, with Tick.CatchUp set; the others count as misfires. A step
//     forward never starts one run per skipped tick.
//   - A backward step: no tick whose nominal time is at or before the last
//     one fired fires again, and there is no stall: the next tick fires
//     when the monotonic clock says it is due, exactly as if the wall clock
//     had not moved, and so do the ticks after it. Schedule time stays
//     ahead of the wall clock by the step, so runs start that much earlier
//     by the wall clock than their nominal time (Run.Started before
//     Run.Tick), until the wall clock comes forward again or the term
//     ends. A new term starts from its own wall clock: the ticks up to the
//     last claimed one are taken, so it runs nothing new of a job until its
//     wall clock passes that job's last claimed tick.
//
// # Time zones and DST
//
// A spec names local wall times, a tick is an instant (compared and
// stored in the ledger as such). ParseSchedule wraps robfig/cron v3's
// schedule (tz.go), which alone skips a local time a spring-forward skips
// and runs twice one a fall-back repeats (and, at Lord Howe's 30-minute
// change, runs a 01:45 job at 02:45 too). Baton's policy, like Vixie/ISC
// cron's:
//
//   - Fixed times of day (the hour field is not "*"): a matching local
//     time in a spring-forward gap runs once, at the first instant after
//     the gap (02:30 in New York runs at 03:00 EDT; several matches in the
//     gap make one tick); a local time a fall-back repeats runs once, at
//     its first occurrence (01:30 EDT, not 01:30 EST).
//   - Hour field "*" (0 * * * *, */5 * * * *, @hourly): every real instant
//     whose local time matches, so 01:00 EDT and 01:00 EST both run (they
//     are an hour apart) and nothing runs for the gap (the instants either
//     side of it are an hour apart too).
//   - @every: elapsed time, unaffected.
//
// Next depends only on the instant it is given and the zone, so ticks
// strictly increase and a new leader computes, from the ledger's last
// claimed tick, the ticks the old one would have.
//
// When the term context ends, the Host stops starting runs. On a graceful
// stop (election.ErrSteppingDown) runs keep going up to ShutdownTimeout,
// then are cancelled with ErrShutdownTimeout and get KillGrace more. On a
// loss (election.ErrLeadershipLost) their contexts are cancelled at once
// with that cause, and Lead waits up to ShutdownTimeout for them. Runs
// that ignore their context can outlive Lead; Running and Abandoned count
// them, and if the Host leads again they still count for their job's
// overlap policy until they return.
//
// # Retries
//
// A job with Retries N makes up to N+1 attempts of a run: after an
// attempt that returned an error or panicked while its context was still
// open, it waits RetryBackoff·2^(k-1) after attempt k, at most
// RetryBackoffMax, then checks the term (Term.Check, as before the first
// attempt) and calls the job function again, with the same tick, token
// and claim, and AttemptFromContext one higher (command jobs:
// BATON_ATTEMPT). An attempt that ended with its Timeout (each attempt
// has its own) is not retried: the run's result is timeout. Neither is
// one cancelled by a loss or a drain. The wait ends at once when the term
// is lost or stopping (the end of Lead's context): no attempt follows,
// and the run ends with the last attempt's failure, its Error followed by
// "(not retried: term over: " and why (audit.ErrTextRetryCut). No later
// term runs the attempts left: a tick passes to a new term only by a
// fenced claim, and this one was claimed; the accounting reports it lost
// (retry-cut, or not-delivered when the failed attempt never reached its
// application), not ran. Each failed attempt
// is logged (Warn, with its number and error); the Observer hears of one
// run (RunStarted, RunFinished with the last attempt's result) and, if it
// is a RetryObserver, of each retry. While it waits, the run counts as in
// flight (overlap policy, drain), but not in Running. The history entry
// records the last attempt's Result and Error and the number of attempts.
//
// # Jitter
//
// A job with Jitter waits JitterDelay(Name, tick, Jitter) after the tick
// before claiming it: a hash of the job's name and the tick, so every
// instance computes the same delay, and the load of many jobs on one
// schedule spreads. The tick keeps its nominal time (TickFromContext, the
// ledger), and lateness is measured from tick + delay. A run that waits
// does not hold up the claims of its instant's other runs. The wait ends
// early when the term ends or starts stopping, and the run does not
// start; its tick is not claimed, so the next leader runs it, as a missed
// tick (its Misfire policy), or, if it leads before the tick, after the
// same delay. Catch-up runs do not wait; a queued run waits only what is
// left of tick + delay. Jitter must be shorter than the shortest gap
// between the schedule's ticks, so that a run's delay cannot reach its
// next tick.

// Source files, in the order a tick goes through them (for maintainers;
// not part of the package documentation):
//
//	host.go      Host, New, Lead: one term from start to drain; Running, Abandoned
//	term.go      termRun, the state of one term: its contexts, runs in flight, check, lose
//	catchup.go   ticks missed while nobody led, or skipped by a clock step: claimed before the loop starts
//	clock.go     wall and monotonic clocks; schedule time, which never goes back
//	tz.go        the DST policy around robfig/cron's schedules; embeds time/tzdata
//	every.go     @every: interval schedules anchored on the Unix epoch, with an offset
//	timeline.go  the heap of next ticks (container/heap), one bucket per instant
//	loop.go      the schedule loop: one timer, fires each instant's due ticks as one batch (fireAll)
//	admit.go     the overlap policy (skip, allow, queue) and who runs a queued tick
//	run.go       tickRun, one run and its context; runTicks, the runs of one goroutine in order
//	pipeline.go  the steps every run goes through: gate, claim, observe, retry, timeout, count, recover
//	jitter.go    JitterDelay, the wait of gateStep before a claim; Jitter's validation
//	retry.go     retryStep: the attempts of one run, their backoff; AttemptFromContext
//	claim.go     claims in the ledger, in tick order per job (turns), with retries; claimStep
//	history.go   the ring of recent runs and the ledger write (record)
//	drain.go     the end of a term: stop starting runs, wait for those in flight, cancel
//	status.go    Status and History, for status pages
//	reload.go    SetJobs: a new job set, also while leading; job versions sharing a jobLife
//
// config.go and errors.go hold the Config and the errors. The Ledger
// contract is package ledger; the failover suite every backend runs with
// real Hosts is package backendtest.
