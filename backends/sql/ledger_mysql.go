package sql

import (
	"cmp"
	"context"
	dbsql "database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// MySQL's ledger statements carry the rows of a chunk as a table: with
// JSON_TABLE (MySQL 8, MariaDB 10.6 or later) one JSON parameter; on
// MariaDB 10.5, a derived table of UNION ALL rows, a bind parameter per
// value, which costs the server several times more to parse at 500
// rows. (MariaDB's VALUES table constructor and MySQL's VALUES ROW()
// differ.) A string compared with a key column is converted to the
// column's utf8mb4_bin, whatever the connection's character set and
// collation.
//
// Every statement that locks or writes existing rows reaches them from
// the chunk's table, through STRAIGHT_JOIN, by their full primary key
// (eq_ref): left to itself, the optimizer may read all of the election's
// rows by the key's prefix instead, and a locking read of rows of
// another chunk's jobs waits for that chunk's transaction, which may be
// waiting for this one (a deadlock seen with two chunks of 500 jobs).

// myCol is a column of a chunk's table.
type myCol struct {
	name  string
	typ   string // its type in JSON_TABLE's COLUMNS
	union string // its expression, one placeholder, in a UNION ALL row
}

var (
	myColJob      = myCol{"job", "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", "CONVERT(? USING utf8mb4) COLLATE utf8mb4_bin"}
	myColTick     = myCol{"tick", "BIGINT", "CAST(? AS SIGNED)"}
	myColToken    = myCol{"token", "BIGINT", "CAST(? AS SIGNED)"}
	myColCatchUp  = myCol{"catch_up", "BOOLEAN", "CAST(? AS SIGNED)"}
	myColStarted  = myCol{"started", "DATETIME(6)", "CAST(? AS DATETIME(6))"}
	myColEnded    = myCol{"ended", "DATETIME(6)", "CAST(? AS DATETIME(6))"}
	myColInstance = myCol{"instance", "TEXT CHARACTER SET utf8mb4", "CONVERT(? USING utf8mb4)"}
	myColResult   = myCol{"result", "TEXT CHARACTER SET utf8mb4", "CONVERT(? USING utf8mb4)"}
	myColError    = myCol{"error", "TEXT CHARACTER SET utf8mb4", "CONVERT(? USING utf8mb4)"}
	myColAttempts = myCol{"attempts", "INT", "CAST(? AS SIGNED)"}
)

// myTable returns a table of rows (one value per column of cols, each a
// string, int64, bool or nil), aliased v, to put after FROM or JOIN, and
// appends its arguments to args: a JSON_TABLE if useJSON, else UNION ALL
// rows.
func myTable(useJSON bool, args []any, cols []myCol, rows [][]any) (string, []any, error) {
	var b strings.Builder
	if useJSON {
		doc, err := json.Marshal(rows)
		if err != nil {
			return "", nil, err
		}
		b.WriteString("JSON_TABLE(?, '$[*]' COLUMNS (")
		for c, col := range cols {
			if c > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s %s PATH '$[%d]'", col.name, col.typ, c)
		}
		b.WriteString(")) v")
		return b.String(), append(args, string(doc)), nil
	}
	b.WriteByte('(')
	for k, row := range rows {
		if k > 0 {
			b.WriteString("\nUNION ALL ")
		}
		b.WriteString("SELECT ")
		for c, col := range cols {
			if c > 0 {
				b.WriteString(", ")
			}
			b.WriteString(col.union)
			if k == 0 {
				b.WriteString(" AS " + col.name)
			}
		}
		args = append(args, row...)
	}
	b.WriteString(") v")
	return b.String(), args, nil
}

// feature caches whether the server has a feature: unknown until a probe
// gets the server's own answer.
type feature struct{ v atomic.Int32 }

const (
	featureUnknown = iota
	featureYes
	featureNo
)

// known returns the cached answer, if there is one.
func (f *feature) known() (has, ok bool) {
	v := f.v.Load()
	return v == featureYes, v != featureUnknown
}

// set caches has.
func (f *feature) set(has bool) {
	if has {
		f.v.Store(featureYes)
	} else {
		f.v.Store(featureNo)
	}
}

// learn caches the outcome of a probe of the feature and reports whether
// it succeeded: without an error, the server has it; with one the server
// answered (b.permanent), it has not, and b logs msg; any other error
// (the network's) leaves it unknown.
func (f *feature) learn(b *Backend, err error, msg string) bool {
	switch {
	case err == nil:
		f.set(true)
	case b.permanent(err):
		b.log.Info(msg, "err", err)
		f.set(false)
	}
	return err == nil
}

// jsonTable reports whether the server has JSON_TABLE, asking it the
// first time (and again after an answer that was not the server's).
func (l *tickLedger) jsonTable(ctx context.Context) bool {
	b := l.b
	if has, ok := b.jsonTable.known(); ok {
		return has
	}
	var n int
	err := b.cfg.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM JSON_TABLE('[1]', '$[*]' COLUMNS (x INT PATH '$')) AS t").Scan(&n)
	return b.jsonTable.learn(b, err, "the server has no JSON_TABLE: the ledger sends its rows as UNION ALL")
}

// myList returns n copies of item separated by sep.
func myList(n int, item, sep string) string {
	var b strings.Builder
	for k := range n {
		if k > 0 {
			b.WriteString(sep)
		}
		b.WriteString(item)
	}
	return b.String()
}

func mysqlLastClaimed(table string, n int) string {
	return "SELECT job, last_tick FROM " + table + "_ticks WHERE election = ? AND job IN (" + myList(n, "?", ", ") + ")"
}

// mysqlTime formats t as a UTC DATETIME(6) literal, independent of the
// connection's loc and time_zone settings; nil for the zero time.
func mysqlTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format("2006-01-02 15:04:05.000000")
}

