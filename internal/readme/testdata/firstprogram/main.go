package main

import (
	"context"
	"github.com/batonhq/baton"
	"github.com/batonhq/baton/backends/etcd"
	"log"
	"os"
)

func main() {
	backend, err := etcd.New(etcd.Config{Endpoints: []string{os.Getenv("ETCD_ENDPOINT")}, Prefix: "/baton/reports"})
	if err != nil {
		log.Fatal(err)
	}
	baton.Main(baton.Config{Backend: backend, Election: "reports", Jobs: []baton.Job{{
		Name: "report", Schedule: "*/5 * * * * *", // every 5 s, on one instance only; SIGTERM drains
		Run: func(ctx context.Context) error { log.Print("report sent"); return nil },
	}}})
}
