package appendq

import (
	"slices"
	"sync"
	"testing"
)

// TestJobsInOrderAndBatched: every job is done once, in order; jobs enqueued while a
// call runs are handed to the next call together; Stop lets the queued jobs finish.
func TestJobsInOrderAndBatched(t *testing.T) {
	var wg sync.WaitGroup
	var done []int
	var calls [][]int
	release := make(chan struct{})
	first := make(chan struct{})
	q := Start(&wg, func(jobs []int) {
		if len(calls) == 0 {
			close(first)
			<-release // hold the first call while more jobs queue up
		}
		calls = append(calls, slices.Clone(jobs))
		done = append(done, jobs...)
	})
	q.Enqueue(0)
	<-first
	for i := 1; i <= 5; i++ {
		q.Enqueue(i)
	}
	close(release)
	q.Stop()
	wg.Wait()
	if !slices.Equal(done, []int{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("jobs done %v; want 0…5 in order", done)
	}
	if len(calls) != 2 || !slices.Equal(calls[1], []int{1, 2, 3, 4, 5}) {
		t.Fatalf("calls %v; want [0] then the five queued behind it together", calls)
	}
}
