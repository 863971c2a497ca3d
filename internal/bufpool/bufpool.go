// Package bufpool keeps large byte buffers for reuse: request frames on the server,
// response frames of follower fetches. A Pool has one free list per size class —
// powers of two from MinClass and the midpoints 1.5 × 2^k between them, so a buffer
// wastes at most a third of itself — under one mutex. sync.Pool does not suit a few
// large buffers: an item put by one P cannot be taken by another from its private slot,
// and the goroutine that reads a connection moves between Ps, so most gets missed.
//
// Get takes a free buffer of the size's class or of one of the next two (at most twice
// the size); Put gives one back, or drops it when a free buffer of one of the next two
// classes could serve its sizes too, so that a user whose sizes vary keeps one buffer
// rather than one per class. Buffers free for longer than a Trim's cutoff are dropped.
//
// A Pool is safe for concurrent use; its zero value is ready.
package bufpool

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// Size classes (format of the pool, not of any file).
const (
	// MinClass is the smallest buffer size.
	MinClass = 64 << 10
	// classes covers buffers up to 2^32 bytes.
	classes = 2 * (32 - 16)
)

// Class returns the class of the smallest buffer holding n bytes and its size.
func Class(n int) (class, size int) {
	if n <= MinClass {
		return 0, MinClass
	}
	// 2^k < n ≤ 2^(k+1): the classes there are 1.5 × 2^k and 2^(k+1).
	k := bits.Len(uint(n-1)) - 1
	base := 2 * (k - 16) // the class of 2^k
	if half := 3 << (k - 1); n <= half {
		return base + 1, half
	}
	return base + 2, 1 << (k + 1)
}

// Pool holds free buffers by size class.
type Pool struct {
	inUse atomic.Int64 // bytes of the buffers handed out and not given back
	mu    sync.Mutex
	free  [classes][]freeBuf
}

type freeBuf struct {
	buf    *[]byte
	freeAt time.Time
}

// Get returns a buffer of length n (see the package comment for which).
func (p *Pool) Get(n int) *[]byte {
	class, size := Class(n)
	p.mu.Lock()
	for c := class; c < min(class+3, classes); c++ {
		list := p.free[c]
		if len(list) == 0 {
			continue
		}
		f := list[len(list)-1]
		list[len(list)-1] = freeBuf{}
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

// Put gives a buffer from Get back.
func (p *Pool) Put(b *[]byte) {
	class, size := Class(cap(*b))
	if size != cap(*b) {
		return // not one of ours
	}
	p.inUse.Add(-int64(size))
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := class + 1; c < min(class+3, classes); c++ {
		if len(p.free[c]) > 0 {
			return
		}
	}
	p.free[class] = append(p.free[class], freeBuf{buf: b, freeAt: time.Now()})
}

// Drop forgets a buffer from Get without keeping it: the garbage collector takes it.
func (p *Pool) Drop(b *[]byte) {
	if _, size := Class(cap(*b)); size == cap(*b) {
		p.inUse.Add(-int64(size))
	}
}

// Trim drops the buffers that have been free since before cutoff.
func (p *Pool) Trim(cutoff time.Time) {
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

// InUse returns the bytes of the buffers handed out and not given back.
func (p *Pool) InUse() int64 { return p.inUse.Load() }

// Free returns the bytes of the free buffers.
func (p *Pool) Free() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, list := range p.free {
		for _, f := range list {
			n += int64(cap(*f.buf))
		}
	}
	return n
}
