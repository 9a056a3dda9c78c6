package main

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/backends/etcd"
)

func main() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{os.Getenv("ETCD_ENDPOINT")}})
	if err != nil {
		log.Fatal(err)
	}
	backend, err := etcd.New(etcd.Config{Client: cli, Prefix: "/baton/elections/reports"})
	if err != nil {
		log.Fatal(err)
	}
	b, err := baton.New(baton.Config{Backend: backend, Election: "reports", Jobs: []baton.Job{{
		Name:     "report",
		Schedule: "*/5 * * * * *", // every 5 s, on one instance only
		Run:      func(ctx context.Context) error { log.Print("report sent"); return nil },
	}}})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := b.Run(ctx); err != nil { // SIGTERM: the run in flight drains, then hand-over
		log.Fatal(err)
	}
}
