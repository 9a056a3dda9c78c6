package pghatest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/internal/envtest"
)

// Start runs a primary and a streaming standby under dir (made if
// missing): subdirectories pg0 and pg1, owned by the postgres user, each
// holding a data directory and a log. The primary (pg0) is made with
// initdb (trust authentication, UTF8, locale C), gets the database
// opts.Database, and the standby (pg1) is a pg_basebackup of it (-R -X
// stream). Start returns once the standby streams with sync_state 'sync'
// (opts.Sync) or 'async'. Ports found free may be taken before a server
// binds them: Start then tries other ones.
//
// When running as root, Start gives others search permission (o+x) on dir
// and those of its parents that lack it, so that the postgres user can
// reach the subdirectories (t.TempDir's parent is 0700); it lists
// nothing.
//
// A missing PostgreSQL installation (or postgres user, or runuser) gives
// an error wrapping envtest.ErrUnavailable. On any error, what Start
// started is stopped and removed. The caller calls Close.
func Start(ctx context.Context, dir string, opts Options) (_ *Pair, err error) {
	if opts.Database == "" {
		opts.Database = DefaultDatabase
	}
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	p := &Pair{bin: bin, opts: opts, uid: -1, gid: -1}
	if os.Geteuid() == 0 {
		if err := p.lookupPostgres(); err != nil {
			return nil, err
		}
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("pghatest: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pghatest: %w", err)
	}
	if p.uid >= 0 {
		if err := searchable(dir); err != nil {
			return nil, err
		}
	}
	ports, err := envtest.FreePorts(2)
	if err != nil {
		return nil, fmt.Errorf("pghatest: %w", err)
	}
	for i := range p.servers {
		name := "pg" + strconv.Itoa(i)
		root := filepath.Join(dir, name)
		if err := os.Mkdir(root, 0o700); err != nil {
			p.removeRoots()
			return nil, fmt.Errorf("pghatest: %w", err)
		}
		p.servers[i] = &Server{Name: name, Port: ports[i], Dir: filepath.Join(root, "data"),
			Log: filepath.Join(root, "server.log"), root: root, pair: p}
		if err := p.chown(root); err != nil {
			p.removeRoots()
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			_ = p.Close()
		}
	}()

	pri, sb := p.servers[0], p.servers[1]
	if err := p.run(ctx, "initdb", "-D", pri.Dir, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		return nil, fmt.Errorf("pghatest: initdb %s: %w", pri.Name, err)
	}
	if err := p.startFresh(ctx, pri, nil); err != nil {
		return nil, err
	}
	p.setRole(pri, RolePrimary)
	if err := p.createDatabase(ctx, pri); err != nil {
		return nil, err
	}
	if err := p.baseBackup(ctx, pri, sb); err != nil {
		return nil, err
	}
	if err := p.startFresh(ctx, sb, pri); err != nil {
		return nil, err
	}
	p.setRole(sb, RoleStandby)
	if err := p.WaitStreaming(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// StartT is Start for a test, under t.TempDir(): missing PostgreSQL
// programs skip t loudly (fail it under BATON_TEST_REQUIRE=1), any other
// error fails it, and the pair is closed when t ends.
func StartT(t testing.TB, opts Options) *Pair {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*WaitLimit)
	defer cancel()
	p, err := Start(ctx, t.TempDir(), opts)
	if errors.Is(err, envtest.ErrUnavailable) {
		envtest.Unavailable(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("pghatest: close: %v", err)
		}
	})
	return p
}

// startFresh writes s's configuration (a standby of upstream, or a
// primary when upstream is nil) and starts it, on other ports when its
// own was taken meanwhile.
func (p *Pair) startFresh(ctx context.Context, s, upstream *Server) error {
	for attempt := 1; ; attempt++ {
		if err := s.writeConf(upstream); err != nil {
			return err
		}
		var from int64
		if fi, err := os.Stat(s.Log); err == nil {
			from = fi.Size()
		}
		err := s.Start(ctx)
		if err == nil {
			return nil
		}
		tail := logTail(s.Log, from)
		if attempt == 3 || !strings.Contains(tail, "could not bind") && !strings.Contains(tail, "already in use") {
			return err
		}
		ports, perr := envtest.FreePorts(1)
		if perr != nil {
			return fmt.Errorf("pghatest: %w", perr)
		}
		s.Port = ports[0]
	}
}

// createDatabase creates opts.Database on pri. The session does not wait
// for a synchronous standby: there is none yet.
func (p *Pair) createDatabase(ctx context.Context, pri *Server) error {
	ctx, cancel := context.WithTimeout(ctx, WaitLimit)
	defer cancel()
	c, err := pgx.Connect(ctx, pri.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("pghatest: %s: %w", pri.Name, err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, `SET synchronous_commit = local`); err != nil {
		return fmt.Errorf("pghatest: %s: %w", pri.Name, err)
	}
	var version int
	if err := c.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		return fmt.Errorf("pghatest: %s: %w", pri.Name, err)
	}
	q := `CREATE DATABASE ` + pgx.Identifier{p.opts.Database}.Sanitize()
	if version >= 150000 {
		// The default since 15, WAL_LOG, writes the template into the
		// WAL, which the base backup then streams too: slower.
		q += ` STRATEGY = FILE_COPY`
	}
	if _, err := c.Exec(ctx, q); err != nil {
		return fmt.Errorf("pghatest: %s: create database %q: %w", pri.Name, p.opts.Database, err)
	}
	return nil
}

// baseBackup copies from into to.Dir, which must not exist or be empty,
// as a standby (-R: standby.signal).
func (p *Pair) baseBackup(ctx context.Context, from, to *Server) error {
	if err := p.run(ctx, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(from.Port), "-U", "postgres",
		"-D", to.Dir, "-R", "-X", "stream", "--checkpoint=fast", "--no-sync"); err != nil {
		return fmt.Errorf("pghatest: base backup of %s for %s: %w", from.Name, to.Name, err)
	}
	return nil
}
