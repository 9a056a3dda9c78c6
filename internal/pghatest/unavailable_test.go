package pghatest

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/batonhq/baton/internal/envtest"
)

// TestStart_Unavailable: without the PostgreSQL server programs, Start
// returns an error wrapping envtest.ErrUnavailable and creates nothing.
func TestStart_Unavailable(t *testing.T) {
	defer func(d string) { installDirs = d }(installDirs)
	installDirs = t.TempDir() + "/*/bin"
	dir := t.TempDir() + "/pair"
	p, err := Start(context.Background(), dir, Options{})
	if !errors.Is(err, envtest.ErrUnavailable) || p != nil {
		t.Fatalf("Start = %v, %v; want an error wrapping envtest.ErrUnavailable", p, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Start without PostgreSQL made %s (stat: %v)", dir, err)
	}
	t.Logf("Start: %v", err)
}
