// Package baton runs each scheduled job of a service once, on whichever
// of its instances leads an election. The election is kept in etcd
// (backends/etcd), Consul (backends/consul), Redis (backends/redis),
// PostgreSQL or MySQL/MariaDB (backends/sql/postgres, backends/sql/mysql)
// or a Kubernetes Lease (backends/kube); backends/memory keeps it in one
// process, for tests.
//
// New wires an election (package election), the scheduler that runs the
// jobs while this instance leads (package schedulerhost), the backend's
// ledger of claimed ticks and its control store (pauses, runs now), and
// Prometheus metrics, once:
//
//	b, err := baton.New(baton.Config{Backend: backend, Election: "reports", Jobs: jobs})
//	...
//	err = b.Run(ctx) // campaigns; leads; on ctx's end drains, releases, returns
//
// Handler serves the HTTP API (status, /metrics, /healthz, /readyz, the
// admin endpoints, from package httpapi); Healthy and Ready are its
// verdicts as calls. Run is one owner of every goroutine of the instance:
// the Elector, whose lead function is the scheduler's Host.Lead, the
// registry publisher, the application check and the HTTP server. Those who
// compose by hand use election.New and schedulerhost.New, which New uses,
// and run Elector.Run(ctx, host.Lead) themselves. Main is a whole program's life as one instance: New, then Run
// until SIGINT or SIGTERM.
package baton
