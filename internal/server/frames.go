package server

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// Request frames of the APIs whose handlers keep no reference to them once Handle has
// returned (Config.ReusableFrames: Produce) are read into buffers from a framePool,
// whatever their size up to MaxRequestSize, so that the produce path allocates and
// zeroes no memory per request and the garbage collector has nothing to collect.
//
// Buffers come in size classes — powers of two from minFrameClass and the midpoints
// 1.5 × 2^k between them, so a frame wastes at most a third of its buffer. The pool is a
// free list per class under one mutex (taken twice per request): sync.Pool does not
// suit a few large buffers, because an item put by one P cannot be taken by another
// from its private slot, and a connection's reader moves between Ps, so most gets
// missed. Buffers idle for longer than frameIdle are dropped by trim, so memory held
// after a burst goes back to the runtime.
//
// A size prefix alone never makes the server take a large buffer: a connection starts
// with a budget of frameBudget bytes, reads a larger frame in steps that double as the
// bytes arrive (each step a buffer of the next class, the previous one given back), and
// raises its budget to the largest frame it has delivered; the smaller buffers of the
// steps are left to the garbage collector, as they would only sit in the pool. A client that sends frames
// of the same size every time — a producer — thus gets a buffer of the right class at
// once from its second request on, and the memory held for it is bounded by the frames
// its connections are reading or handling, not by the rate.
const (
	minFrameClass = 64 << 10
	frameBudget   = 1 << 20
	// frameClasses covers buffers up to 2^32 bytes, more than the largest
	// socket.request.max.bytes (int32).
	frameClasses = 2 * (32 - 16)
	// frameIdle is how long a free buffer is kept.
	frameIdle = 10 * time.Second
)

// frameClass returns the class of the smallest buffer holding n bytes and its size.
func frameClass(n int) (class, size int) {
	if n <= minFrameClass {
		return 0, minFrameClass
	}
	// 2^k < n ≤ 2^(k+1): the classes there are 1.5 × 2^k and 2^(k+1).
	k := bits.Len(uint(n-1)) - 1
	base := 2 * (k - 16) // the class of 2^k
	if half := 3 << (k - 1); n <= half {
		return base + 1, half
	}
	return base + 2, 1 << (k + 1)
}

// framePool holds free frame buffers by size class. It is safe for concurrent use.
type framePool struct {
	inUse atomic.Int64 // bytes of the buffers handed out and not given back
	mu    sync.Mutex
	free  [frameClasses][]freeFrame
}

type freeFrame struct {
	buf    *[]byte
	freeAt time.Time
}

// get returns a buffer of length n: a free one of n's class or of one of the next two
// classes (at most twice the size), so that frames of varying sizes share a buffer
// rather than each keeping one of its own class; a new one of n's class otherwise.
func (p *framePool) get(n int) *[]byte {
	class, size := frameClass(n)
	p.mu.Lock()
	for c := class; c < min(class+3, frameClasses); c++ {
		list := p.free[c]
		if len(list) == 0 {
			continue
		}
		f := list[len(list)-1]
		list[len(list)-1] = freeFrame{}
		p.free[c] = list[:len(list)-1]
		p.mu.Unlock()
		*f.buf = (*f.buf)[:n]
		p.inUse.Add(int64(cap(*f.buf)))
		return f.buf
	}
	p.mu.Unlock()
	b := make([]byte, n, size)
	p.inUse.Add(int64(size))
	return &b
}

// put gives a buffer from get back. It is dropped instead when a free buffer of one
// of the next two classes could serve its frames too: a connection whose frames vary
// in size then keeps one buffer, not one of each class.
func (p *framePool) put(b *[]byte) {
	class, size := frameClass(cap(*b))
	if size != cap(*b) {
		return // not one of ours
	}
	p.inUse.Add(-int64(size))
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := class + 1; c < min(class+3, frameClasses); c++ {
		if len(p.free[c]) > 0 {
			return
		}
	}
	p.free[class] = append(p.free[class], freeFrame{buf: b, freeAt: time.Now()})
}

// drop forgets a buffer from get without keeping it: the garbage collector takes it.
func (p *framePool) drop(b *[]byte) {
	if _, size := frameClass(cap(*b)); size == cap(*b) {
		p.inUse.Add(-int64(size))
	}
}

// trim drops the buffers that have been free since before cutoff.
func (p *framePool) trim(cutoff time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for class, list := range p.free {
		kept := list[:0]
		for _, f := range list {
			if f.freeAt.After(cutoff) {
				kept = append(kept, f)
			}
		}
		clear(list[len(kept):])
		p.free[class] = kept
	}
}

// free returns the bytes of the free buffers.
func (p *framePool) freeBytes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, list := range p.free {
		for _, f := range list {
			n += cap(*f.buf)
		}
	}
	return n
}
