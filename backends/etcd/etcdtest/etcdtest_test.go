package etcdtest_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/batonhq/baton/backends/etcd/etcdtest"
)

func TestServer_RestartKeepsDataAndEndpoint(t *testing.T) {
	s := etcdtest.Start(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("after restart: %v", resp.Kvs)
	}
}

func TestStartDir_ReusesDataDirOnNewPorts(t *testing.T) {
	dir := t.TempDir()
	s, err := etcdtest.StartDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	put := func(s *etcdtest.Server, k string) []byte {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if k != "" {
			if _, err := cli.Put(ctx, k, "v"); err != nil {
				t.Fatal(err)
			}
		}
		resp, err := cli.Get(ctx, "first")
		if err != nil || len(resp.Kvs) == 0 {
			t.Fatalf("get: %v, %v", resp, err)
		}
		return resp.Kvs[0].Value
	}
	put(s, "first")
	s.Stop()
	s2, err := etcdtest.StartDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Stop()
	if v := put(s2, ""); string(v) != "v" {
		t.Fatalf("value after reopening the data dir = %q", v)
	}
}
