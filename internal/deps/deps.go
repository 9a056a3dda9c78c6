//go:build deps

// Package deps pins the module's dependencies while the packages that use
// them are being written. It is never built.
package deps

import (
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/hashicorp/consul/api"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/robfig/cron/v3"
	_ "go.etcd.io/etcd/client/v3/concurrency"
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "golang.org/x/sync/errgroup"
	_ "gopkg.in/yaml.v3"
)
