package server

import (
	"testing"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
)

func TestFrameClasses(t *testing.T) {
	for _, tc := range []struct{ n, size int }{
		{0, 64 << 10}, {1, 64 << 10}, {64 << 10, 64 << 10},
		{64<<10 + 1, 96 << 10}, {96 << 10, 96 << 10}, {96<<10 + 1, 128 << 10},
		{1 << 20, 1 << 20}, {1<<20 + 1, 3 << 19}, {6 << 20, 6 << 20}, {50 << 20, 64 << 20},
		{100 << 20, 128 << 20}, {1<<31 - 1, 1 << 31},
	} {
		class, size := frameClass(tc.n)
		if size != tc.size || size < tc.n {
			t.Errorf("frameClass(%d) = class %d of %d bytes, want %d", tc.n, class, size, tc.size)
		}
		if c2, s2 := frameClass(size); c2 != class || s2 != size {
			t.Errorf("frameClass(%d) = %d/%d: a class's own size maps to another class", size, c2, s2)
		}
		if class >= frameClasses {
			t.Errorf("frameClass(%d) = class %d, beyond the %d classes", tc.n, class, frameClasses)
		}
	}
}

func TestFramePoolReusesAndTrims(t *testing.T) {
	var p framePool
	a := p.get(5 << 20)
	if len(*a) != 5<<20 || cap(*a) != 6<<20 || p.inUse.Load() != 6<<20 {
		t.Fatalf("get(5 MiB): len %d cap %d, in use %d", len(*a), cap(*a), p.inUse.Load())
	}
	p.put(a)
	if p.inUse.Load() != 0 || p.freeBytes() != 6<<20 {
		t.Fatalf("after put: in use %d, free %d", p.inUse.Load(), p.freeBytes())
	}
	b := p.get(4<<20 + 1) // same class
	if &(*b)[0] != &(*a)[0] || len(*b) != 4<<20+1 {
		t.Fatal("a buffer of the same class was not reused")
	}
	p.put(b)
	c := p.get(3 << 20) // two classes below: the free 6 MiB buffer serves it
	if &(*c)[0] != &(*a)[0] || p.inUse.Load() != 6<<20 {
		t.Fatalf("a smaller frame did not take the free larger buffer (in use %d)", p.inUse.Load())
	}
	p.put(c)
	d := p.get(2 << 20) // three classes below: a new buffer
	if &(*d)[0] == &(*a)[0] || cap(*d) != 2<<20 {
		t.Fatal("a frame took a free buffer more than twice its size")
	}
	p.put(d)
	e, f := p.get(6<<20), p.get(4<<20) // the 6 MiB buffer, and a new 4 MiB one
	p.put(e)
	p.put(f) // dropped: the free 6 MiB buffer serves 4 MiB frames
	if p.freeBytes() != 8<<20 || p.inUse.Load() != 0 {
		t.Fatalf("free %d, in use %d: want the 6 and 2 MiB buffers free", p.freeBytes(), p.inUse.Load())
	}
	p.trim(time.Now().Add(-time.Hour))
	if p.freeBytes() != 8<<20 {
		t.Fatalf("trim dropped a buffer freed after the cutoff: %d free", p.freeBytes())
	}
	p.trim(time.Now().Add(time.Second))
	if p.freeBytes() != 0 {
		t.Fatalf("trim kept %d bytes freed before the cutoff", p.freeBytes())
	}
}

// TestProduceFramesPooled: a Produce frame larger than the connection's budget is read
// in steps, so its size prefix alone takes no more than the budget; once delivered,
// the next frame of that size goes straight into the same buffer, which goes back to
// the pool after Handle.
func TestProduceFramesPooled(t *testing.T) {
	got := make(chan unsafe.Pointer, 2)
	h := apiVersionsHandler(func(req *protocol.Request) <-chan protocol.Response {
		recs := req.Body.(*kmsg.ProduceRequest).Topics[0].Partitions[0].Records
		got <- unsafe.Pointer(&recs[len(recs)-1])
		return protocol.Ready(protocol.Response{Body: kmsg.NewPtrProduceResponse()})
	})
	s, addr := startServer(t, h, func(c *Config) {
		c.Versions = func(key int16) (int16, int16, bool) {
			if key == int16(kmsg.Produce) {
				return 3, 9, true
			}
			return servedVersions(key)
		}
		c.ReusableFrames = func(key int16) bool { return key == int16(kmsg.Produce) }
	})
	req := kmsg.NewPtrProduceRequest()
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: make([]byte, 20<<20)}}}}
	frame := encodeRequest(req, 9, 1, "p")
	c := dial(t, addr)

	send(t, c, frame[:64<<10])
	waitFor(t, "the frame buffer taken", func() bool { inUse, _ := s.FrameBytes(); return inUse > 0 })
	if inUse, _ := s.FrameBytes(); inUse > frameBudget {
		t.Fatalf("a 20 MiB size prefix took %d bytes before the bytes arrived (budget %d)", inUse, frameBudget)
	}
	send(t, c, frame[64<<10:])
	first := <-got
	readResponse(t, c, kmsg.NewPtrProduceResponse(), 9, true)

	send(t, c, frame)
	if second := <-got; second != first {
		t.Fatal("the second frame of the same size was not read into the first one's buffer")
	}
	readResponse(t, c, kmsg.NewPtrProduceResponse(), 9, true)
	waitFor(t, "the frame given back", func() bool { inUse, _ := s.FrameBytes(); return inUse == 0 })
	if _, free := s.FrameBytes(); free != 24<<20 {
		t.Fatalf("%d bytes free in the pool, want the one 24 MiB buffer (the class of 20 MiB)", free)
	}
}
