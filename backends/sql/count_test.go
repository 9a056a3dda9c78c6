package sql_test

import (
	"context"
	dbsql "database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
)

// roundTrips counts what a pool sends to its server, as seen at the
// database/sql driver interface: statements executed (directly or as a
// prepared statement), statements prepared (go-sql-driver/mysql prepares
// each statement with arguments, unless interpolateParams is set), and
// transactions begun, committed and rolled back.
type roundTrips struct {
	stmts, prepares, begins, commits, rollbacks atomic.Int64
}

func (r *roundTrips) String() string {
	return fmt.Sprintf("%d statements, %d prepares, %d begins, %d commits, %d rollbacks",
		r.stmts.Load(), r.prepares.Load(), r.begins.Load(), r.commits.Load(), r.rollbacks.Load())
}

func (r *roundTrips) reset() {
	r.stmts.Store(0)
	r.prepares.Store(0)
	r.begins.Store(0)
	r.commits.Store(0)
	r.rollbacks.Store(0)
}

// countingDB returns a pool on the server (no proxy) whose round trips
// are counted, closed when t ends.
func (s *server) countingDB(t *testing.T) (*dbsql.DB, *roundTrips) {
	r := &roundTrips{}
	db := dbsql.OpenDB(countConnector{s.connector(s.target, ""), r})
	t.Cleanup(func() { db.Close() })
	return db, r
}

type countConnector struct {
	driver.Connector
	r *roundTrips
}

func (c countConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countConn{conn, c.r}, nil
}

// countConn forwards to the driver's connection every optional interface
// the two drivers implement and database/sql uses.
type countConn struct {
	driver.Conn
	r *roundTrips
}

var (
	_ driver.ConnPrepareContext = (*countConn)(nil)
	_ driver.ExecerContext      = (*countConn)(nil)
	_ driver.QueryerContext     = (*countConn)(nil)
	_ driver.ConnBeginTx        = (*countConn)(nil)
	_ driver.NamedValueChecker  = (*countConn)(nil)
	_ driver.SessionResetter    = (*countConn)(nil)
	_ driver.Validator          = (*countConn)(nil)
	_ driver.Pinger             = (*countConn)(nil)
)

func (c *countConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.r.prepares.Add(1)
	st, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return &countStmt{st, c.r}, nil
}

func (c *countConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	res, err := e.ExecContext(ctx, query, args)
	if !errors.Is(err, driver.ErrSkip) {
		c.r.stmts.Add(1)
	}
	return res, err
}

func (c *countConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	rows, err := q.QueryContext(ctx, query, args)
	if !errors.Is(err, driver.ErrSkip) {
		c.r.stmts.Add(1)
	}
	return rows, err
}

func (c *countConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.r.begins.Add(1)
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return countTx{tx, c.r}, nil
}

func (c *countConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.Conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func (c *countConn) ResetSession(ctx context.Context) error {
	if rs, ok := c.Conn.(driver.SessionResetter); ok {
		return rs.ResetSession(ctx)
	}
	return nil
}

func (c *countConn) IsValid() bool {
	v, ok := c.Conn.(driver.Validator)
	return !ok || v.IsValid()
}

func (c *countConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

type countTx struct {
	driver.Tx
	r *roundTrips
}

func (t countTx) Commit() error {
	t.r.commits.Add(1)
	return t.Tx.Commit()
}

func (t countTx) Rollback() error {
	t.r.rollbacks.Add(1)
	return t.Tx.Rollback()
}

type countStmt struct {
	driver.Stmt
	r *roundTrips
}

func (s *countStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.r.stmts.Add(1)
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s *countStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.r.stmts.Add(1)
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}
