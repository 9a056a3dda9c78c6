package readme_test

import (
	"context"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/backends/etcd"
	"github.com/batonhq/baton/election"
	"github.com/batonhq/baton/schedulerhost"
)

func sendReport(ctx context.Context, token uint64) error { return nil }

// Example_library is the library example of docs/configuration.md ("By
// hand"): an etcd election and one nightly job. It is compiled, not run.
func Example_library() {
	// README:begin
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	backend, err := etcd.New(etcd.Config{Client: cli, Prefix: "/baton/elections/reports"})
	if err != nil {
		log.Fatal(err)
	}
	hostname, _ := os.Hostname()
	host, err := schedulerhost.New(schedulerhost.Config{
		Jobs: []schedulerhost.Job{{
			Name:     "nightly-report",
			Schedule: "0 2 * * *", // 02:00 UTC
			Run: func(ctx context.Context) error {
				token, _ := election.TokenFromContext(ctx) // fencing token of this term
				return sendReport(ctx, token)              // e.g. UPDATE ... WHERE last_token <= $token
			},
		}},
		Ledger:   backend.Ledger(), // once per tick, catch-up after failover, history
		Instance: hostname,
	})
	if err != nil {
		log.Fatal(err)
	}
	elector, err := election.New(election.Config{Backend: backend, Identity: election.Identity{ID: hostname}})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Campaigns; while leading runs the jobs; on SIGTERM drains, releases, returns.
	if err := elector.Run(ctx, host.Lead); err != nil {
		log.Fatal(err)
	}
	// README:end
}

// TestREADMEShowsExample checks that docs/configuration.md ("By hand")
// contains the code between the README markers above, verbatim (one tab
// of indentation removed).
func TestREADMEShowsExample(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	begin := strings.Index(s, "// README:begin\n")
	end := strings.Index(s, "\t// README:end")
	if begin < 0 || end < begin {
		t.Fatal("README markers not found")
	}
	var lines []string
	for _, l := range strings.Split(s[begin+len("// README:begin\n"):end], "\n") {
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	want := strings.Join(lines, "\n")
	if !strings.Contains(string(readme), want) {
		t.Errorf("docs/configuration.md does not show the example verbatim; it should contain:\n%s", want)
	}
}
