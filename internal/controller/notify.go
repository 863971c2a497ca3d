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
	}
	wake chan struct{}
	done chan struct{}
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

// push queues a notification; it never blocks.
func (n *notifier) push(x notification) {
	n.mu.Lock()
	n.mu.queue = append(n.mu.queue, x)
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
