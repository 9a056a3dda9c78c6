package fence

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
)

// Store keeps fences for the HTTP middleware. Advance records tok as the
// newest token of resource and returns nil, or returns a *StaleError when
// the fence holds a newer one. It is atomic: of two concurrent calls, the
// older token is refused once the newer has been recorded.
type Store interface {
	Advance(ctx context.Context, resource string, tok Token) error
}

// Memory is a Store in one process's memory, for a receiver that runs as
// one process and whose resource is also in that process, and for tests.
// Its fences are lost on restart: a fence that must survive the process
// lives with the resource (SQLStore, redisfence). The zero value is ready;
// it is safe for concurrent use.
type Memory struct {
	Election string

	mu     sync.Mutex
	fences map[string]Token
}

// Advance implements Store.
func (m *Memory) Advance(_ context.Context, resource string, tok Token) error {
	if err := check(m.Election, resource, tok); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.fences[resource]; ok && tok.Less(f) {
		return &StaleError{Resource: resource, Token: tok, Fence: f}
	}
	if m.fences == nil {
		m.fences = make(map[string]Token)
	}
	m.fences[resource] = tok
	return nil
}

// Reset deletes the fence of resource (see SQL.Reset).
func (m *Memory) Reset(resource string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.fences, resource)
}

// SQLStore is a Store on a SQL guard's table: each Advance is a
// transaction of its own on DB.
type SQLStore struct {
	DB    *sql.DB
	Guard *SQL
}

// Advance implements Store.
func (s SQLStore) Advance(ctx context.Context, resource string, tok Token) (err error) {
	tx, err := s.DB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("fence: begin: %w", err)
	}
	if err := s.Guard.Check(ctx, tx, resource, tok); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return s.Guard.dbErr("commit", resource, err)
	}
	return nil
}
