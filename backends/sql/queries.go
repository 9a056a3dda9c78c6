package sql

import (
	"strconv"
	"strings"
)

// queries holds the statements of one dialect for one table, built once by
// New. Table names and the TTL are validated or computed values, never
// user input at run time; everything else is a bind parameter.
//
// The database clock:
//
// PostgreSQL: clock_timestamp(), the real time when it is evaluated (now()
// would be the start of the transaction). Each statement below either
// evaluates it once, or compares and sets in separate clauses whose order
// does not matter (WHERE decides, SET writes), so a statement that waits
// for a row lock decides with the time after the wait.
//
// MySQL/MariaDB: UTC_TIMESTAMP(6), which, like NOW(6), is fixed at the
// start of the statement, every call in one statement returning the same
// value. SYSDATE(6) would be the real time of each call, so the five IF()s
// of the acquire upsert could see different times and disagree about
// whether the row had expired, writing half a takeover. A statement that
// waits for a row lock therefore decides with its start time, which is
// earlier than the real time: it may see a row as live a little longer
// (safe), and it sets an expiry at most the wait earlier, still later
// than the send time the holder's local deadline is measured from (safe).
// UTC_TIMESTAMP rather than NOW because DATETIME has no time zone and
// NOW(6) follows the session time_zone, which clients may set differently;
// UTC_TIMESTAMP does not. Both follow the session variable timestamp (SET
// timestamp = ...), as SYSDATE does not: connections of this pool must not
// set it.
type queries struct {
	peek    string // args: election -> free bool, remaining micros int64
	acquire string // postgres: election, holder -> token, acquired micros
	bump    string // mysql: no args; LastInsertId is the next token
	upsert  string // mysql: election, holder, token, holder, token
	state   string // election -> holder, token, acquired micros, live bool
	renew   string // election, token
	release string // election, token (postgres: + notify channel)
	checks  []check

	// Ledger. MySQL's claim and finish statements list their rows, so
	// they are built per chunk (ledger_mysql.go, ledger_mysql_claim.go).
	claimPG     string // postgres: see the statement
	leaseShare  string // mysql: token, election -> live bool
	lastClaimed string // postgres: election, jobs text[] literal -> job, last_tick
	finish      string // postgres: see the statement
	history     string // election, job, limit
}

// check is one relation Check and the schema error messages know about.
type check struct {
	relation string
	query    string
}

func buildQueries(d Dialect, table string, ttlMicros int64) queries {
	r := strings.NewReplacer("{t}", table, "{ttl}", strconv.FormatInt(ttlMicros, 10))
	var q queries
	switch d {
	case Postgres:
		q = postgresQueries()
	case MySQL:
		q = mysqlQueries()
	}
	fields := []*string{&q.peek, &q.acquire, &q.bump, &q.upsert, &q.state, &q.renew, &q.release,
		&q.claimPG, &q.leaseShare, &q.lastClaimed, &q.finish, &q.history}
	for _, f := range fields {
		*f = r.Replace(*f)
	}
	for i := range q.checks {
		q.checks[i].relation = r.Replace(q.checks[i].relation)
		q.checks[i].query = r.Replace(q.checks[i].query)
	}
	return q
}

