// Package e2e is baton's end-to-end fault-injection suite. Its tests start
// real servers (embedded etcd, a Consul server agent, the local PostgreSQL
// and MariaDB, redis-server) and clustered ones (etcd-cluster: three etcd
// member processes; postgres-ha: a primary and a synchronous streaming
// standby of the run's own; consul-cluster: three Consul servers and a
// client agent per node), and several real `demo node` processes per backend,
// each talking to its backend through proxies of its own
// (proxytest.Proxy, one per server it reaches), then inject faults chosen
// at random from a printed seed: SIGKILL of the leader or a follower,
// SIGTERM of the leader mid-job, SIGSTOP/SIGCONT of the leader, a
// partition of one node, added latency, connection resets, a backend
// restart, restarts of the killed nodes, and a clustered backend's own
// faults (etcd: SIGKILL or SIGSTOP of the leading member, one member cut
// off from its peers, MoveLeader; PostgreSQL: the primary killed, the
// standby promoted, the old primary rebuilt as the new standby; Consul:
// SIGKILL of the raft leader, a graceful restart of a node's client
// agent, and a client agent killed, seen failed and force-left).
//
// The oracle is independent of baton's ledger: the jobs append a line at
// the start and at the end of every run to a file opened with O_APPEND,
// and each node's JSON log gives its terms. e2e/internal/history checks them.
// The job "drain" works 2.5 s, traps SIGTERM and keeps working 3 s
// after it, writing a heartbeat line every 250 ms; a partition of the
// leader comes just after one of its runs started. From these lines the
// checker proves that no two terms' runs execute at the same time. While the faults go
// on, an operator pauses and resumes a job and asks for runs now through
// the nodes' HTTP API (operator_test.go): no run may start after a pause
// was answered 200, and every run now accepted runs at most once and is
// done once the faults end. TestSidecar's app has an endpoint that
// ignores its client's disconnect and fences its side effect with the
// token (the shipped Python receiver, receivers/python/baton_fence.py),
// and the suite kills the app beside the leading sidecar.
// TestSidecarRetryCut kills it while a job with retries has a tick to run
// (before the request, and with it in flight): the tick is not run again,
// and its ledger entry is lost, not-delivered or retry-cut. TestFence
// pauses a leader mid-write (fence_test.go): its job's write is held,
// node and job are SIGSTOPped past the TTL, a new leader writes, and the
// held write resumes late; the PostgreSQL table it writes through
// package fence's SQL guard shows it refused, and without the guard
// shows it landing. TestFenceSidecarNode does the same behind `baton
// run` sidecars, with a Node.js app writing a file through
// receivers/node/baton-fence.js.
// TestTracing exports two sidecars' spans to a real OpenTelemetry
// Collector (internal/oteltest) across a SIGKILL failover and checks the
// collector's file against the ledger, GET /audit, and the traceparent an
// HTTP job's service and a command job received.
//
// The suite is the slow tier: it runs only with BATON_E2E=1, so that
// `go test ./...` from the repository root stays fast and skips it with a
// message. `make test` runs it after the fast tier, and `make soak` runs
// its long profile; both set BATON_E2E=1. By hand, from this directory:
//
//	BATON_E2E=1 go test -race -count=1 -timeout 15m
//
// The checker in e2e/internal/history has unit tests of its own that run in the
// fast tier.
//
// Environment:
//
//	BATON_E2E=1         runs the suite (without it, TestFaults skips)
//	BATON_E2E_PROFILE   short (default; every fault type once per backend)
//	                    or long (random faults until BATON_E2E_DURATION)
//	BATON_E2E_DURATION  long profile's length (default 30m)
//	BATON_E2E_LANES     long profile: groups of nodes per backend (default
//	                    3; "4" for every backend, or "consul-cluster=4"
//	                    for one), each with an election of its own on the one
//	                    backend, faulting its own nodes at the same time
//	                    as the others; lane 1 alone injects the backend's
//	                    faults, and the other lanes' handovers and
//	                    failovers that overlap one are not timed (on
//	                    Consul, nor lane 1's within the lock-delay plus
//	                    2 s after one: consulFaultWake)
//	BATON_E2E_BACKENDS  comma-separated: etcd, etcd-cluster, postgres,
//	                    postgres-ha, mysql, consul, consul-cluster, redis,
//	                    kube
//	                    (TestFaults' default for short: etcd-cluster,
//	                    postgres-ha,mysql,consul-cluster,redis; for
//	                    long: etcd,postgres; the other tests: the single
//	                    servers)
//	BATON_E2E_SEED      replays the fault choices of an earlier run
//	BATON_E2E_KEEP=1    keeps the artifacts directory of a passing run
//	BATON_E2E_LOG_LEVEL the nodes' --log-level (default debug: the
//	                    checker reads the catch-up's line on every job,
//	                    which says "none missed" at debug)
//	BATON_E2E_REPORT    a markdown file (make soak: docs/reliability.md)
//	                    where TestFaults writes each backend's section
//	BATON_E2E_AUDIT     1 or unset: after each scenario's check, reads the
//	                    tick accounting (schedulerhost's Host.Audit, from
//	                    the test process) over the checked window and
//	                    compares it tick by tick with the checker's
//	                    verdicts (e2e/internal/auditcmp), failing on a
//	                    disagreement; report: the same, printed and not
//	                    failing; 0: no comparison
package e2e
