package pghatest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton/internal/envtest"
)

// waitSeconds is WaitLimit for pg_ctl -t.
var waitSeconds = strconv.Itoa(int(WaitLimit / time.Second))

// run runs one of the PostgreSQL programs as the postgres user (through
// runuser when running as root), in /, so that a working directory the
// postgres user cannot read does not matter.
func (p *Pair) run(ctx context.Context, prog string, args ...string) error {
	name := filepath.Join(p.bin, prog)
	var cmd *exec.Cmd
	if p.uid >= 0 {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, name, args...)
	}
	cmd.Dir = "/"
	cmd.WaitDelay = 5 * time.Second // runuser killed by ctx may leave its child holding the output
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", prog, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// installDirs is where binDir looks (a variable for a test of the
// missing installation).
var installDirs = "/usr/lib/postgresql/*/bin"

// binDir returns the newest installed PostgreSQL's program directory that
// has the server programs, or an error wrapping envtest.ErrUnavailable.
func binDir() (string, error) {
	dirs, _ := filepath.Glob(installDirs)
	version := func(d string) int {
		v, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		return v
	}
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		ok := true
		for _, prog := range []string{"initdb", "pg_ctl", "pg_basebackup", "postgres"} {
			if _, err := os.Stat(filepath.Join(d, prog)); err != nil {
				ok = false
			}
		}
		if ok {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w: PostgreSQL server programs (initdb, pg_ctl, pg_basebackup, postgres) not found in %s",
		envtest.ErrUnavailable, installDirs)
}

// lookupPostgres finds the postgres user and runuser, which running as
// root needs.
func (p *Pair) lookupPostgres() error {
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("%w: running as root needs the postgres user: %w", envtest.ErrUnavailable, err)
	}
	if _, err := exec.LookPath("runuser"); err != nil {
		return fmt.Errorf("%w: running as root needs runuser: %w", envtest.ErrUnavailable, err)
	}
	p.uid, _ = strconv.Atoi(u.Uid)
	p.gid, _ = strconv.Atoi(u.Gid)
	return nil
}

// chown gives path to the postgres user when running as root.
func (p *Pair) chown(path string) error {
	if p.uid < 0 {
		return nil
	}
	if err := os.Chown(path, p.uid, p.gid); err != nil {
		return fmt.Errorf("pghatest: %w", err)
	}
	return nil
}

// searchable adds search permission for others to dir and each of its
// parents that lacks it.
func searchable(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("pghatest: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("pghatest: make %s reachable for the postgres user: %w", d, err)
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// logTail returns the last lines of the log written after offset from,
// for an error message ("" if none).
func logTail(path string, from int64) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) <= from {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b[from:])), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return "\n" + filepath.Base(path) + ":\n" + strings.Join(lines, "\n")
}
