package schedulerhost_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/backends/memory"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/schedulerhost"
)

// One elector, one host: the leader runs the schedule. The in-memory
// backend stands in for etcd, Consul or SQL; a test bubble stands in for
// real time.
func Example() {
	synctest.Test(&testing.T{}, func(t *testing.T) {
		store := memory.New(election.Timing{TTL: 5 * time.Second})
		elector, err := election.New(election.Config{
			Backend:  store.Candidate(),
			Identity: election.Identity{ID: "node-1"},
			Logger:   quiet,
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		host, err := schedulerhost.New(schedulerhost.Config{
			Ledger:   store.Ledger(),
			Instance: "node-1",
			Logger:   quiet,
			Jobs: []schedulerhost.Job{{
				Name:     "send-digest",
				Schedule: "*/10 * * * * *", // every 10 seconds
				Run: func(ctx context.Context) error {
					token, _ := election.TokenFromContext(ctx)
					tick, _ := schedulerhost.TickFromContext(ctx)
					fmt.Printf("%s at %s, token %d\n", tick.Job, tick.Time.Format("15:04:05"), token)
					return nil
				},
			}},
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		ctx, stop := context.WithTimeout(context.Background(), 25*time.Second)
		defer stop()
		if err := elector.Run(ctx, host.Lead); err != nil {
			fmt.Println(err)
		}
	})
	// Output:
	// send-digest at 00:00:10, token 1
	// send-digest at 00:00:20, token 1
}
