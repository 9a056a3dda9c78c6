package schedulerhost

import (
	"testing"
	"time"
)

func TestTimeline_OneBucketPerInstantEarliestFirst(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, b, c := &jobState{Job: Job{Name: "a"}}, &jobState{Job: Job{Name: "b"}}, &jobState{Job: Job{Name: "c"}}
	tl := newTimeline()
	tl.add(a, t0.Add(3*time.Second))
	tl.add(b, t0.Add(time.Second))
	tl.add(c, t0.Add(3*time.Second))
	tl.add(a, t0.Add(2*time.Second))
	if len(tl.buckets) != 3 {
		t.Fatalf("buckets = %d, want 3 (one per instant)", len(tl.buckets))
	}
	if first, ok := tl.first(); !ok || !first.Equal(t0.Add(time.Second)) {
		t.Fatalf("first = %v, %v; want %v", first, ok, t0.Add(time.Second))
	}
	if bk := tl.popDue(t0); bk != nil {
		t.Fatalf("popDue before the first instant = %v, want nil", bk.at)
	}
	var got []string
	for bk := tl.popDue(t0.Add(3 * time.Second)); bk != nil; bk = tl.popDue(t0.Add(3 * time.Second)) {
		for _, d := range bk.due {
			got = append(got, d.job.Name+"@"+d.tick.Sub(t0).String())
		}
		tl.reuse(bk)
	}
	want := []string{"b@1s", "a@2s", "a@3s", "c@3s"}
	if len(got) != len(want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("popped %v, want %v", got, want)
		}
	}
	if _, ok := tl.first(); ok || len(tl.byTime) != 0 {
		t.Errorf("after popping everything: %d buckets, %d indexed; want none", len(tl.buckets), len(tl.byTime))
	}
	tl.add(b, t0.Add(5*time.Second))
	if len(tl.spare) != 2 || cap(tl.byTime[t0.Add(5*time.Second).UnixNano()].due) == 0 {
		t.Errorf("an emptied bucket's slice was not reused (spare %d)", len(tl.spare))
	}
}
