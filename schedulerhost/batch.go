package schedulerhost

import (
	"sync"
	"time"
)

// Batches: the ledger calls of many runs share round trips.
//
// A run that claims its tick, or writes its history entry, puts the item
// in its term's queue (claims) or its Host's (finishes) and waits for the
// outcome. Whoever's item is at the head when a batch may go takes up to
// the ledger's MaxBatch items and sends them, on its own goroutine, in one
// ledger call; up to maxInflight batches of a queue go at once. So a
// batch costs no goroutine of its own, and the caller that sent it waits
// no longer than for its own item.
//
// When a batch may go: finishes at once, as in a group commit (the first
// of a burst goes alone, the rest gather while it is on the wire). Claims
// also wait for the runs that are expected to claim: fireAll says how many
// runs it starts at one instant (expect), and each of them either claims
// (do with expected) or says it will not claim now (arrive). A full batch
// goes at once; the rest when the last expected run has claimed or
// arrived. So the ticks of an instant are claimed in ceil(N/MaxBatch)
// round trips, not one per tick. maxLinger bounds the wait for expected
// runs from the last one that arrived: while they keep coming (10,000
// goroutines starting on a busy machine take longer than maxLinger in
// all), the batch waits for them; once none has come for maxLinger, what
// is queued goes (more round trips, not lost ones).

const (
	// claimsInflight and finishesInflight bound the batches of a queue on
	// the wire at once: the claims of one instant all go at once; finishes
	// gather while a few are on the wire.
	claimsInflight   = 8
	finishesInflight = 2
	// maxLinger bounds how long a queued item waits for the next
	// expected run to arrive.
	maxLinger = 250 * time.Millisecond
)

// batchQueue batches items of type T into calls of send.
type batchQueue[T any] struct {
	limit       int                     // items per call (the ledger's MaxBatch)
	maxInflight int                     // calls on the wire at once
	send        func(items []T) []error // one call: one error per item
	stuck       func(waited time.Duration, expected int)

	mu       sync.Mutex
	queue    []*batchItem[T]
	inflight int       // batches taken and not yet answered
	expect   int       // runs expected to claim or arrive
	arrived  time.Time // when an expected run last claimed or arrived
}

type batchItem[T any] struct {
	v     T
	err   error
	batch []*batchItem[T] // set when this item leads a batch: send it
	wake  chan struct{}   // a batch to lead, or the outcome (batch nil)
}

func newBatchQueue[T any](limit, maxInflight int, send func([]T) []error) *batchQueue[T] {
	return &batchQueue[T]{limit: max(1, limit), maxInflight: maxInflight, send: send}
}

// expectN says that n more runs will each call do with expected, or
// arrive.
func (q *batchQueue[T]) expectN(n int) {
	q.mu.Lock()
	q.expect += n
	q.mu.Unlock()
}

// arrive says that an expected run will not call do now: a batch waiting
// for it may go.
func (q *batchQueue[T]) arrive() {
	q.mu.Lock()
	q.expect--
	q.arrived = time.Now()
	q.kickLocked(false)
	q.mu.Unlock()
}

// do queues v, sends batches while its item leads one, and returns v's
// outcome. expected says the caller is a run counted by expectN.
func (q *batchQueue[T]) do(v T, expected bool) error {
	it := &batchItem[T]{v: v, wake: make(chan struct{}, 1)}
	q.mu.Lock()
	if expected {
		q.expect--
		q.arrived = time.Now()
	}
	q.queue = append(q.queue, it)
	q.kickLocked(false)
	waiting := it.batch == nil && q.expect > 0
	q.mu.Unlock()
	var linger <-chan time.Time
	var timer *time.Timer
	if waiting {
		timer = time.NewTimer(maxLinger)
		defer timer.Stop()
		linger = timer.C
	}
	start := time.Now()
	for {
		select {
		case <-it.wake:
		case <-linger:
			linger = nil
			q.mu.Lock()
			if it.batch == nil && q.queued(it) {
				if quiet := time.Since(q.arrived); quiet < maxLinger && q.expect > 0 {
					// Expected runs are still arriving: wait for the next.
					timer.Reset(maxLinger - quiet)
					linger = timer.C
				} else {
					if q.stuck != nil {
						q.stuck(time.Since(start), q.expect)
					}
					q.kickLocked(true)
				}
			}
			q.mu.Unlock()
			continue
		}
		if it.batch == nil {
			return it.err
		}
		q.lead(it)
		return it.err
	}
}

// queued reports whether it waits in the queue (q.mu held).
func (q *batchQueue[T]) queued(it *batchItem[T]) bool {
	for _, o := range q.queue {
		if o == it {
			return true
		}
	}
	return false
}

// lead sends the batch it leads and hands out the outcomes.
func (q *batchQueue[T]) lead(it *batchItem[T]) {
	batch := it.batch
	vs := make([]T, len(batch))
	for i, b := range batch {
		vs[i] = b.v
	}
	errs := q.send(vs)
	q.mu.Lock()
	q.inflight--
	for i, b := range batch {
		b.err = errs[i]
		b.batch = nil
		if b != it {
			b.wake <- struct{}{}
		}
	}
	q.kickLocked(false)
	q.mu.Unlock()
}

// kickLocked hands batches to the items at the head of the queue while
// a batch may go (q.mu held): a full one always, the rest once no run is
// expected (or force).
func (q *batchQueue[T]) kickLocked(force bool) {
	for len(q.queue) > 0 && q.inflight < q.maxInflight && (len(q.queue) >= q.limit || q.expect <= 0 || force) {
		n := min(q.limit, len(q.queue))
		batch := make([]*batchItem[T], n)
		copy(batch, q.queue)
		q.queue = append(q.queue[:0], q.queue[n:]...)
		q.inflight++
		batch[0].batch = batch
		batch[0].wake <- struct{}{}
	}
}
