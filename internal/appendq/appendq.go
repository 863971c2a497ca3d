// Package appendq runs the writes of one internal-topic partition in order, in a
// goroutine of its own: the group coordinator's writes to __consumer_offsets and the
// transaction coordinator's to __transaction_state. Jobs enqueued while a write is in
// flight are handed over together, so that many small writes queued behind a slow
// append share the next one.
package appendq

import "sync"

// Queue hands enqueued jobs, in order, to the function it was started with.
type Queue[J any] struct {
	do   func(jobs []J)
	mu   sync.Mutex
	jobs []J
	wake chan struct{}
	stop chan struct{}
}

// Start runs do for the jobs enqueued, in a goroutine counted in wg: each call gets
// every job queued since the previous call began, in the order they were enqueued,
// and calls never overlap.
func Start[J any](wg *sync.WaitGroup, do func(jobs []J)) *Queue[J] {
	q := &Queue[J]{do: do, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	wg.Add(1)
	go func() {
		defer wg.Done()
		q.run()
	}()
	return q
}

// Enqueue adds a job after those already queued.
func (q *Queue[J]) Enqueue(j J) {
	q.mu.Lock()
	q.jobs = append(q.jobs, j)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Stop ends the goroutine once the jobs queued before the call are done; it does
// not wait (wait on Start's wg).
func (q *Queue[J]) Stop() { close(q.stop) }

func (q *Queue[J]) run() {
	for {
		select {
		case <-q.wake:
		case <-q.stop:
		}
		stopped := false
		select {
		case <-q.stop:
			stopped = true
		default:
		}
		for {
			q.mu.Lock()
			jobs := q.jobs
			q.jobs = nil
			q.mu.Unlock()
			if len(jobs) == 0 {
				break
			}
			q.do(jobs)
		}
		if stopped {
			return
		}
	}
}
