// Package httpapi is an instance's HTTP API and its health verdicts, over
// an election.Elector and the schedulerhost.Host whose Lead that Elector
// runs. Package baton builds one in New and serves it (Handler,
// RunServing); a service that composes the parts by hand builds its own
// with New.
//
// An API starts no goroutine of its own. The runner that runs the
// Elector (package baton's Run, run.go) runs beside it what the API
// needs: Publish (the registry of instances, with a control store),
// WatchApp (the application check, Config.App) and ReloadOn (reloads at
// signals), and tells the verdicts how the run goes: SetLoopAlive while
// Elector.Run is going, SetStopping once a shutdown began. Its verdicts
// are library calls:
//
//   - Healthy: false while the election loop is not running, or while runs
//     go on without leadership (they may overlap the new leader's). A
//     supervisor restarts an unhealthy instance; GET /healthz answers it.
//   - Ready: false once a shutdown has begun, or while the last attempts
//     to acquire all failed (election.Elector.AcquireFailing); GET /readyz
//     answers it.
//
// Both return a Verdict whose Reasons say what failed. Handler serves GET
// / (a status page), /status, /audit (the tick accounting, package audit:
// on any instance, with a control store), /metrics, /healthz and /readyz,
// and the admin endpoints POST /step-down, /standby, /eligible and
// /reload, which need the bearer token of Config.AdminToken; with a
// control store also pause, resume and run now (POST /jobs/{job}/pause, /resume, /run; GET
// /runs/{id}).
//
// With Config.Reloader, Reload (POST /reload; a signal with ReloadOn)
// reads the job set again and hands its jobs to the Host
// (schedulerhost.Host.SetJobs) without giving up the lease; a bad set is
// refused with its errors and the old set keeps running.
//
// A graceful stop has five bounded steps: the drain (ShutdownTimeout), the
// kill grace of cancelled commands, the Host's margin after it, the
// release of the lease (ReleaseTimeout) and the HTTP shutdown.
// ShutdownBudget sums them, and CheckGracePeriod tells whether they fit in
// the grace period a supervisor gives (Kubernetes'
// terminationGracePeriodSeconds).
//
// The jobs file, the flags naming a backend, and opening it belong to the
// commands (internal/cli): httpapi links no backend SDK, and its API
// names no internal type. Package httpapi/appcheck is the application
// check.
package httpapi
