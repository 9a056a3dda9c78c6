package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton/driver"
)

// lease is one term on the Lease object: a driver.ManagedLease whose
// renewals PUT a new renewTime with the resourceVersion the term last
// wrote, so that any other writer's change makes the next renewal fail.
type lease struct {
	*driver.ManagedLease
	b   *Backend
	id  string
	uid string
	tok uint64
	log *slog.Logger

	mu   sync.Mutex
	last *object // the Lease as this term last wrote or read it

	announcer // the Event of the term's start (events.go)

	note atomic.Pointer[string] // SetNote's, written by the renewals

	// What client-go candidates see: they compare the record with
	// renewTime cut to whole seconds, so a renewal in the same second as
	// the one before looks like no renewal to them, and they count the
	// Lease's duration from when they first saw that second. A renewal
	// extends the term from the first write attempt of the second it
	// shows, not from its own send. Only renew touches these.
	triedSec  int64     // the wall-clock second of the newest write attempt
	triedAt   time.Time // the first attempt in triedSec
	shownSec  int64     // the second of renewTime on the server
	shownFrom time.Time // the first attempt in shownSec
}

func (b *Backend) newLease(id string, token uint64, took *object, sent time.Time, log *slog.Logger) *lease {
	l := &lease{b: b, id: id, uid: took.uid(), tok: token, last: took, log: log,
		triedSec: sent.Unix(), triedAt: sent, shownSec: sent.Unix(), shownFrom: sent}
	l.ManagedLease = driver.NewManagedLease(driver.ManagedLeaseConfig{
		Timing:  b.timing,
		Sent:    sent,
		Renew:   l.renew,
		Watch:   l.watch,
		Release: l.release,
		Logger:  log,
	})
	l.SetToken(token)
	return l
}

// ours reports whether o still holds this term: the same object, holder
// and token.
func (l *lease) ours(o *object) bool {
	return o.uid() == l.uid && o.holder() == l.id && o.token() == l.tok
}

func (l *lease) current() *object {
	l.mu.Lock()
	defer l.mu.Unlock()
	return &object{raw: cloneMap(l.last.raw)}
}

func (l *lease) store(o *object) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if o.resourceVersion() != "" {
		l.last = o
	}
}

// renew writes renewTime. A conflict means someone else wrote the Lease:
// if it is still this term's (an annotation or label changed), the
// renewal is sent again on the new version; otherwise the term is lost.
func (l *lease) renew(ctx context.Context) (time.Duration, error) {
	entry := time.Now() // not before ManagedLease's send time
	for range 3 {
		o := l.current()
		now := time.Now()
		if now.Unix() != l.triedSec {
			l.triedSec, l.triedAt = now.Unix(), now
		}
		o.renew(now)
		if n := l.note.Load(); n != nil {
			o.setAnnotation(annoNote, *n)
		}
		out, err := l.b.c.update(ctx, leases, l.b.ns, o)
		if err == nil {
			l.store(out)
			if now.Unix() != l.shownSec {
				l.shownSec, l.shownFrom = now.Unix(), l.triedAt
			}
			// The term's deadline is the send time + the TTL returned -
			// SafetyMargin: no later than shownFrom + TTL - SafetyMargin.
			if late := entry.Sub(l.shownFrom); late > 0 {
				return max(l.b.timing.TTL-late, time.Nanosecond), nil
			}
			return 0, nil
		}
		if isNotFound(err) {
			return 0, driver.LostError(errors.New("the Lease was deleted"))
		}
		if !isConflict(err) {
			return 0, err
		}
		over, gerr := l.reread(ctx)
		if gerr != nil {
			return 0, gerr
		}
		if over != nil {
			return 0, driver.LostError(over)
		}
	}
	return 0, errors.New("kube: renew: the Lease kept changing")
}

// SetNote sets the holder's note (election.Noter), cut to maxNote
// bytes: the renewals write it in the annotation baton.dev/note ("":
// removed), where Leader reads it.
func (l *lease) SetNote(note string) {
	if len(note) > maxNote {
		note = note[:maxNote]
	}
	l.note.Store(&note)
}

// watch returns the reason the term is lost when the Lease is deleted or
// another holder's; ErrRetryWatch when the stream ended without news.
func (l *lease) watch(ctx context.Context) error {
	o := l.current()
	ev, err := l.b.c.watchOne(ctx, leases.collection(l.b.ns), l.b.name, o.resourceVersion(), 5*time.Minute)
	if err != nil {
		if ctx.Err() == nil && isCode(err, http.StatusGone) {
			// The version is too old to watch from: read the Lease anew.
			if over, gerr := l.reread(ctx); gerr == nil && over != nil {
				return over
			}
		}
		return fmt.Errorf("%w: %v", driver.ErrRetryWatch, err)
	}
	if ev.Type == "DELETED" {
		return errors.New("the Lease was deleted")
	}
	var now object
	if err := now.UnmarshalJSON(ev.Object); err != nil {
		return fmt.Errorf("%w: %v", driver.ErrRetryWatch, err)
	}
	if !l.ours(&now) {
		return fmt.Errorf("the Lease is held by %q now", now.holder())
	}
	l.store(&now)
	return driver.ErrRetryWatch
}

// reread reads the Lease anew, after a refused write or a watch too old
// to resume: it returns why the term is over (the Lease deleted, or
// another holder's), or nil while the Lease is still this term's, which
// it then keeps as the version to write on.
func (l *lease) reread(ctx context.Context) (over, err error) {
	o, err := l.b.c.get(ctx, leases, l.b.ns, l.b.name)
	if isNotFound(err) {
		return errors.New("the Lease was deleted"), nil
	}
	if err != nil {
		return nil, err
	}
	if !l.ours(o) {
		return fmt.Errorf("the Lease is held by %q now", o.holder()), nil
	}
	l.store(o)
	return nil, nil
}

// release frees the Lease as client-go does, if it is still this term's.
func (l *lease) release(ctx context.Context) error {
	l.announcer.stop()
	for range 3 {
		o := l.current()
		o.free(time.Now())
		_, err := l.b.c.update(ctx, leases, l.b.ns, o)
		if err == nil || isNotFound(err) {
			return nil
		}
		if !isConflict(err) {
			return err
		}
		over, gerr := l.reread(ctx)
		if gerr != nil {
			return gerr
		}
		if over != nil {
			return nil // deleted, or someone else holds it already
		}
	}
	return errors.New("kube: release: the Lease kept changing")
}

// abandon ends a term that is never handed out, freeing the Lease if it
// is still this term's.
func (l *lease) abandon() {
	ctx, cancel := context.WithTimeout(context.Background(), l.b.timing.RenewInterval)
	defer cancel()
	if err := l.Release(ctx); err != nil {
		l.log.Debug("abandoning a term", "err", err)
	}
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch v := v.(type) {
		case map[string]any:
			out[k] = cloneMap(v)
		case []any:
			out[k] = append([]any(nil), v...)
		default:
			out[k] = v
		}
	}
	return out
}
