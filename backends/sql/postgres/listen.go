package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/backends/sql"
)

// listenOnce opens a connection with connect, LISTENs on p.Channel and
// relays notifications to p.Wake until the connection fails or ctx is
// done. A connection quiet for p.HealthInterval is pinged; a failed ping
// ends it.
func listenOnce(ctx context.Context, connect func(context.Context) (*pgx.Conn, error), p sql.ListenParams) error {
	cctx, cancel := context.WithTimeout(ctx, p.QueryTimeout)
	conn, err := connect(cctx)
	cancel()
	if err != nil {
		return fmt.Errorf("postgres: listen: connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	cctx, cancel = context.WithTimeout(ctx, p.QueryTimeout)
	_, err = conn.Exec(cctx, "LISTEN "+pgx.Identifier{p.Channel}.Sanitize())
	cancel()
	if err != nil {
		return fmt.Errorf("postgres: listen: %w", err)
	}
	p.Wake()
	for {
		wctx, cancel := context.WithTimeout(ctx, p.HealthInterval)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil:
			if n.Channel == p.Channel {
				p.Wake()
			}
		case wctx.Err() != nil && !conn.IsClosed():
			// Quiet for HealthInterval: make sure the connection is alive.
			pctx, cancel := context.WithTimeout(ctx, p.QueryTimeout)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("postgres: listen: ping: %w", err)
			}
		default:
			return fmt.Errorf("postgres: listen: %w", err)
		}
	}
}
