package bufpool

import (
	"testing"
	"time"
)

func TestClasses(t *testing.T) {
	for _, tc := range []struct{ n, size int }{
		{0, 64 << 10}, {1, 64 << 10}, {64 << 10, 64 << 10},
		{64<<10 + 1, 96 << 10}, {96 << 10, 96 << 10}, {96<<10 + 1, 128 << 10},
		{1 << 20, 1 << 20}, {1<<20 + 1, 3 << 19}, {6 << 20, 6 << 20}, {50 << 20, 64 << 20},
		{100 << 20, 128 << 20}, {1<<31 - 1, 1 << 31},
	} {
		class, size := Class(tc.n)
		if size != tc.size || size < tc.n {
			t.Errorf("Class(%d) = class %d of %d bytes, want %d", tc.n, class, size, tc.size)
		}
		if c2, s2 := Class(size); c2 != class || s2 != size {
			t.Errorf("Class(%d) = %d/%d: a class's own size maps to another class", size, c2, s2)
		}
		if class >= classes {
			t.Errorf("Class(%d) = class %d, beyond the %d classes", tc.n, class, classes)
		}
	}
}

func TestPoolReusesAndTrims(t *testing.T) {
	var p Pool
	a := p.Get(5 << 20)
	if len(*a) != 5<<20 || cap(*a) != 6<<20 || p.InUse() != 6<<20 {
		t.Fatalf("get(5 MiB): len %d cap %d, in use %d", len(*a), cap(*a), p.InUse())
	}
	p.Put(a)
	if p.InUse() != 0 || p.Free() != 6<<20 {
		t.Fatalf("after put: in use %d, free %d", p.InUse(), p.Free())
	}
	b := p.Get(4<<20 + 1) // same class
	if &(*b)[0] != &(*a)[0] || len(*b) != 4<<20+1 {
		t.Fatal("a buffer of the same class was not reused")
	}
	p.Put(b)
	c := p.Get(3 << 20) // two classes below: the free 6 MiB buffer serves it
	if &(*c)[0] != &(*a)[0] || p.InUse() != 6<<20 {
		t.Fatalf("a smaller frame did not take the free larger buffer (in use %d)", p.InUse())
	}
	p.Put(c)
	d := p.Get(2 << 20) // three classes below: a new buffer
	if &(*d)[0] == &(*a)[0] || cap(*d) != 2<<20 {
		t.Fatal("a frame took a free buffer more than twice its size")
	}
	p.Put(d)
	e, f := p.Get(6<<20), p.Get(4<<20) // the 6 MiB buffer, and a new 4 MiB one
	p.Put(e)
	p.Put(f) // dropped: the free 6 MiB buffer serves 4 MiB frames
	if p.Free() != 8<<20 || p.InUse() != 0 {
		t.Fatalf("free %d, in use %d: want the 6 and 2 MiB buffers free", p.Free(), p.InUse())
	}
	p.Trim(time.Now().Add(-time.Hour))
	if p.Free() != 8<<20 {
		t.Fatalf("trim dropped a buffer freed after the cutoff: %d free", p.Free())
	}
	p.Trim(time.Now().Add(time.Second))
	if p.Free() != 0 {
		t.Fatalf("trim kept %d bytes freed before the cutoff", p.Free())
	}
}
