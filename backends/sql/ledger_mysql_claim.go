package sql

import (
	"cmp"
	"context"
	dbsql "database/sql"
	"errors"
	"slices"
	"strings"
)

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

	last, err := l.lockMySQLTicks(ctx, tx, useJSON, items)
	if err != nil {
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
	if err := l.writeMySQLTicks(ctx, tx, useJSON, token, fresh, newer); err != nil {
		return claimChunk{}, err
	}
	if err := l.insertMySQLRuns(ctx, tx, useJSON, token, claimed); err != nil {
		return claimChunk{}, err
	}
	b.stepped(5)
	if err := l.trimMySQLRuns(ctx, tx, useJSON, claimed); err != nil {
		return claimChunk{}, err
	}
	return res, tx.Commit()
}

// lockMySQLTicks locks the tick rows of the jobs of items that have one
// (statement 2 of claimMySQL) and returns their last ticks by jobKey.
func (l *tickLedger) lockMySQLTicks(ctx context.Context, tx *dbsql.Tx, useJSON bool, items []claimItem) (map[string]int64, error) {
	jobs := make([][]any, len(items))
	for k, it := range items {
		jobs[k] = []any{it.job}
	}
	v, args, err := myTable(useJSON, nil, []myCol{myColJob}, jobs)
	if err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, "SELECT k.job, k.last_tick FROM "+v+
		" STRAIGHT_JOIN "+l.b.cfg.Table+"_ticks k ON k.election = ? AND k.job = v.job FOR UPDATE", append(args, l.b.cfg.Election)...)
	if err != nil {
		return nil, err
	}
	last := map[string]int64{}
	if err := eachJobTick(rows, func(job string, tick int64) { last[l.jobKey(job)] = tick }); err != nil {
		return nil, err
	}
	return last, nil
}

// writeMySQLTicks inserts the tick rows of fresh, the jobs that had
// none, and moves forward those of newer (statements 3 and 4 of
// claimMySQL, each only if it has rows).
func (l *tickLedger) writeMySQLTicks(ctx context.Context, tx *dbsql.Tx, useJSON bool, token int64, fresh, newer []claimItem) error {
	b := l.b
	t := b.cfg.Table
	if len(fresh) > 0 {
		args := make([]any, 0, 4*len(fresh))
		for _, it := range fresh {
			args = append(args, b.cfg.Election, it.job, it.tick, token)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+t+"_ticks (election, job, last_tick, token, claimed_at) VALUES "+
			myList(len(fresh), "(?, ?, ?, ?, UTC_TIMESTAMP(6))", ", "), args...); err != nil {
			return err
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
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE "+v+" STRAIGHT_JOIN "+t+"_ticks k ON k.election = ? AND k.job = v.job\n"+
			"SET k.last_tick = v.tick, k.token = ?, k.claimed_at = UTC_TIMESTAMP(6)", append(args, b.cfg.Election, token)...); err != nil {
			return err
		}
		b.stepped(4)
	}
	return nil
}

// insertMySQLRuns inserts the runs of the claimed ticks (statement 5 of
// claimMySQL).
func (l *tickLedger) insertMySQLRuns(ctx context.Context, tx *dbsql.Tx, useJSON bool, token int64, claimed []claimItem) error {
	b := l.b
	runs := make([][]any, len(claimed))
	for k, it := range claimed {
		runs[k] = []any{it.job, it.tick, it.instance, it.catchUp, mysqlTime(it.started)}
	}
	v, args, err := myTable(useJSON, []any{b.cfg.Election, token}, []myCol{myColJob, myColTick, myColInstance, myColCatchUp, myColStarted}, runs)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, "INSERT INTO "+b.cfg.Table+"_runs (election, job, tick, instance, token, catch_up, started, ended, result, error)\n"+
		"SELECT ?, v.job, v.tick, v.instance, ?, v.catch_up, v.started, NULL, 'running', '' FROM "+v+"\n"+
		"ON DUPLICATE KEY UPDATE instance = v.instance, token = ?, catch_up = v.catch_up, started = v.started,"+
		" ended = NULL, result = 'running', error = ''", append(args, token)...)
	return err
}

// trimMySQLRuns reads the claimed jobs' runs beyond History and deletes
// them (statements 6 and 7 of claimMySQL, the second only if the first
// found any).
//
// The runs beyond the newest History (the transaction sees its own
// new ones), read without locks: inside the DELETE, the read took
// shared locks on every run of the claimed jobs, which a concurrent
// Finish of two of them deadlocked with. Then they are deleted in
// the order of job and tick, as Finish locks them.
func (l *tickLedger) trimMySQLRuns(ctx context.Context, tx *dbsql.Tx, useJSON bool, claimed []claimItem) error {
	b := l.b
	t := b.cfg.Table
	jobs := make([][]any, 0, len(claimed))
	for _, it := range claimed {
		jobs = append(jobs, []any{it.job})
	}
	v, args, err := myTable(useJSON, nil, []myCol{myColJob}, jobs)
	if err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, "SELECT job, tick FROM (\n"+
		"\tSELECT x.job, x.tick, ROW_NUMBER() OVER (PARTITION BY x.job ORDER BY x.tick DESC) AS n\n"+
		"\tFROM "+v+" STRAIGHT_JOIN "+t+"_runs x ON x.election = ? AND x.job = v.job\n"+
		") ranked WHERE n > ?", append(args, b.cfg.Election, b.cfg.History)...)
	if err != nil {
		return err
	}
	var doomed [][]any
	if err := eachJobTick(rows, func(job string, tick int64) { doomed = append(doomed, []any{job, tick}) }); err != nil {
		return err
	}
	b.stepped(6)
	if len(doomed) == 0 {
		return nil
	}
	slices.SortFunc(doomed, func(x, y []any) int {
		return cmp.Or(strings.Compare(x[0].(string), y[0].(string)), cmp.Compare(x[1].(int64), y[1].(int64)))
	})
	v, args, err = myTable(useJSON, nil, []myCol{myColJob, myColTick}, doomed)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, "DELETE r FROM "+v+" STRAIGHT_JOIN "+t+"_runs r ON r.election = ? AND r.job = v.job AND r.tick = v.tick",
		append(args, b.cfg.Election)...)
	return err
}