// postgresQueries returns PostgreSQL's statements, {t} and {ttl} not yet
// replaced.
func postgresQueries() queries {
	return queries{
		peek: `SELECT expires_at <= n.now, floor(extract(epoch FROM expires_at - n.now) * 1000000)::bigint
FROM {t}, (SELECT clock_timestamp() AS now) n WHERE election = $1`,
		acquire: `INSERT INTO {t} AS t (election, holder, token, expires_at, acquired_at, renewed_at)
VALUES ($1, $2, nextval('{t}_token_seq'), clock_timestamp() + interval '{ttl} microseconds', clock_timestamp(), clock_timestamp())
ON CONFLICT (election) DO UPDATE SET
	holder = EXCLUDED.holder,
	token = GREATEST(EXCLUDED.token, t.token + 1),
	expires_at = clock_timestamp() + interval '{ttl} microseconds',
	acquired_at = clock_timestamp(),
	renewed_at = clock_timestamp()
WHERE t.expires_at <= clock_timestamp()
RETURNING token, floor(extract(epoch FROM acquired_at) * 1000000)::bigint`,
		state: `SELECT holder, token, floor(extract(epoch FROM acquired_at) * 1000000)::bigint, expires_at > clock_timestamp()
FROM {t} WHERE election = $1`,
		renew: `UPDATE {t} SET expires_at = clock_timestamp() + interval '{ttl} microseconds', renewed_at = clock_timestamp()
WHERE election = $1 AND token = $2 AND expires_at > clock_timestamp()`,
		release: `WITH r AS (
	UPDATE {t} SET expires_at = LEAST(expires_at, clock_timestamp())
	WHERE election = $1 AND token = $2 RETURNING election
)
SELECT pg_notify($3, r.election) FROM r`,
		checks: []check{
			{"{t}", `SELECT election, holder, token, expires_at, acquired_at, renewed_at FROM {t} WHERE false`},
			{"{t}_token_seq", `SELECT last_value FROM {t}_token_seq`},
			{"{t}_ticks", `SELECT election, job, last_tick, token, claimed_at FROM {t}_ticks WHERE false`},
			{"{t}_runs", `SELECT election, job, tick, instance, token, catch_up, started, ended, result, error, attempts FROM {t}_runs WHERE false`},
			{"{t}_control", `SELECT election, k, v, version FROM {t}_control WHERE false`},
			{"{t}_control_seq", `SELECT last_value FROM {t}_control_seq`},
		},
		claimPG: pgClaim,
		// A join on the unnested list, not job = ANY (list): the planner
		// filters every row of the election by the array (500 × 20,000
		// comparisons, 0.8 s a page at 10,000 jobs), where the join looks
		// each job up by the primary key (7 ms).
		lastClaimed: `SELECT t.job, t.last_tick FROM unnest($2::text::text[]) AS j(job) JOIN {t}_ticks t ON t.election = $1 AND t.job = j.job`,
		// One statement per chunk of runs, given as arrays ($2 jobs,
		// $3 ticks, $4 tokens, $5 ended, $6 results, $7 errors, $8
		// attempts), sorted
		// by job and tick. target locks the matching rows in that order
		// (as a claim's trim does), then they are updated by their row
		// address.
		finish: `WITH input AS (
	SELECT * FROM unnest($2::text::text[], $3::text::bigint[], $4::text::bigint[], $5::text::timestamptz[], $6::text::text[], $7::text::text[], $8::text::int[])
		AS i(job, tick, token, ended, result, error, attempts)
), target AS (
	SELECT r.ctid, i.ended, i.result, i.error, i.attempts FROM input i
	CROSS JOIN LATERAL (
		SELECT r.ctid FROM {t}_runs r
		WHERE r.election = $1::varchar AND r.job = i.job AND r.tick = i.tick AND r.token = i.token
		FOR UPDATE) r
)
UPDATE {t}_runs r SET ended = t.ended, result = t.result, error = t.error, attempts = t.attempts
FROM target t WHERE r.ctid = t.ctid`,
		history: `SELECT tick, instance, token, catch_up, floor(extract(epoch FROM started) * 1000000)::bigint,
	floor(extract(epoch FROM ended) * 1000000)::bigint, result, error, attempts
FROM {t}_runs WHERE election = $1 AND job = $2 ORDER BY tick DESC LIMIT $3`,
	}
}

// mysqlQueries returns MySQL's statements, {t} and {ttl} not yet
// replaced: the ledger's claim and finish are built per chunk.
func mysqlQueries() queries {
	return queries{
		peek: `SELECT expires_at <= UTC_TIMESTAMP(6), TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
FROM {t} WHERE election = ?`,
		// A sequence emulation: LAST_INSERT_ID(expr) hands the new
		// value back in the OK packet, whichever connection runs it.
		// A lost counter row restarts above the largest lease token.
		bump: `INSERT INTO {t}_seq (id, token) VALUES (1, LAST_INSERT_ID((SELECT COALESCE(MAX(token), 0) + 1 FROM {t})))
ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1)`,
		// Insert, or take over an expired row. MySQL applies the
		// assignments left to right, each seeing the columns already
		// assigned, so expires_at, which every IF() tests, comes last.
		upsert: `INSERT INTO {t} (election, holder, token, expires_at, acquired_at, renewed_at)
VALUES (?, ?, ?, UTC_TIMESTAMP(6) + INTERVAL {ttl} MICROSECOND, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE
	holder = IF(expires_at <= UTC_TIMESTAMP(6), ?, holder),
	token = IF(expires_at <= UTC_TIMESTAMP(6), GREATEST(?, token + 1), token),
	acquired_at = IF(expires_at <= UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), acquired_at),
	renewed_at = IF(expires_at <= UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), renewed_at),
	expires_at = IF(expires_at <= UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL {ttl} MICROSECOND, expires_at)`,
		state: `SELECT holder, token, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', acquired_at), expires_at > UTC_TIMESTAMP(6)
FROM {t} WHERE election = ?`,
		renew: `UPDATE {t} SET renewed_at = UTC_TIMESTAMP(6), expires_at = UTC_TIMESTAMP(6) + INTERVAL {ttl} MICROSECOND
WHERE election = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)`,
		release: `UPDATE {t} SET expires_at = LEAST(expires_at, UTC_TIMESTAMP(6)) WHERE election = ? AND token = ?`,
		checks: []check{
			{"{t}", `SELECT election, holder, token, expires_at, acquired_at, renewed_at FROM {t} WHERE 1 = 0`},
			{"{t}_seq", `SELECT id, token FROM {t}_seq WHERE 1 = 0`},
			{"{t}_ticks", `SELECT election, job, last_tick, token, claimed_at FROM {t}_ticks WHERE 1 = 0`},
			{"{t}_runs", `SELECT election, job, tick, instance, token, catch_up, started, ended, result, error, attempts FROM {t}_runs WHERE 1 = 0`},
			{"{t}_control", `SELECT election, k, v, version FROM {t}_control WHERE 1 = 0`},
		},
		leaseShare: `SELECT token = ? AND expires_at > UTC_TIMESTAMP(6) FROM {t} WHERE election = ? LOCK IN SHARE MODE`,
		history: `SELECT tick, instance, token, catch_up, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', started),
	TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', ended), result, error, attempts
FROM {t}_runs WHERE election = ? AND job = ? ORDER BY tick DESC LIMIT ?`,
	}
}

