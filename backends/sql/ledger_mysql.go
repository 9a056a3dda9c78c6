package sql

import (
	"context"
	dbsql "database/sql"
	"encoding/json"
	"fmt"
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
