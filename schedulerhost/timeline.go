package schedulerhost

import (
	"container/heap"
	"time"
)

// The timeline: when each job fires next.
//
// It holds one heap entry per instant, not one per job: a bucket gathers
// the jobs whose next tick is that instant, so jobs that share a schedule
// wake together, and a wake costs one heap operation and a pass over its
// bucket, not one heap operation per job. The loop (loop.go) pops every
// bucket that is due, starts their runs as one batch, and only then
// computes the next ticks and adds them back.

// dueTick is one job's tick.
type dueTick struct {
	job  *jobState
	tick time.Time
}

// bucket holds the jobs due at one instant.
type bucket struct {
	at  time.Time
	due []dueTick
}

// bucketHeap orders buckets by instant, earliest first (heap.Interface).
type bucketHeap []*bucket

func (bh bucketHeap) Len() int           { return len(bh) }
func (bh bucketHeap) Less(i, j int) bool { return bh[i].at.Before(bh[j].at) }
func (bh bucketHeap) Swap(i, j int)      { bh[i], bh[j] = bh[j], bh[i] }
func (bh *bucketHeap) Push(x any)        { *bh = append(*bh, x.(*bucket)) }
func (bh *bucketHeap) Pop() any {
	old := *bh
	b := old[len(old)-1]
	old[len(old)-1] = nil
	*bh = old[:len(old)-1]
	return b
}

// timeline is the heap of buckets with an index by instant. It belongs to
// the loop's goroutine.
type timeline struct {
	buckets bucketHeap
	byTime  map[int64]*bucket // by unix nanoseconds
	spare   [][]dueTick       // emptied bucket slices, reused
}

func newTimeline() *timeline { return &timeline{byTime: map[int64]*bucket{}} }

// add schedules j at tick.
func (tl *timeline) add(j *jobState, tick time.Time) {
	k := tick.UnixNano()
	b := tl.byTime[k]
	if b == nil {
		b = &bucket{at: tick}
		if n := len(tl.spare); n > 0 {
			b.due, tl.spare = tl.spare[n-1][:0], tl.spare[:n-1]
		}
		tl.byTime[k] = b
		heap.Push(&tl.buckets, b)
	}
	b.due = append(b.due, dueTick{j, tick})
}

// first returns the earliest instant scheduled; ok is false if none is.
func (tl *timeline) first() (at time.Time, ok bool) {
	if len(tl.buckets) == 0 {
		return time.Time{}, false
	}
	return tl.buckets[0].at, true
}

// popDue removes and returns the earliest bucket if it is due at now, else
// nil. Give its due slice back with reuse once done with it.
func (tl *timeline) popDue(now time.Time) *bucket {
	if at, ok := tl.first(); !ok || at.After(now) {
		return nil
	}
	b := heap.Pop(&tl.buckets).(*bucket)
	delete(tl.byTime, b.at.UnixNano())
	return b
}

// reuse keeps the due slice of a popped bucket for a later bucket.
func (tl *timeline) reuse(b *bucket) { tl.spare = append(tl.spare, b.due) }
