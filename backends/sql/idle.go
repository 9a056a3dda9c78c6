package sql

import (
	"context"
	dbsql "database/sql"
)

// guardIdle makes the server end conn's transaction, and drop the
// connection, once it has sat idle inside it for a second. A transaction
// cut off mid-way (a partition, or a host gone while its TCP connection
// stays half-open) would otherwise keep its locks, among them the lease
// row's share lock of a claim or a fenced control put, and hold the next
// leader's takeover until the server dropped the connection: hours. A
// second is shorter than any lease's remaining time at a cut.
// PostgreSQL's setting is idle_in_transaction_session_timeout, MariaDB's
// idle_transaction_timeout; MySQL has none (the first answer is kept).
// It returns what puts the session's setting back before conn returns to
// the pool.
func (b *Backend) guardIdle(ctx context.Context, conn *dbsql.Conn) (restore func()) {
	set, reset := "SET idle_in_transaction_session_timeout = 1000", "RESET idle_in_transaction_session_timeout"
	if b.drv.Dialect != Postgres {
		if has, ok := b.idleTimeout.known(); ok && !has {
			return func() {}
		}
		set, reset = "SET SESSION idle_transaction_timeout = 1", "SET SESSION idle_transaction_timeout = DEFAULT"
	}
	_, err := conn.ExecContext(ctx, set)
	if b.drv.Dialect != Postgres {
		if !b.idleTimeout.learn(b, err, "the server has no idle_transaction_timeout: a transaction cut off mid-way holds the lease row until the server drops its connection") {
			return func() {}
		}
	} else if err != nil {
		return func() {}
	}
	return func() { _, _ = conn.ExecContext(context.WithoutCancel(ctx), reset) }
}
