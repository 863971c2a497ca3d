package server

import (
	"testing"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
)

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
