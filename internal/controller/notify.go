package controller

import (
	"sync"

	"github.com/samsa-streaming/samsa/internal/metadata"
)

// notifier calls subscribers, then completes the proposals of the same apply, in
// apply order, on its own goroutine, so that the raft loop never waits for a
// subscriber.
type notifier struct {
	mu struct {
		sync.Mutex
		subscribers []func(prev, next *metadata.Image)
		queue       []notification
		stopped     bool
		waiters     []offsetWaiter
	}
	wake chan struct{}
	done chan struct{}
}

// offsetWaiter is closed once an image at or past offset is pushed (or cancelled).
type offsetWaiter struct {
	offset int64
	ch     chan struct{}
}

type notification struct {
	prev, next  *metadata.Image
	completions []func()
}

func (n *notifier) init() {
	n.wake = make(chan struct{}, 1)
	n.done = make(chan struct{})
}

func (n *notifier) subscribe(fn func(prev, next *metadata.Image)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.subscribers = append(n.mu.subscribers, fn)
}

// waitFor registers ch to be closed once an image at offset or later is pushed.
func (n *notifier) waitFor(offset int64, ch chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.waiters = append(n.mu.waiters, offsetWaiter{offset, ch})
}

// cancelWait closes ch if it is still registered.
func (n *notifier) cancelWait(ch chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, w := range n.mu.waiters {
		if w.ch == ch {
			close(ch)
			n.mu.waiters = append(n.mu.waiters[:i], n.mu.waiters[i+1:]...)
			return
		}
	}
}

// push queues a notification and wakes the offset waiters it satisfies; it never
// blocks.
func (n *notifier) push(x notification) {
	n.mu.Lock()
	n.mu.queue = append(n.mu.queue, x)
	if x.next != nil && len(n.mu.waiters) > 0 {
		kept := n.mu.waiters[:0]
		for _, w := range n.mu.waiters {
			if w.offset <= x.next.Offset() {
				close(w.ch)
			} else {
				kept = append(kept, w)
			}
		}
		n.mu.waiters = kept
	}
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// stop makes run return after delivering what is queued.
func (n *notifier) stop() {
	n.mu.Lock()
	n.mu.stopped = true
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *notifier) run() {
	defer close(n.done)
	for {
		n.mu.Lock()
		queue, subs, stopped := n.mu.queue, n.mu.subscribers, n.mu.stopped
		n.mu.queue = nil
		n.mu.Unlock()
		for _, x := range queue {
			if x.next != nil {
				for _, fn := range subs {
					fn(x.prev, x.next)
				}
			}
			for _, complete := range x.completions {
				complete()
			}
		}
		if len(queue) > 0 {
			continue
		}
		if stopped {
			return
		}
		<-n.wake
	}
}
