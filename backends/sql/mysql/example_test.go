package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/batonhq/baton/backends/sql/mysql"
	"github.com/batonhq/baton/election"
)

// An instance campaigning on MySQL or MariaDB. The connector has dial,
// read and write timeouts so that a dead network fails statements instead
// of hanging them; followers poll the row every PollInterval.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	mc, err := mysqldriver.ParseDSN("app@tcp(db.internal:3306)/app?tls=true")
	if err != nil {
		log.Fatal(err)
	}
	mc.Timeout, mc.ReadTimeout, mc.WriteTimeout = 5*time.Second, 30*time.Second, 30*time.Second
	conn, err := mysqldriver.NewConnector(mc)
	if err != nil {
		log.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()

	backend, err := mysql.New(mysql.Config{
		DB:       db,
		Table:    "baton_lease", // created by backends/sql/schema/mysql.sql, or:
		Election: "billing-cron",
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := backend.EnsureSchema(ctx); err != nil { // opt-in; Check only verifies
		log.Fatal(err)
	}
	host, _ := os.Hostname()
	el, err := election.New(election.Config{Backend: backend, Identity: election.Identity{ID: fmt.Sprintf("%s-%d", host, os.Getpid())}})
	if err != nil {
		log.Fatal(err)
	}
	if err := el.Run(ctx, func(ctx context.Context, term election.Term) error {
		log.Printf("leading with token %d", term.Token())
		<-ctx.Done() // run the schedules here (schedulerhost.Host.Lead, with backend.Ledger())
		return nil
	}); err != nil {
		log.Fatal(err)
	}
}
