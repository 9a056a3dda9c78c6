package ledger_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/batonhq/baton/ledger"
)

func TestRefused(t *testing.T) {
	base := errors.New("403 Forbidden")
	err := ledger.Refused(fmt.Errorf("kube: claim: %w", base))
	if !errors.Is(err, ledger.ErrRefused) || !errors.Is(err, base) || err.Error() != "kube: claim: 403 Forbidden" {
		t.Errorf("Refused: %v (is ErrRefused %v, is the cause %v)", err, errors.Is(err, ledger.ErrRefused), errors.Is(err, base))
	}
	if ledger.Refused(nil) != nil || ledger.Refused(err) != err {
		t.Error("Refused of nil, or of a refused error, changed it")
	}
	stale := fmt.Errorf("x: %w", ledger.ErrStaleTerm)
	claimed := fmt.Errorf("x: %w", ledger.ErrTickClaimed)
	errs := ledger.MarkRefused([]error{nil, stale, claimed, base, errors.New("reset")},
		func(err error) bool { return true })
	if errs[0] != nil || errors.Is(errs[1], ledger.ErrRefused) || errors.Is(errs[2], ledger.ErrRefused) ||
		!errors.Is(errs[3], ledger.ErrRefused) || !errors.Is(errs[4], ledger.ErrRefused) {
		t.Errorf("MarkRefused = %v: want nil, stale and claimed left alone, the rest marked", errs)
	}
}