// claimMySQL runs one claim transaction for items (sorted by job,
// distinct), of at most seven statements whatever their number:
//
//  1. share-lock the lease row, which must hold token and be live;
//  2. lock the tick rows of the jobs that have one (SELECT ... FOR
//     UPDATE, in the order of the jobs);
//  3. insert the tick rows of the jobs that had none (a concurrent first
//     claim makes it fail with a duplicate key, and the caller retries);
//  4. move forward the tick rows older than their claim;
//  5. insert the runs of the claimed ticks;
//  6. read the claimed jobs' runs beyond History;
//  7. delete them.
//
// READ COMMITTED: no gap locks, so claims of different new jobs do not
// deadlock on the index gap between them.
func (l *tickLedger) claimMySQL(ctx context.Context, token int64, items []claimItem) (claimChunk, error) {
	b := l.b
	t := b.cfg.Table
	useJSON := l.jsonTable(ctx) // before the transaction takes a connection of the pool
	// A claim whose connection is cut mid-transaction would hold its
	// share lock on the lease row: it runs on a connection of its own,
	// guarded (guardIdle).
	conn, err := b.cfg.DB.Conn(ctx)
	if err != nil {
		return claimChunk{}, err
	}
	defer conn.Close()
	defer b.guardIdle(ctx, conn)()
	tx, err := conn.BeginTx(ctx, &dbsql.TxOptions{Isolation: dbsql.LevelReadCommitted})
	if err != nil {
		return claimChunk{}, err
	}
	defer tx.Rollback()
	var live bool
	err = tx.QueryRowContext(ctx, b.q.leaseShare, token, b.cfg.Election).Scan(&live)
	if errors.Is(err, dbsql.ErrNoRows) || (err == nil && !live) {
		return claimChunk{stale: true}, nil
	}
	if err != nil {
		return claimChunk{}, err
	}
	b.stepped(1)

	jobs := make([][]any, len(items))
	for k, it := range items {
		jobs[k] = []any{it.job}
	}
	v, args, err := myTable(useJSON, nil, []myCol{myColJob}, jobs)
	if err != nil {
		return claimChunk{}, err
	}
	rows, err := tx.QueryContext(ctx, "SELECT k.job, k.last_tick FROM "+v+
		" STRAIGHT_JOIN "+t+"_ticks k ON k.election = ? AND k.job = v.job FOR UPDATE", append(args, b.cfg.Election)...)
	if err != nil {
		return claimChunk{}, err
	}
	last := map[string]int64{}
	if err := eachJobTick(rows, func(job string, tick int64) { last[l.jobKey(job)] = tick }); err != nil {
		return claimChunk{}, err
	}
	b.stepped(2)

	res := claimChunk{claimed: make([]bool, len(items))}
	var fresh, newer, claimed []claimItem
	for k, it := range items {
		prev, ok := last[l.jobKey(it.job)]
		switch {
		case !ok:
			fresh = append(fresh, it)
		case prev < it.tick:
			newer = append(newer, it)
		default:
			continue
		}
		res.claimed[k] = true
		claimed = append(claimed, it)
	}
	if len(claimed) == 0 {
		return res, tx.Commit()
	}
	if len(fresh) > 0 {
		args := make([]any, 0, 4*len(fresh))
		for _, it := range fresh {
			args = append(args, b.cfg.Election, it.job, it.tick, token)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+t+"_ticks (election, job, last_tick, token, claimed_at) VALUES "+
			myList(len(fresh), "(?, ?, ?, ?, UTC_TIMESTAMP(6))", ", "), args...); err != nil {
			return claimChunk{}, err
		}
		b.stepped(3)
	}
	if len(newer) > 0 {
		ticks := make([][]any, len(newer))
		for k, it := range newer {
			ticks[k] = []any{it.job, it.tick}
		}
		v, args, err := myTable(useJSON, nil, []myCol{myColJob, myColTick}, ticks)
		if err != nil {
			return claimChunk{}, err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE "+v+" STRAIGHT_JOIN "+t+"_ticks k ON k.election = ? AND k.job = v.job\n"+
			"SET k.last_tick = v.tick, k.token = ?, k.claimed_at = UTC_TIMESTAMP(6)", append(args, b.cfg.Election, token)...); err != nil {
			return claimChunk{}, err
		}
		b.stepped(4)
	}
	runs := make([][]any, len(claimed))
	for k, it := range claimed {
		runs[k] = []any{it.job, it.tick, it.instance, it.catchUp, mysqlTime(it.started)}
	}
	v, args, err = myTable(useJSON, []any{b.cfg.Election, token}, []myCol{myColJob, myColTick, myColInstance, myColCatchUp, myColStarted}, runs)
	if err != nil {
		return claimChunk{}, err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+t+"_runs (election, job, tick, instance, token, catch_up, started, ended, result, error)\n"+
		"SELECT ?, v.job, v.tick, v.instance, ?, v.catch_up, v.started, NULL, 'running', '' FROM "+v+"\n"+
		"ON DUPLICATE KEY UPDATE instance = v.instance, token = ?, catch_up = v.catch_up, started = v.started,"+
		" ended = NULL, result = 'running', error = ''", append(args, token)...); err != nil {
		return claimChunk{}, err
	}
	b.stepped(5)
	// The runs beyond the newest History (the transaction sees its own
	// new ones), read without locks: inside the DELETE, the read took
	// shared locks on every run of the claimed jobs, which a concurrent
	// Finish of two of them deadlocked with. Then they are deleted in
	// the order of job and tick, as Finish locks them.
	jobs = jobs[:0]
	for _, it := range claimed {
		jobs = append(jobs, []any{it.job})
	}
	v, args, err = myTable(useJSON, nil, []myCol{myColJob}, jobs)
	if err != nil {
		return claimChunk{}, err
	}
	rows, err = tx.QueryContext(ctx, "SELECT job, tick FROM (\n"+
		"\tSELECT x.job, x.tick, ROW_NUMBER() OVER (PARTITION BY x.job ORDER BY x.tick DESC) AS n\n"+
		"\tFROM "+v+" STRAIGHT_JOIN "+t+"_runs x ON x.election = ? AND x.job = v.job\n"+
		") ranked WHERE n > ?", append(args, b.cfg.Election, b.cfg.History)...)
	if err != nil {
		return claimChunk{}, err
	}
	var doomed [][]any
	if err := eachJobTick(rows, func(job string, tick int64) { doomed = append(doomed, []any{job, tick}) }); err != nil {
		return claimChunk{}, err
	}
	b.stepped(6)
	if len(doomed) > 0 {
		slices.SortFunc(doomed, func(x, y []any) int {
			return cmp.Or(strings.Compare(x[0].(string), y[0].(string)), cmp.Compare(x[1].(int64), y[1].(int64)))
		})
		v, args, err = myTable(useJSON, nil, []myCol{myColJob, myColTick}, doomed)
		if err != nil {
			return claimChunk{}, err
		}
		if _, err := tx.ExecContext(ctx, "DELETE r FROM "+v+" STRAIGHT_JOIN "+t+"_runs r ON r.election = ? AND r.job = v.job AND r.tick = v.tick",
			append(args, b.cfg.Election)...); err != nil {
			return claimChunk{}, err
		}
	}
	return res, tx.Commit()
}

