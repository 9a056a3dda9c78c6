// Package sql is the shared core of baton's SQL election backend: one
// heartbeat row per election in a table of PostgreSQL, MySQL or MariaDB,
// reached through a *database/sql.DB. Applications import a dialect
// package, which supplies the driver-specific parts and returns this
// package's *Backend:
//
//	postgres.New(postgres.Config{DB: db, Table: "baton_lease", Election: "reports", Listen: postgres.ListenDSN(dsn)})
//	mysql.New(mysql.Config{DB: db, Table: "baton_lease", Election: "reports"})
//
// # Why a core and two dialect packages
//
// Everything that does not need a driver lives here: the statements of
// both dialects (plain strings), the wait loop, the managed lease, the
// ledger, the schema files and EnsureSchema. The parts that do need one
// sit in backends/sql/postgres (pgx: its error codes and the LISTEN
// connection) and backends/sql/mysql (go-sql-driver/mysql: its error
// numbers), and reach the core as a Driver value. So a program that
// imports the MySQL backend does not link pgx, and one that imports the
// PostgreSQL backend does not link the MySQL driver; internal/depcheck
// checks both closures. A single package would link both drivers for
// everyone, because the LISTEN connection is a *pgx.Conn.
//
// The dialect choice is the package choice, so a MySQL Config cannot ask
// for LISTEN: mysql.Config is this package's Config, and postgres.Config
// is the same fields plus Listen. A program that picks the dialect at run
// time (the node package does) fills one Config and calls New with
// postgres.Driver(listen) or mysql.Driver(). The package is named sql
// after the directory; its files import database/sql as dbsql.
//
// More in this file, after the package clause (read the source):
// The row, Self-fencing, What happens when, Schema, Ledger, Limits.
package sql

// Details, kept out of the go doc overview above.
//
// # The row
//
// Each election is one row: election (primary key), holder (the leader's
// election.Identity as JSON), token, expires_at, acquired_at, renewed_at.
// Every time in it comes from the database clock, clock_timestamp() on
// PostgreSQL and UTC_TIMESTAMP(6) on MySQL (see queries.go for why not
// NOW(6) or SYSDATE(6)); no decision about expiry ever reads an
// application clock, so instances whose clocks disagree by minutes behave
// like instances whose clocks agree. A missing row, or one whose expires_at
// has passed, is free.
//
// Each operation is one statement:
//
//   - acquire inserts the row, or takes over an expired one, writing a new
//     token; on PostgreSQL INSERT ... ON CONFLICT DO UPDATE ... WHERE
//     expired RETURNING token, on MySQL INSERT ... ON DUPLICATE KEY UPDATE
//     with IF(expired, new, old) for every column (then the row is read
//     back);
//   - renew sets expires_at to now + TTL WHERE election, token match AND
//     the row has not expired; zero rows means the term is over;
//   - release sets expires_at to now WHERE election and token match (and on
//     PostgreSQL notifies waiting candidates in the same statement).
//
// Fencing tokens come from a counter outside the lease rows (a sequence
// Table_token_seq on PostgreSQL, a one-row table Table_seq on MySQL), and
// a takeover writes max(counter, old token + 1): tokens strictly increase
// across terms even when a row is deleted by hand and inserted again.
//
// A waiting candidate reads the row every PollInterval, or just after the
// row's expiry by the database clock if that is sooner, and writes only
// when the read shows the row free: an idle follower makes at most one
// read per PollInterval (while the leader renews every TTL/3, the row never
// has less than about 2/3 TTL left) and no writes. On PostgreSQL with
// postgres.Config.Listen it also LISTENs on a channel of its own
// election, and the holder's release NOTIFYs it, so a graceful handover
// takes milliseconds. A failed listen connection falls back to polling.
//
// # Self-fencing
//
// Leases are driver.ManagedLease values: a term ends locally at the send
// time of the last successful renewal (or of the acquire) + TTL -
// SafetyMargin on the monotonic clock, whatever the database has said,
// while the database cannot give the row to anyone before that renewal's
// arrival + TTL by its own clock. The margin absorbs the difference in
// clock rates and the scheduling delay; it does not absorb a database
// clock that jumps forward (see Limits).
//
// # What happens when
//
// Connection loss (network cut, proxy failure, database unreachable):
// renewals fail with network errors and are retried every RenewInterval/4
// (at most 1 s) until the local deadline, at which Done closes with
// election.ErrLeadershipLost; no renewal can succeed later for that term
// (the database must see it before the row's expiry, which is later than
// the local deadline). If the connection comes back before the deadline
// the term goes on. Followers take over when the row expires by the
// database clock: crash or cut to new leader within TTL + a poll.
//
// Row deleted by hand: the next renewal updates zero rows and the term
// ends (the reason says the row was deleted). A candidate may insert a new
// row at once, with a greater token from the counter: the old holder's
// renewals keep failing because its token no longer matches.
//
// Row edited by hand: a changed token or election ends the term at the next
// renewal, as above. A changed expires_at moves the database's expiry only:
// pushing it into the past lets a follower take over as soon as it reads the
// row, while the old holder runs until its next renewal fails (at most
// RenewInterval later) or its local deadline: do not do that to a live
// lease if only one instance may start jobs. A changed holder is shown by
// Leader and ignored otherwise.
//
// Database restart: statements fail while it is down, so the term ends at
// its local deadline unless the database is back in time; the row is
// durable, so after the restart it still names the holder and no one can
// take it before it expires by the database clock. A restart also breaks
// listen connections: they are reopened and polling covers the gap.
//
// A statement the client gave up on (its context ended) may still run on
// the server. A late acquire can only take a row that is free by the
// database clock, so it leaves the election held by nobody until the TTL
// passes; a late renewal or release matches only its own token. Never two
// holders.
//
// # Schema
//
// The schema is in schema/postgres.sql and schema/mysql.sql (embedded as
// Schema; SchemaSQL, or the dialect package's SchemaSQL, returns it for
// any table name). The files use the
// placeholder table name baton_lease: replace it with Config.Table, for
// example sed 's/baton_lease/ops.leader/g' schema/postgres.sql | psql.
// EnsureSchema creates the same schema from the program; it is opt-in.
// Without it, a missing table makes Acquire return an error wrapping
// ErrSchemaMissing that names the table and the file to apply, at once
// rather than retrying; Check reports it at start-up.
//
// # Ledger
//
// Ledger returns the election's ledger.Ledger, in tables Table_ticks
// (the newest claimed tick of each job, as unix nanoseconds) and Table_runs
// (the newest History runs of each job). Claims go 500 to a round trip:
// each chunk is conditioned, in one statement (PostgreSQL) or transaction
// (MySQL), on the lease row holding the claiming token and not having
// expired by the database clock, with the lease row share-locked so that
// a takeover (and a renewal) waits for the claims to commit. A stale
// chunk is refused with ErrStaleTerm, and the Host then ends its term at
// once (election.Term.Lose), before the renew loop would notice; a tick
// not after the job's last claimed one is ErrTickClaimed. Finish updates
// the runs with the same job, tick and token, 500 to a statement,
// whether or not the term still holds.
//
// # Limits
//
// The database clock must not jump forward by more than SafetyMargin
// while a lease is held (a stepped NTP correction on the database host
// would expire rows early). A MySQL replica promoted by asynchronous
// replication may have lost the last renewals and acquires: use
// semi-synchronous replication or accept that a failover can overlap two
// terms (the fencing tokens still increase only if the counter did not
// go back). Session settings matter: on MySQL do not SET timestamp on the
// pool's connections.
