package backendtest

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/batonhq/baton/control"
	"github.com/batonhq/baton/ledger"
)

// ControlElection is one fresh election (no term held, no entries) with its
// control store, as a backend's harness sets it up.
type ControlElection struct {
	// Store is the election's control store. Required.
	Store control.Store
	// Lead ends the term an earlier call of Lead started, if any, makes a
	// new term that holds the election, and returns its token. It blocks
	// until the term holds. Required.
	Lead func(t *testing.T) uint64
}

// RunControl runs the suite: each subtest calls newElection once (twice for
// ElectionsAreSeparate). It blocks until every subtest is done.
func RunControl(t *testing.T, newElection func(t *testing.T) ControlElection) {
	t.Run("PutIfAbsent", func(t *testing.T) {
		s := newElection(t).Store
		v1 := put(t, s, control.Put{Key: "pause/report", Value: []byte(`{"by":"alice"}`)})
		if v1 <= 0 {
			t.Fatalf("Put absent: version %d, want > 0", v1)
		}
		_, err := s.Put(ctx(t), control.Put{Key: "pause/report", Value: []byte(`{"by":"bob"}`)})
		if !errors.Is(err, control.ErrVersionMismatch) {
			t.Fatalf("second Put absent: %v, want ErrVersionMismatch", err)
		}
		want := []control.Entry{{Key: "pause/report", Value: []byte(`{"by":"alice"}`), Version: v1}}
		listIs(t, s, "pause/", want)
	})
	t.Run("CompareAndSwap", func(t *testing.T) {
		s := newElection(t).Store
		v1 := put(t, s, control.Put{Key: "run/r1", Value: []byte("pending")})
		v2 := put(t, s, control.Put{Key: "run/r1", Value: []byte("taken"), IfVersion: v1})
		if v2 <= v1 {
			t.Fatalf("CAS from %d gave version %d, want greater", v1, v2)
		}
		if _, err := s.Put(ctx(t), control.Put{Key: "run/r1", Value: []byte("again"), IfVersion: v1}); !errors.Is(err, control.ErrVersionMismatch) {
			t.Fatalf("CAS from the old version %d: %v, want ErrVersionMismatch", v1, err)
		}
		if _, err := s.Put(ctx(t), control.Put{Key: "run/absent", Value: []byte("x"), IfVersion: v2}); !errors.Is(err, control.ErrVersionMismatch) {
			t.Fatalf("CAS of an absent key: %v, want ErrVersionMismatch", err)
		}
		v3 := put(t, s, control.Put{Key: "run/r1", Value: []byte("done"), IfVersion: control.AnyVersion})
		if v3 <= v2 {
			t.Fatalf("unconditional Put gave version %d after %d, want greater", v3, v2)
		}
		listIs(t, s, "run/", []control.Entry{{Key: "run/r1", Value: []byte("done"), Version: v3}})
		v4 := put(t, s, control.Put{Key: "run/new", Value: []byte("n"), IfVersion: control.AnyVersion})
		listIs(t, s, "run/", []control.Entry{{Key: "run/new", Value: []byte("n"), Version: v4}, {Key: "run/r1", Value: []byte("done"), Version: v3}})
	})
	t.Run("Delete", func(t *testing.T) {
		s := newElection(t).Store
		v1 := put(t, s, control.Put{Key: "pause/a", Value: []byte("1")})
		v2 := put(t, s, control.Put{Key: "pause/a", Value: []byte("2"), IfVersion: v1})
		if err := s.Delete(ctx(t), "pause/a", v1); !errors.Is(err, control.ErrVersionMismatch) {
			t.Fatalf("Delete at the old version: %v, want ErrVersionMismatch", err)
		}
		if err := s.Delete(ctx(t), "pause/a", v2); err != nil {
			t.Fatalf("Delete at the version: %v", err)
		}
		listIs(t, s, "pause/", nil)
		if err := s.Delete(ctx(t), "pause/a", control.AnyVersion); err != nil {
			t.Fatalf("Delete of an absent key with AnyVersion: %v", err)
		}
		if err := s.Delete(ctx(t), "pause/a", v2); !errors.Is(err, control.ErrVersionMismatch) {
			t.Fatalf("Delete of an absent key at a version: %v, want ErrVersionMismatch", err)
		}
		// A key made again never gets back a version it had: a writer that
		// read v2 before the delete cannot overwrite the new entry.
		v3 := put(t, s, control.Put{Key: "pause/a", Value: []byte("3")})
		if v3 <= v2 {
			t.Fatalf("version after delete and put: %d, want greater than %d", v3, v2)
		}
		if _, err := s.Put(ctx(t), control.Put{Key: "pause/a", Value: []byte("stale"), IfVersion: v2}); !errors.Is(err, control.ErrVersionMismatch) {
			t.Fatalf("Put at the version before the delete: %v, want ErrVersionMismatch", err)
		}
		put(t, s, control.Put{Key: "pause/b", Value: []byte("b")})
		if err := s.Delete(ctx(t), "pause/a", control.AnyVersion); err != nil {
			t.Fatalf("Delete with AnyVersion: %v", err)
		}
		if es := list(t, s, "pause/"); len(es) != 1 || es[0].Key != "pause/b" {
			t.Fatalf("List after deleting pause/a = %v, want pause/b only", keys(es))
		}
	})
	t.Run("ListByPrefix", func(t *testing.T) {
		s := newElection(t).Store
		for _, k := range []string{"run/b", "pause/x", "run/a", "runner/z", "instance/n1", "run/a%2Fb"} {
			put(t, s, control.Put{Key: k, Value: []byte(k)})
		}
		if got, want := keys(list(t, s, "run/")), "[run/a run/a%2Fb run/b]"; got != want {
			t.Errorf("List(run/) = %s, want %s", got, want)
		}
		if got, want := keys(list(t, s, "")), "[instance/n1 pause/x run/a run/a%2Fb run/b runner/z]"; got != want {
			t.Errorf("List() = %s, want %s", got, want)
		}
		if got := list(t, s, "nothing/"); len(got) != 0 {
			t.Errorf("List(nothing/) = %v, want none", keys(got))
		}
		// Prefixes that look like patterns to some backends match
		// literally.
		for _, p := range []string{"run/%", "run/_", "run/*", "run/?", "run/["} {
			if got := list(t, s, p); len(got) != 0 {
				t.Errorf("List(%q) = %v, want none", p, keys(got))
			}
		}
	})
	t.Run("ValuesRoundTrip", func(t *testing.T) {
		s := newElection(t).Store
		big := bytes.Repeat([]byte{0, 1, 0xff, '\'', '"', '\\', '\n'}, control.MaxValue/7)
		vals := map[string][]byte{"v/empty": {}, "v/binary": {0, 0xfe, 0x80, 0}, "v/big": big}
		for k, v := range vals {
			put(t, s, control.Put{Key: k, Value: v})
		}
		for _, e := range list(t, s, "v/") {
			if !bytes.Equal(e.Value, vals[e.Key]) {
				t.Errorf("%s: value of %d bytes read back as %d bytes, different", e.Key, len(vals[e.Key]), len(e.Value))
			}
		}
	})
	t.Run("RejectsBadInput", func(t *testing.T) {
		s := newElection(t).Store
		for _, p := range []control.Put{
			{Key: "", Value: []byte("x")},
			{Key: "has space", Value: []byte("x")},
			{Key: "nul\x00", Value: []byte("x")},
			{Key: string(bytes.Repeat([]byte("k"), control.MaxKey+1)), Value: []byte("x")},
			{Key: "big", Value: make([]byte, control.MaxValue+1)},
			{Key: "ver", Value: []byte("x"), IfVersion: -2},
		} {
			if _, err := s.Put(ctx(t), p); err == nil || errors.Is(err, control.ErrVersionMismatch) {
				t.Errorf("Put(key %.20q, %d bytes, IfVersion %d): %v, want an input error", p.Key, len(p.Value), p.IfVersion, err)
			}
		}
		if es := list(t, s, ""); len(es) != 0 {
			t.Errorf("List after refused puts = %v, want none", keys(es))
		}
	})
	t.Run("TermCondition", func(t *testing.T) {
		e := newElection(t)
		s := e.Store
		tok1 := e.Lead(t)
		v1 := put(t, s, control.Put{Key: "run/r", Value: []byte("pending")})
		v2 := put(t, s, control.Put{Key: "run/r", Value: []byte("taken by 1"), IfVersion: v1, Token: tok1})
		tok2 := e.Lead(t)
		if tok2 <= tok1 {
			t.Fatalf("second term's token %d, want greater than %d", tok2, tok1)
		}
		if err := s.Fence(ctx(t), tok2); err != nil {
			t.Fatalf("Fence by the term that holds (token %d): %v", tok2, err)
		}
		_, err := s.Put(ctx(t), control.Put{Key: "run/r", Value: []byte("stale"), IfVersion: control.AnyVersion, Token: tok1})
		if !errors.Is(err, ledger.ErrStaleTerm) {
			t.Fatalf("Put with the ended term's token: %v, want ErrStaleTerm", err)
		}
		if _, err := s.Put(ctx(t), control.Put{Key: "run/other", Value: []byte("stale"), Token: tok1}); !errors.Is(err, ledger.ErrStaleTerm) {
			t.Fatalf("Put absent with the ended term's token: %v, want ErrStaleTerm", err)
		}
		listIs(t, s, "run/", []control.Entry{{Key: "run/r", Value: []byte("taken by 1"), Version: v2}})
		v3 := put(t, s, control.Put{Key: "run/r", Value: []byte("taken by 2"), IfVersion: v2, Token: tok2})
		listIs(t, s, "run/", []control.Entry{{Key: "run/r", Value: []byte("taken by 2"), Version: v3}})
	})
	t.Run("RunNowTakeStartSettle", func(t *testing.T) {
		testTakeStartSettle(t, newElection(t))
	})
	t.Run("ElectionsAreSeparate", func(t *testing.T) {
		a, b := newElection(t).Store, newElection(t).Store
		put(t, a, control.Put{Key: "pause/job", Value: []byte("a")})
		if es := list(t, b, ""); len(es) != 0 {
			t.Fatalf("another election's List = %v, want none", keys(es))
		}
		put(t, b, control.Put{Key: "pause/job", Value: []byte("b")})
		if es := list(t, a, "pause/"); len(es) != 1 || string(es[0].Value) != "a" {
			t.Fatalf("List after the other election's Put = %v, want its own entry", es)
		}
	})
	t.Run("ConcurrentCAS", func(t *testing.T) {
		s := newElection(t).Store
		put(t, s, control.Put{Key: "n", Value: []byte("0")})
		const workers, each = 4, 10
		var wg sync.WaitGroup
		errc := make(chan error, workers)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for done := 0; done < each; {
					es, err := s.List(ctx(t), "n")
					if err != nil || len(es) != 1 {
						errc <- fmt.Errorf("List(n) = %v, %v", es, err)
						return
					}
					n, _ := strconv.Atoi(string(es[0].Value))
					_, err = s.Put(ctx(t), control.Put{Key: "n", Value: []byte(strconv.Itoa(n + 1)), IfVersion: es[0].Version})
					switch {
					case err == nil:
						done++
					case !errors.Is(err, control.ErrVersionMismatch):
						errc <- fmt.Errorf("CAS: %v", err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Fatal(err)
		}
		if es := list(t, s, "n"); len(es) != 1 || string(es[0].Value) != strconv.Itoa(workers*each) {
			t.Fatalf("counter after %d CAS increments = %v, want %d", workers*each, es, workers*each)
		}
	})
}

func put(t *testing.T, s control.Store, p control.Put) int64 {
	t.Helper()
	v, err := s.Put(ctx(t), p)
	if err != nil {
		t.Fatalf("Put(%q, IfVersion %d, Token %d): %v", p.Key, p.IfVersion, p.Token, err)
	}
	return v
}

func list(t *testing.T, s control.Store, prefix string) []control.Entry {
	t.Helper()
	es, err := s.List(ctx(t), prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return es
}

func listIs(t *testing.T, s control.Store, prefix string, want []control.Entry) {
	t.Helper()
	got := list(t, s, prefix)
	if len(got) != len(want) {
		t.Fatalf("List(%q) = %v, want %v", prefix, got, want)
	}
	for i := range got {
		if got[i].Key != want[i].Key || !bytes.Equal(got[i].Value, want[i].Value) || got[i].Version != want[i].Version {
			t.Fatalf("List(%q)[%d] = {%s %q v%d}, want {%s %q v%d}", prefix, i,
				got[i].Key, got[i].Value, got[i].Version, want[i].Key, want[i].Value, want[i].Version)
		}
	}
}

func keys(es []control.Entry) string {
	ks := make([]string, len(es))
	for i, e := range es {
		ks[i] = e.Key
	}
	return fmt.Sprint(ks)
}
