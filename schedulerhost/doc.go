// Package schedulerhost runs cron jobs for one term of leadership.
//
// A Host is built once (New parses every schedule and rejects bad input
// up front) and its Lead method is handed to an election.Elector:
//
//	elector.Run(ctx, host.Lead)
//
// While leading, one timer over a heap of next ticks fires each job at the
// nominal times its schedule gives; a tick's identity is (job, nominal
// time), carried in the run's context (TickFromContext) together with the
// term's fencing token (election.TokenFromContext).
//
// Before a run starts, the Host re-checks the term (election.CheckTerm)
// and, with a Ledger, claims the tick in the backend, atomically with a
// check that the term still holds; a claimed tick is never started twice.
// A new leader reads each job's last claimed tick and applies the job's
// Misfire policy to the ticks missed in between.
//
// When the term context ends, the Host stops starting runs. On a graceful
// stop (election.ErrSteppingDown) runs keep going up to ShutdownTimeout,
// then are cancelled with ErrShutdownTimeout and get KillGrace more. On a
// loss (election.ErrLeadershipLost) their contexts are cancelled at once
// with that cause, and Lead waits up to ShutdownTimeout for them. Runs
// that ignore their context can outlive Lead; Running counts them.
package schedulerhost
