package cli

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	batonsql "github.com/batonhq/baton/backends/sql"
)

// ensureSQL connects to the database of --dsn and creates what is missing
// of be's schema, within 30 s. A refused connection says "connect", not
// "ensure schema" with a statement (a wrong MySQL password printed the
// whole CREATE TABLE). The error names --dsn, the backend and the table.
func (b *BackendFlags) ensureSQL(ctx context.Context, db *sql.DB, be *batonsql.Backend) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := db.PingContext(ctx)
	if err != nil {
		err = fmt.Errorf("connect: %w", err)
	} else {
		err = be.EnsureSchema(ctx)
	}
	if err != nil {
		return fmt.Errorf("--dsn: %s table %s: %w", b.Kind, b.table, err)
	}
	return nil
}
