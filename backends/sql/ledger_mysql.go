package sql

import (
	"context"
	dbsql "database/sql"
	"errors"
	"strings"
	"time"
)

// MySQL's ledger statements list their rows: an IN list, or a derived
// table of UNION ALL rows (MariaDB's VALUES table constructor and MySQL's
// VALUES ROW() differ, and JSON_TABLE needs MariaDB 10.6). They are built
// for each chunk from the (validated) table name and the chunk's size;
// every value is a bind parameter. A string compared with a key column
// is converted to the column's utf8mb4_bin, whatever the connection's
// character set and collation.
//
// Every statement that locks or writes existing rows reaches them from
// the chunk's list, through STRAIGHT_JOIN, by their full primary key
// (eq_ref): left to itself, the optimizer may read all of the election's
// rows by the key's prefix instead, and a locking read of rows of
// another chunk's jobs waits for that chunk's transaction, which may be
// waiting for this one (a deadlock seen with two chunks of 500 jobs).

const myJob = "CONVERT(? USING utf8mb4) COLLATE utf8mb4_bin"

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

// myRows returns a derived table of n rows of cols (expression AS name,
// each expression holding one placeholder), rows joined by UNION ALL.
func myRows(n int, cols ...string) string {
	var b strings.Builder
	b.WriteByte('(')
	for k := range n {
		if k > 0 {
			b.WriteString("\nUNION ALL ")
		}
		b.WriteString("SELECT ")
		for c, col := range cols {
			if c > 0 {
				b.WriteString(", ")
			}
			if k > 0 { // names only in the first row
				col = col[:strings.LastIndex(col, " AS ")]
			}
			b.WriteString(col)
		}
	}
	b.WriteByte(')')
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
// distinct), of at most six statements whatever their number:
//
//  1. share-lock the lease row, which must hold token and be live;
//  2. lock the tick rows of the jobs that have one (SELECT ... FOR
//     UPDATE, in the order of the jobs);
//  3. insert the tick rows of the jobs that had none (a concurrent first
//     claim makes it fail with a duplicate key, and the caller retries);
//  4. move forward the tick rows older than their claim (one UPDATE
//     joined to the claims);
//  5. insert the runs of the claimed ticks;
//  6. delete the claimed jobs' runs beyond History.
//
// READ COMMITTED: no gap locks, so claims of different new jobs do not
// deadlock on the index gap between them.
func (l *tickLedger) claimMySQL(ctx context.Context, token int64, items []claimItem) (claimChunk, error) {
	b := l.b
	t := b.cfg.Table
	tx, err := b.cfg.DB.BeginTx(ctx, &dbsql.TxOptions{Isolation: dbsql.LevelReadCommitted})
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

	args := make([]any, 0, len(items)+1)
	for _, it := range items {
		args = append(args, it.job)
	}
	args = append(args, b.cfg.Election)
	rows, err := tx.QueryContext(ctx, "SELECT k.job, k.last_tick FROM "+myRows(len(items), myJob+" AS job")+
		" v STRAIGHT_JOIN "+t+"_ticks k ON k.election = ? AND k.job = v.job FOR UPDATE", args...)
	if err != nil {
		return claimChunk{}, err
	}
	last := map[string]int64{}
	for rows.Next() {
		var job string
		var tick int64
		if err := rows.Scan(&job, &tick); err != nil {
			rows.Close()
			return claimChunk{}, err
		}
		last[l.jobKey(job)] = tick
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return claimChunk{}, err
	}

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
	}
	if len(newer) > 0 {
		args := make([]any, 0, 2*len(newer)+2)
		for _, it := range newer {
			args = append(args, it.job, it.tick)
		}
		args = append(args, b.cfg.Election, token)
		if _, err := tx.ExecContext(ctx, "UPDATE "+myRows(len(newer), myJob+" AS job", "CAST(? AS SIGNED) AS tick")+
			" v STRAIGHT_JOIN "+t+"_ticks k ON k.election = ? AND k.job = v.job\n"+
			"SET k.last_tick = v.tick, k.token = ?, k.claimed_at = UTC_TIMESTAMP(6)", args...); err != nil {
			return claimChunk{}, err
		}
	}
	args = []any{b.cfg.Election, token}
	for _, it := range claimed {
		args = append(args, it.job, it.tick, it.instance, it.catchUp, mysqlTime(it.started))
	}
	args = append(args, token)
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+t+"_runs (election, job, tick, instance, token, catch_up, started, ended, result, error)\n"+
		"SELECT ?, v.job, v.tick, v.instance, ?, v.catch_up, v.started, NULL, 'running', '' FROM "+
		myRows(len(claimed), myJob+" AS job", "CAST(? AS SIGNED) AS tick", "CONVERT(? USING utf8mb4) AS instance",
			"CAST(? AS SIGNED) AS catch_up", "CAST(? AS DATETIME(6)) AS started")+" v\n"+
		"ON DUPLICATE KEY UPDATE instance = v.instance, token = ?, catch_up = v.catch_up, started = v.started,"+
		" ended = NULL, result = 'running', error = ''", args...); err != nil {
		return claimChunk{}, err
	}
	// The transaction sees its own new runs: keep the newest History.
	args = make([]any, 0, len(claimed)+3)
	for _, it := range claimed {
		args = append(args, it.job)
	}
	args = append(args, b.cfg.Election, b.cfg.History, b.cfg.Election)
	if _, err := tx.ExecContext(ctx, "DELETE r FROM (\n"+
		"\tSELECT job, tick FROM (\n"+
		"\t\tSELECT x.job, x.tick, ROW_NUMBER() OVER (PARTITION BY x.job ORDER BY x.tick DESC) AS n\n"+
		"\t\tFROM "+myRows(len(claimed), myJob+" AS job")+" v STRAIGHT_JOIN "+t+"_runs x ON x.election = ? AND x.job = v.job\n"+
		"\t) ranked WHERE n > ?\n"+
		") d STRAIGHT_JOIN "+t+"_runs r ON r.election = ? AND r.job = d.job AND r.tick = d.tick", args...); err != nil {
		return claimChunk{}, err
	}
	return res, tx.Commit()
}

// finishMySQL stores the outcomes of items (sorted by job and tick) in
// one UPDATE joined to them, locking the runs in that order.
func (l *tickLedger) finishMySQL(ctx context.Context, items []finishItem) error {
	b := l.b
	args := make([]any, 0, 6*len(items)+1)
	for _, it := range items {
		args = append(args, it.job, it.tick, it.token, mysqlTime(it.ended), it.result, it.msg)
	}
	args = append(args, b.cfg.Election)
	_, err := b.cfg.DB.ExecContext(ctx, "UPDATE "+
		myRows(len(items), myJob+" AS job", "CAST(? AS SIGNED) AS tick", "CAST(? AS SIGNED) AS token",
			"CAST(? AS DATETIME(6)) AS ended", "CONVERT(? USING utf8mb4) AS result", "CONVERT(? USING utf8mb4) AS error")+
		" v STRAIGHT_JOIN "+b.cfg.Table+"_runs r ON r.election = ? AND r.job = v.job AND r.tick = v.tick AND r.token = v.token\n"+
		"SET r.ended = v.ended, r.result = v.result, r.error = v.error", args...)
	return err
}
