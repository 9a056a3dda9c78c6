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

	// Ledger.
	claimPG     string // postgres: election, token, job, tick, instance, catch_up, started -> lease n, claim n
	leaseShare  string // mysql: token, election -> live bool
	tickForUpd  string // mysql: election, job -> last_tick
	tickUpdate  string // mysql: tick, token, election, job
	tickInsert  string // mysql: election, job, tick, token
	runInsert   string // mysql: see the statement
	lastClaimed string // election, job -> last_tick
	finish      string // ended, result, error, election, job, tick, token
	history     string // election, job, limit
	trimHistory string // election, job, offset (keep-1), election, job
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
		q = queries{
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
				{"{t}_runs", `SELECT election, job, tick, instance, token, catch_up, started, ended, result, error FROM {t}_runs WHERE false`},
			},
			// One statement: lock the lease row (FOR SHARE, so a takeover
			// waits for the claim and the claim sees a committed takeover),
			// then move the tick forward only if the lease is live and the
			// tick newer, then record the run only if the tick moved.
			claimPG: `WITH lease AS (
	SELECT election FROM {t}
	WHERE election = $1 AND token = $2 AND expires_at > clock_timestamp()
	FOR SHARE
), claim AS (
	INSERT INTO {t}_ticks AS k (election, job, last_tick, token, claimed_at)
	SELECT lease.election, $3::varchar, $4::bigint, $2::bigint, clock_timestamp() FROM lease
	ON CONFLICT (election, job) DO UPDATE SET
		last_tick = EXCLUDED.last_tick, token = EXCLUDED.token, claimed_at = EXCLUDED.claimed_at
	WHERE k.last_tick < EXCLUDED.last_tick
	RETURNING k.election, k.job, k.last_tick, k.token
), run AS (
	INSERT INTO {t}_runs AS h (election, job, tick, instance, token, catch_up, started, ended, result, error)
	SELECT claim.election, claim.job, claim.last_tick, $5::text, claim.token, $6::boolean, $7::timestamptz, NULL, 'running', '' FROM claim
	ON CONFLICT (election, job, tick) DO UPDATE SET
		instance = EXCLUDED.instance, token = EXCLUDED.token, catch_up = EXCLUDED.catch_up,
		started = EXCLUDED.started, ended = NULL, result = EXCLUDED.result, error = EXCLUDED.error
	RETURNING 1
)
SELECT (SELECT count(*) FROM lease), (SELECT count(*) FROM claim), (SELECT count(*) FROM run)`,
			lastClaimed: `SELECT last_tick FROM {t}_ticks WHERE election = $1 AND job = $2`,
			finish: `UPDATE {t}_runs SET ended = $1, result = $2, error = $3
WHERE election = $4 AND job = $5 AND tick = $6 AND token = $7`,
			history: `SELECT tick, instance, token, catch_up, floor(extract(epoch FROM started) * 1000000)::bigint,
	floor(extract(epoch FROM ended) * 1000000)::bigint, result, error
FROM {t}_runs WHERE election = $1 AND job = $2 ORDER BY tick DESC LIMIT $3`,
			trimHistory: `DELETE FROM {t}_runs WHERE election = $1 AND job = $2 AND tick < (
	SELECT tick FROM {t}_runs WHERE election = $1 AND job = $2 ORDER BY tick DESC OFFSET $3 LIMIT 1)`,
		}
	case MySQL:
		const now = "UTC_TIMESTAMP(6)"
		q = queries{
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
				{"{t}_runs", `SELECT election, job, tick, instance, token, catch_up, started, ended, result, error FROM {t}_runs WHERE 1 = 0`},
			},
			leaseShare: `SELECT token = ? AND expires_at > UTC_TIMESTAMP(6) FROM {t} WHERE election = ? LOCK IN SHARE MODE`,
			tickForUpd: `SELECT last_tick FROM {t}_ticks WHERE election = ? AND job = ? FOR UPDATE`,
			tickUpdate: `UPDATE {t}_ticks SET last_tick = ?, token = ?, claimed_at = ` + now + ` WHERE election = ? AND job = ?`,
			tickInsert: `INSERT INTO {t}_ticks (election, job, last_tick, token, claimed_at) VALUES (?, ?, ?, ?, ` + now + `)`,
			// args: election, job, tick, instance, token, catch_up, started,
			// then instance, token, catch_up, started again (VALUES() is
			// deprecated in MySQL 8).
			runInsert: `INSERT INTO {t}_runs (election, job, tick, instance, token, catch_up, started, ended, result, error)
VALUES (?, ?, ?, ?, ?, ?, ?, NULL, 'running', '')
ON DUPLICATE KEY UPDATE instance = ?, token = ?, catch_up = ?, started = ?, ended = NULL, result = 'running', error = ''`,
			lastClaimed: `SELECT last_tick FROM {t}_ticks WHERE election = ? AND job = ?`,
			finish: `UPDATE {t}_runs SET ended = ?, result = ?, error = ?
WHERE election = ? AND job = ? AND tick = ? AND token = ?`,
			history: `SELECT tick, instance, token, catch_up, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', started),
	TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', ended), result, error
FROM {t}_runs WHERE election = ? AND job = ? ORDER BY tick DESC LIMIT ?`,
			// MySQL cannot use LIMIT in an IN subquery, nor select from the
			// table being deleted from, except through a derived table.
			trimHistory: `DELETE FROM {t}_runs WHERE election = ? AND job = ? AND tick < (
	SELECT tick FROM (SELECT tick FROM {t}_runs WHERE election = ? AND job = ? ORDER BY tick DESC LIMIT 1 OFFSET ?) AS keep)`,
		}
	}
	fields := []*string{&q.peek, &q.acquire, &q.bump, &q.upsert, &q.state, &q.renew, &q.release,
		&q.claimPG, &q.leaseShare, &q.tickForUpd, &q.tickUpdate, &q.tickInsert, &q.runInsert,
		&q.lastClaimed, &q.finish, &q.history, &q.trimHistory}
	for _, f := range fields {
		*f = r.Replace(*f)
	}
	for i := range q.checks {
		q.checks[i].relation = r.Replace(q.checks[i].relation)
		q.checks[i].query = r.Replace(q.checks[i].query)
	}
	return q
}
