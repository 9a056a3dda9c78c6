// Package node runs a baton node: an election.Elector campaigning, a
// schedulerhost.Host running the jobs while it leads, and the HTTP API that
// reports on both. Any binary running a node uses it (cmd/demo's `demo
// node` does), and so can a service that embeds baton and wants its
// health verdict or its HTTP endpoints.
//
// A Node is built with New from an Elector and a Host the caller made;
// Run blocks until the node has stopped. Its verdicts are library calls:
//
//   - Healthy: false while the election loop is not running, or while runs
//     go on without leadership (they may overlap the new leader's). A
//     supervisor restarts an unhealthy node; GET /healthz answers it.
//   - Ready: false once a shutdown has begun, or while the last attempts
//     to acquire all failed (election.Elector.AcquireFailing); GET /readyz
//     answers it.
//
// Both return a Verdict whose Reasons say what failed. Handler serves GET
// / (a status page), /status, /metrics, /healthz and /readyz, and the admin
// endpoints POST /step-down, /standby, /eligible and /reload, which need
// the bearer token of Config.AdminToken.
//
// With Config.Reloader, Reload (POST /reload; SIGHUP with ReloadOnSignal)
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
// commands (internal/cli): node links no backend SDK, and its API names no
// internal type.
package httpapi
