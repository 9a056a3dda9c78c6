package etcd_test

import (
	"context"
	"log"
	"os/signal"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/election"
)

// Campaign for "/baton/elections/reports" and lead until SIGTERM. Watch it
// with `etcdctl elect -l /baton/elections/reports`.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            []string{"https://etcd-1:2379", "https://etcd-2:2379", "https://etcd-3:2379"},
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		// TLS: &tls.Config{...}, Username/Password: ...
	})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()

	backend, err := etcd.New(etcd.Config{Client: cli, Prefix: "/baton/elections/reports"})
	if err != nil {
		log.Fatal(err)
	}
	elector, err := election.New(election.Config{Backend: backend, Identity: election.Identity{ID: "reports-7f9c"}})
	if err != nil {
		log.Fatal(err)
	}
	err = elector.Run(ctx, func(ctx context.Context, term election.Term) error {
		log.Printf("leading with token %d", term.Token())
		<-ctx.Done() // run jobs here; drain under term.Context()
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}
