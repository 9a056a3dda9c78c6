package sql

import (
	"context"
	"time"
)

// listener runs the Driver's Listen (PostgreSQL: LISTEN on the election's
// channel on a dedicated connection) for one waiting Acquire. It signals
// after each subscription (something may have been released before it)
// and on each notification. Its goroutine is owned by Acquire: stop
// cancels and waits for it.
//
// The listener never blocks the waiting candidate: polling goes on beside
// it. A connection that fails is reopened after a backoff; one that goes
// silent (a dead network delivers nothing) is pinged every healthInterval
// by the Driver and reopened if the ping fails.
type listener struct {
	ch     chan struct{} // capacity 1: a pending wake-up
	cancel context.CancelFunc
	done   chan struct{}
}

func (b *Backend) startListener(ctx context.Context) *listener {
	ctx, cancel := context.WithCancel(ctx)
	l := &listener{ch: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		b.listenLoop(ctx, l)
	}()
	return l
}

// notified returns the channel that receives a value when the holder may
// have released. A nil listener returns nil (never ready).
func (l *listener) notified() <-chan struct{} {
	if l == nil {
		return nil
	}
	return l.ch
}

// stop ends the listener and waits for its goroutine (and the connection's
// close, bounded by one second). A nil listener is a no-op.
func (l *listener) stop() {
	if l == nil {
		return
	}
	l.cancel()
	<-l.done
}

func (l *listener) wake() {
	select {
	case l.ch <- struct{}{}:
	default:
	}
}

func (b *Backend) healthInterval() time.Duration {
	return max(5*b.cfg.PollInterval, 5*time.Second)
}

func (b *Backend) listenLoop(ctx context.Context, l *listener) {
	backoff := b.cfg.PollInterval
	for {
		err := b.listenOnce(ctx, l)
		if ctx.Err() != nil {
			return
		}
		b.log.Warn("listen connection failed, polling meanwhile", "err", err, "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// listenOnce runs the Driver's Listen once: it relays notifications
// until the connection fails or ctx is done.
func (b *Backend) listenOnce(ctx context.Context, l *listener) error {
	return b.drv.Listen(ctx, ListenParams{
		Channel:        b.channel,
		Wake:           l.wake,
		QueryTimeout:   b.cfg.QueryTimeout,
		HealthInterval: b.healthInterval(),
	})
}
