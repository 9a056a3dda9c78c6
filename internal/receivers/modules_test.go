package receivers

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/fence"
	"github.com/batonhq/baton/fence/fencetest"
	"github.com/batonhq/baton/internal/envtest"
)

// The receiver modules, from this package's folder.
var (
	nodeModule   = filepath.Join("..", "..", "receivers", "node", "baton-fence.js")
	pythonModule = filepath.Join("..", "..", "receivers", "python", "baton_fence.py")
)

// copyModule copies the module at src into dir, beside the app.
func copyModule(t *testing.T, src, dir string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(src)), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// kit runs fence/fencetest on a module's command line: each write is a
// process of its own (argv + fence-file fence-election token-election
// resource token data-file), exit 0 written, 3 stale, 4 other election.
func kit(t *testing.T, argv ...string) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fence.json")
	data := func(resource string) string { return filepath.Join(dir, resource+".data") }
	fencetest.Run(t, fencetest.Config{Election: "e", Writers: 4, Rounds: 3,
		Write: func(ctx context.Context, resource string, tok fence.Token) error {
			args := append(argv[1:], path, "e", tok.Election, resource, strconv.FormatUint(tok.N, 10), data(resource))
			out, err := exec.CommandContext(ctx, argv[0], args...).CombinedOutput()
			var exit *exec.ExitError
			switch {
			case err == nil:
				return nil
			case errors.As(err, &exit) && exit.ExitCode() == 3:
				return fence.ErrStale
			case errors.As(err, &exit) && exit.ExitCode() == 4:
				return fence.ErrOtherElection
			}
			return errors.New(strings.TrimSpace(string(out)) + ": " + err.Error())
		},
		Read: func(_ context.Context, resource string) (uint64, error) {
			b, err := os.ReadFile(data(resource))
			if err != nil {
				return 0, err
			}
			return strconv.ParseUint(string(b), 10, 64)
		}})
}

func TestNodeModule_Kit(t *testing.T) {
	kit(t, lookPath(t, "node"), nodeModule)
}

func TestPythonModule_Kit(t *testing.T) {
	kit(t, lookPath(t, "python3"), pythonModule)
}

func lookPath(t *testing.T, tool string) string {
	p, err := exec.LookPath(tool)
	if err != nil {
		envtest.Unavailable(t, "%s not installed", tool)
	}
	return p
}

// otherElection posts a request of election "billing" to url: the
// handler answers 409 and does not compare its token.
func otherElection(t *testing.T, url string, out *output) {
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Baton-Election", "billing")
	req.Header.Set("Baton-Token", "5000")
	req.Header.Set("Baton-Run-Id", "billing/call/x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("a request of election billing: HTTP %d; want 409", resp.StatusCode)
	}
	if !out.waitFor(`refused billing/call/x: token of election`, 10*time.Second) {
		t.Errorf("the handler did not log the refusal of election billing")
	}
}