// pgClaim is PostgreSQL's claim (queries.claimPG): one statement per
// chunk of claims of one token, the claims given as arrays ($3 jobs,
// sorted, distinct; $4 ticks; $5 instances; $6 catch-up flags; $7 start
// times), $8 the history to keep. It returns one row per recorded claim
// with its ordinal in the arrays (or one row with a NULL ordinal if none
// was), each with the number of lease rows found live with the token
// (0: stale, nothing recorded).
//
// lease locks the lease row FOR SHARE, so that a takeover
// waits for the claims to commit, and a claim that waits for a
// takeover in progress re-reads the row after it and finds
// another token. claim then moves each job's tick forward
// only if newer, taking the tick rows' locks in the order of
// the arrays (so that concurrent chunks cannot deadlock); run
// records the claimed ones. doomed finds, for each claimed
// job, the runs beyond the newest $8 (the new run and the
// newest $8-1 older ones: the statement's snapshot does not see
// the new run) and locks them in the order of job and tick, as
// Finish does; trim deletes them by their row address (a
// LATERAL per job and a TID scan: no plan that reads the whole
// table, whatever its size). A run finished between the
// snapshot and the lock is not deleted (the next claim does it).
const pgClaim = `WITH input AS (
	SELECT * FROM unnest($3::text::text[], $4::text::bigint[], $5::text::text[], $6::text::boolean[], $7::text::timestamptz[])
		WITH ORDINALITY AS i(job, tick, instance, catch_up, started, ord)
), lease AS (
	SELECT election FROM {t}
	WHERE election = $1::varchar AND token = $2::bigint AND expires_at > clock_timestamp()
	FOR SHARE
), claim AS (
	INSERT INTO {t}_ticks AS k (election, job, last_tick, token, claimed_at)
	SELECT lease.election, i.job, i.tick, $2::bigint, clock_timestamp() FROM lease, input i ORDER BY i.ord
	ON CONFLICT (election, job) DO UPDATE SET
		last_tick = EXCLUDED.last_tick, token = EXCLUDED.token, claimed_at = EXCLUDED.claimed_at
	WHERE k.last_tick < EXCLUDED.last_tick
	RETURNING k.job, k.last_tick
), run AS (
	INSERT INTO {t}_runs AS h (election, job, tick, instance, token, catch_up, started, ended, result, error)
	SELECT $1::varchar, i.job, i.tick, i.instance, $2::bigint, i.catch_up, i.started, NULL, 'running', ''
	FROM claim c JOIN input i ON i.job = c.job ORDER BY i.ord
	ON CONFLICT (election, job, tick) DO UPDATE SET
		instance = EXCLUDED.instance, token = EXCLUDED.token, catch_up = EXCLUDED.catch_up,
		started = EXCLUDED.started, ended = NULL, result = EXCLUDED.result, error = EXCLUDED.error
	RETURNING h.job
), doomed AS (
	SELECT d.ctid FROM claim c
	CROSS JOIN LATERAL (
		SELECT o.tick FROM {t}_runs o WHERE o.election = $1::varchar AND o.job = c.job AND o.tick < c.last_tick
		ORDER BY o.tick DESC OFFSET $8::int - 1 LIMIT 1) cut
	CROSS JOIN LATERAL (
		SELECT r.ctid FROM {t}_runs r WHERE r.election = $1::varchar AND r.job = c.job AND r.tick <= cut.tick
		ORDER BY r.tick FOR UPDATE) d
), trim AS (
	DELETE FROM {t}_runs WHERE ctid = ANY (ARRAY(SELECT ctid FROM doomed))
)
SELECT l.n, r.ord FROM (SELECT count(*) AS n FROM lease) l
LEFT JOIN (SELECT i.ord FROM run JOIN input i ON i.job = run.job) r ON true`
