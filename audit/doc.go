// Package audit accounts for every due tick of a job: each tick of a
// window is in exactly one Class, with a Reason from a closed set, so
// that the counts add up to the ticks due.
//
// What is stored, per job, in the election's control store beside the
// pauses and the run-now requests (key "audit/<job>/"), is an Account: the
// ticks as Ranges of consecutive ticks of one class, reason and term,
// oldest first, and the job's schedule changes (Spec). An every-second
// job that runs ok through a day is one Range per term. The Account of a
// job is at most MaxBytes encoded: past that, its oldest ranges fold into
// per-class counts (Account.Folded), and a report of a window reaching
// before FoldedThrough says so (Report.Folded).
//
// The leader writes the Accounts (schedulerhost's accountant), each write
// fenced by its term's token; any instance reads them (Report), with the
// job's recent ledger history for the ticks not yet written.
package audit
