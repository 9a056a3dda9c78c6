package schedulerhost

import "time"

// bucket holds the jobs whose next tick is the same instant: jobs that
// share a schedule wake together, and a wake costs one heap operation and
// a pass over its bucket, not one heap operation per job.
type bucket struct {
	at   time.Time
	due  []dueTick
	slot int // index in the heap
}

type dueTick struct {
	job  *jobState
	tick time.Time
}

// timeline is a min-heap of buckets by instant, with an index by instant.
type timeline struct {
	heap   []*bucket
	byTime map[int64]*bucket
	spare  [][]dueTick // emptied bucket slices, reused
}

func (tl *timeline) less(i, j int) bool { return tl.heap[i].at.Before(tl.heap[j].at) }
func (tl *timeline) swap(i, j int) {
	tl.heap[i], tl.heap[j] = tl.heap[j], tl.heap[i]
	tl.heap[i].slot, tl.heap[j].slot = i, j
}

func (tl *timeline) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !tl.less(i, p) {
			return
		}
		tl.swap(i, p)
		i = p
	}
}

func (tl *timeline) down(i int) {
	n := len(tl.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && tl.less(r, l) {
			m = r
		}
		if !tl.less(m, i) {
			return
		}
		tl.swap(i, m)
		i = m
	}
}

// add schedules j at tick.
func (tl *timeline) add(j *jobState, tick time.Time) {
	k := tick.UnixNano()
	b := tl.byTime[k]
	if b == nil {
		b = &bucket{at: tick, slot: len(tl.heap)}
		if n := len(tl.spare); n > 0 {
			b.due, tl.spare = tl.spare[n-1][:0], tl.spare[:n-1]
		}
		tl.byTime[k] = b
		tl.heap = append(tl.heap, b)
		tl.up(b.slot)
	}
	b.due = append(b.due, dueTick{j, tick})
}

// popDue removes and returns the earliest bucket if it is due at now.
func (tl *timeline) popDue(now time.Time) *bucket {
	if len(tl.heap) == 0 || tl.heap[0].at.After(now) {
		return nil
	}
	b := tl.heap[0]
	last := len(tl.heap) - 1
	tl.swap(0, last)
	tl.heap = tl.heap[:last]
	if last > 0 {
		tl.down(0)
	}
	delete(tl.byTime, b.at.UnixNano())
	return b
}