// stepped calls the test hook claimStep, if set, after statement done of
// a claim transaction.
func (b *Backend) stepped(done int) {
	if b.claimStep != nil {
		b.claimStep(done)
	}
}

// finishMySQL stores the outcomes of items (sorted by job and tick) in
// one UPDATE joined to them, locking the runs in that order.
func (l *tickLedger) finishMySQL(ctx context.Context, items []finishItem) error {
	b := l.b
	useJSON := l.jsonTable(ctx)
	runs := make([][]any, len(items))
	for k, it := range items {
		runs[k] = []any{it.job, it.tick, it.token, mysqlTime(it.ended), it.result, it.msg, it.tries}
	}
	v, args, err := myTable(useJSON, nil, []myCol{myColJob, myColTick, myColToken, myColEnded, myColResult, myColError, myColAttempts}, runs)
	if err != nil {
		return err
	}
	_, err = b.cfg.DB.ExecContext(ctx, "UPDATE "+v+" STRAIGHT_JOIN "+b.cfg.Table+"_runs r\n"+
		"ON r.election = ? AND r.job = v.job AND r.tick = v.tick AND r.token = v.token\n"+
		"SET r.ended = v.ended, r.result = v.result, r.error = v.error, r.attempts = v.attempts", append(args, b.cfg.Election)...)
	return err
}

// eachJobTick calls f with each row of rows, a job and a tick, and closes
// rows.
func eachJobTick(rows *dbsql.Rows, f func(job string, tick int64)) error {
	defer rows.Close()
	for rows.Next() {
		var job string
		var tick int64
		if err := rows.Scan(&job, &tick); err != nil {
			return err
		}
		f(job, tick)
	}
	return rows.Err()
}
