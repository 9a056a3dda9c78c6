package postgres_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/batonhq/baton/backends/sql/postgres"
	"github.com/batonhq/baton/election"
)

// An instance campaigning on PostgreSQL. The DSN carries connect_timeout
// so that a dead network fails statements instead of hanging them; the
// same DSN opens the dedicated LISTEN connection.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	dsn := "postgres://app@db.internal:5432/app?sslmode=verify-full&connect_timeout=5"
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		log.Fatal(err)
	}
	db := stdlib.OpenDB(*cc)
	defer db.Close()

	backend, err := postgres.New(postgres.Config{
		DB:       db,
		Table:    "ops.baton_lease", // created by backends/sql/schema/postgres.sql, or:
		Election: "billing-cron",
		Listen:   postgres.ListenDSN(dsn),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := backend.EnsureSchema(ctx); err != nil { // opt-in; Check only verifies
		log.Fatal(err)
	}
	host, _ := os.Hostname()
	el, err := election.New(election.Config{
		Backend:  backend,
		Identity: election.Identity{ID: fmt.Sprintf("%s-%d", host, os.Getpid())},
	})
	if err != nil {
		log.Fatal(err)
	}
	err = el.Run(ctx, func(ctx context.Context, term election.Term) error {
		log.Printf("leading with token %d", term.Token())
		<-ctx.Done() // run the schedules here (schedulerhost.Host.Lead, with backend.Ledger())
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}
