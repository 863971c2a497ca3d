package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
)

// streamRecorder is a ProduceHandler that records what it is handed, request by
// request, and answers each with a ProduceResponse of one partition per topic.
type streamRecorder struct {
	mu       sync.Mutex
	requests []streamedRequest
	aborted  int
}

type streamedRequest struct {
	clientID string
	header   protocol.ProduceHeader
	topics   []streamedTopic
}

type streamedTopic struct {
	name       string
	id         [16]byte
	partitions int
	records    []streamedPartition
}

type streamedPartition struct {
	index   int32
	records []byte // nil when null
}

type recorderStream struct {
	r   *streamRecorder
	req streamedRequest
}

func (s *streamRecorder) StartProduce(req *protocol.Request, h protocol.ProduceHeader) protocol.ProduceStream {
	return &recorderStream{r: s, req: streamedRequest{clientID: req.ClientID, header: h}}
}

func (s *recorderStream) Topic(name string, id [16]byte, partitions int) {
	s.req.topics = append(s.req.topics, streamedTopic{name: name, id: id, partitions: partitions})
}

func (s *recorderStream) Partition(index int32, records []byte) {
	t := &s.req.topics[len(s.req.topics)-1]
	var kept []byte
	if records != nil {
		kept = append([]byte{}, records...) // records is valid only during the call
	}
	t.records = append(t.records, streamedPartition{index, kept})
}

func (s *recorderStream) Finish() (protocol.Response, <-chan protocol.Response) {
	s.r.mu.Lock()
	s.r.requests = append(s.r.requests, s.req)
	s.r.mu.Unlock()
	resp := kmsg.NewPtrProduceResponse()
	for _, t := range s.req.topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.name, t.id
		resp.Topics = append(resp.Topics, rt)
	}
	return protocol.Response{Body: resp}, nil
}

func (s *recorderStream) Abort() {
	s.r.mu.Lock()
	s.r.aborted++
	s.r.mu.Unlock()
}

func (s *streamRecorder) snapshot() ([]streamedRequest, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]streamedRequest(nil), s.requests...), s.aborted
}

// startStreamServer serves Produce 3–13 through rec and nothing else but ApiVersions.
func startStreamServer(t *testing.T, rec *streamRecorder) string {
	_, addr := startServer(t, apiVersionsHandler(func(req *protocol.Request) <-chan protocol.Response {
		t.Errorf("request key %d version %d went to Handle, not the produce stream", req.Key, req.Version)
		return protocol.Ready(protocol.Response{None: true, Close: true})
	}), func(c *Config) {
		c.Versions = func(key int16) (int16, int16, bool) {
			if key == produceKey {
				return 3, 13, true
			}
			return servedVersions(key)
		}
		c.Produce = rec
	})
	return addr
}

// randomProduce builds a Produce request with random topics, partitions and records,
// null records and unknown tagged fields included (from v9).
func randomProduce(rng *rand.Rand, version int16) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	if rng.IntN(3) == 0 {
		req.TransactionID = kmsg.StringPtr(fmt.Sprintf("txn-%d", rng.IntN(100)))
	}
	req.Acks = []int16{-1, 0, 1}[rng.IntN(3)]
	req.TimeoutMillis = rng.Int32N(60000)
	for i := range rng.IntN(4) {
		rt := kmsg.NewProduceRequestTopic()
		if version >= 13 {
			for j := range rt.TopicID {
				rt.TopicID[j] = byte(rng.Uint32())
			}
		} else {
			rt.Topic = fmt.Sprintf("topic-%d-%s", i, string(bytes.Repeat([]byte{'x'}, rng.IntN(40))))
		}
		for range rng.IntN(5) {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = rng.Int32N(1000)
			switch rng.IntN(4) {
			case 0: // null records
			case 1:
				rp.Records = []byte{}
			default:
				rp.Records = make([]byte, rng.IntN(70_000))
				for j := range rp.Records {
					rp.Records[j] = byte(rng.Uint32())
				}
			}
			if version >= 9 && rng.IntN(3) == 0 {
				rp.UnknownTags.Set(uint32(rng.IntN(10)), []byte("partition tag"))
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		if version >= 9 && rng.IntN(3) == 0 {
			rt.UnknownTags.Set(7, []byte("topic tag"))
		}
		req.Topics = append(req.Topics, rt)
	}
	if version >= 9 && rng.IntN(3) == 0 {
		req.UnknownTags.Set(3, []byte("request tag"))
	}
	return req
}

// TestProduceStreamMatchesKmsg: requests of every streamed version, encoded by kmsg,
// reach the ProduceHandler field for field, partition by partition, and get their
// responses in order.
func TestProduceStreamMatchesKmsg(t *testing.T) {
	rec := &streamRecorder{}
	addr := startStreamServer(t, rec)
	c := dial(t, addr)
	rng := rand.New(rand.NewPCG(1, 2))
	var sent []*kmsg.ProduceRequest
	for i := range 60 {
		version := int16(3 + i%11)
		req := randomProduce(rng, version)
		send(t, c, encodeRequest(req, version, int32(i), fmt.Sprintf("client-%d", i%3)))
		var resp kmsg.ProduceResponse
		if corr := readResponse(t, c, &resp, version, version >= 9); corr != int32(i) {
			t.Fatalf("response %d has correlation id %d", i, corr)
		}
		if len(resp.Topics) != len(req.Topics) {
			t.Fatalf("response %d: %d topics, want %d", i, len(resp.Topics), len(req.Topics))
		}
		sent = append(sent, req)
	}
	got, aborted := rec.snapshot()
	if aborted != 0 || len(got) != len(sent) {
		t.Fatalf("%d requests streamed, %d aborted; want %d, 0", len(got), aborted, len(sent))
	}
	for i, req := range sent {
		g := got[i]
		if g.clientID != fmt.Sprintf("client-%d", i%3) || g.header.Acks != req.Acks || g.header.TimeoutMillis != req.TimeoutMillis ||
			g.header.Topics != len(req.Topics) || !equalPtr(g.header.TransactionalID, req.TransactionID) {
			t.Fatalf("request %d (v%d): header %+v, client %q; want %+v", i, req.Version, g.header, g.clientID, req)
		}
		for j, rt := range req.Topics {
			gt := g.topics[j]
			if gt.name != rt.Topic || gt.id != rt.TopicID || gt.partitions != len(rt.Partitions) || len(gt.records) != len(rt.Partitions) {
				t.Fatalf("request %d topic %d: %q with %d/%d partitions, want %q with %d", i, j, gt.name, gt.partitions, len(gt.records), rt.Topic, len(rt.Partitions))
			}
			for k, rp := range rt.Partitions {
				gp := gt.records[k]
				if gp.index != rp.Partition || (gp.records == nil) != (rp.Records == nil) || !bytes.Equal(gp.records, rp.Records) {
					t.Fatalf("request %d topic %d partition %d: index %d, %d bytes (nil %t); want %d, %d bytes (nil %t)",
						i, j, k, gp.index, len(gp.records), gp.records == nil, rp.Partition, len(rp.Records), rp.Records == nil)
				}
			}
		}
	}
}

// TestProduceStreamLargeRecords: records larger than the stream's window, between
// small ones, arrive whole and in order.
func TestProduceStreamLargeRecords(t *testing.T) {
	rec := &streamRecorder{}
	addr := startStreamServer(t, rec)
	rng := rand.New(rand.NewPCG(7, 8))
	big := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	req := kmsg.NewPtrProduceRequest()
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "big"
	for i, records := range [][]byte{big(100), big(streamWindow*5/2 + 3), big(70_000), big(streamWindow + 1)} {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = int32(i), records
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	c := dial(t, addr)
	for v := int16(8); v <= 9; v++ { // classic and compact lengths
		send(t, c, encodeRequest(req, v, int32(v), "big"))
		readResponse(t, c, kmsg.NewPtrProduceResponse(), v, v >= 9)
	}
	got, _ := rec.snapshot()
	for _, g := range got {
		for i, rp := range rt.Partitions {
			if !bytes.Equal(g.topics[0].records[i].records, rp.Records) {
				t.Fatalf("partition %d: %d bytes arrived, want the %d sent", i, len(g.topics[0].records[i].records), len(rp.Records))
			}
		}
	}
	if len(got) != 2 {
		t.Fatalf("%d requests streamed, want 2", len(got))
	}
}

func equalPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// TestProduceStreamMalformed: a streamed Produce request cut off at any byte, or with a
// length beyond its frame, closes the connection — no response, no panic — and the
// stream is aborted when it had started; the server keeps serving other connections.
func TestProduceStreamMalformed(t *testing.T) {
	rec := &streamRecorder{}
	addr := startStreamServer(t, rec)
	rng := rand.New(rand.NewPCG(3, 4))
	req := randomProduce(rng, 9)
	for len(req.Topics) == 0 {
		req = randomProduce(rng, 9)
	}
	frame := encodeRequest(req, 9, 1, "bad")
	// Claim the whole frame, send a prefix of it, then half-close: the server reads a
	// truncated request.
	for _, cut := range []int{6, 12, 20, len(frame) / 2, len(frame) - 1} {
		c := dial(t, addr)
		send(t, c, frame[:cut])
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		expectClosed(t, c)
	}
	// A topic count larger than the frame can hold: refused before any topic is read.
	small := kmsg.NewPtrProduceRequest()
	small.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: []byte("0123456789")}}}}
	bad := encodeRequest(small, 9, 2, "bad")
	countAt := 4 + 2 + 2 + 4 + 2 + len("bad") + 1 + 1 + 2 + 4 // size … header tags, null txn id, acks, timeout
	if bad[countAt] != 2 {                                    // compact array: 1 topic + 1
		t.Fatalf("byte %d is %d, not the topic count", countAt, bad[countAt])
	}
	bad[countAt] = 0x7f // 126 topics: at least 252 bytes, in a frame of a few dozen
	c := dial(t, addr)
	send(t, c, bad)
	expectClosed(t, c)

	roundTripApiVersions(t, addr)
	got, aborted := rec.snapshot()
	if len(got) != 0 {
		t.Fatalf("%d malformed requests finished", len(got))
	}
	if aborted == 0 {
		t.Fatal("no stream was aborted, though requests were cut off after their topics began")
	}
}

// FuzzProduceStream feeds arbitrary frames to the stream decoder: it never panics or
// reads past the frame, and whatever it accepts kmsg decodes to the same request.
func FuzzProduceStream(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for v := minStreamProduce; v <= maxStreamProduce; v++ {
		req := randomProduce(rng, v)
		for _, p := range req.Topics {
			for i := range p.Partitions {
				if len(p.Partitions[i].Records) > 100 {
					p.Partitions[i].Records = p.Partitions[i].Records[:100]
				}
			}
		}
		f.Add(encodeRequest(req, v, 1, "fuzz")[4:])
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) < 4 {
			return
		}
		frame = append([]byte{0, 0}, frame[2:]...) // the api key: only Produce is streamed
		version := int16(frame[2])<<8 | int16(frame[3])
		if version < minStreamProduce || version > maxStreamProduce {
			return
		}
		rec := &streamRecorder{}
		srv := &Server{cfg: Config{Produce: rec}}
		// One byte more than the frame: reading past its end would take it.
		c := &conn{srv: srv, listener: &Listener{}, br: bufio.NewReader(bytes.NewReader(append(append([]byte{}, frame...), 0xee)))}
		r := c.newFrameReader(len(frame))
		stream, _, err := c.readProduce(r, version)
		r.release()
		if rest, _ := io.ReadAll(c.br); len(rest) == 0 || rest[len(rest)-1] != 0xee || (err == nil && len(rest) != 1) {
			t.Fatalf("the decoder read past the frame, or accepted it without reading it all (%d bytes left, err %v)", len(rest), err)
		}
		if err != nil {
			return
		}
		stream.Finish()
		got, _ := rec.snapshot()
		want := kmsg.NewPtrProduceRequest()
		want.SetVersion(version)
		body, err := parseRequest(frame, func(int16) (int16, int16, bool) { return minStreamProduce, maxStreamProduce, true })
		if err != nil {
			t.Fatalf("the stream decoder accepted a frame kmsg refuses: %v", err)
		}
		want = body.body.(*kmsg.ProduceRequest)
		g := got[0]
		if g.header.Acks != want.Acks || g.header.TimeoutMillis != want.TimeoutMillis || len(g.topics) != len(want.Topics) ||
			!equalPtr(g.header.TransactionalID, want.TransactionID) {
			t.Fatalf("header %+v, %d topics; kmsg: %+v", g.header, len(g.topics), want)
		}
		for i, wt := range want.Topics {
			if g.topics[i].name != wt.Topic || g.topics[i].id != wt.TopicID || len(g.topics[i].records) != len(wt.Partitions) {
				t.Fatalf("topic %d: %+v; kmsg: %+v", i, g.topics[i], wt)
			}
			for j, wp := range wt.Partitions {
				gp := g.topics[i].records[j]
				if gp.index != wp.Partition || (gp.records == nil) != (wp.Records == nil) || !bytes.Equal(gp.records, wp.Records) {
					t.Fatalf("topic %d partition %d: %+v; kmsg: %+v", i, j, gp, wp)
				}
			}
		}
	})
}

// TestProduceStreamVarintOverflow: an unsigned varint whose fifth byte carries bits
// past the 32nd is refused, as kmsg refuses it for every other request (a tag number
// of 2^32 or more in a Produce frame was taken, truncated).
func TestProduceStreamVarintOverflow(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		want uint32
		ok   bool
	}{
		{[]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, 1<<32 - 1, true},
		{[]byte{0xab, 0xab, 0xab, 0xab, 0x30}, 0, false},
		{[]byte{0x80, 0x80, 0x80, 0x80, 0x10}, 0, false},
		{[]byte{0x80, 0x80, 0x80, 0x80, 0x80}, 0, false},
	} {
		srv := &Server{cfg: Config{Produce: &streamRecorder{}}}
		c := &conn{srv: srv, listener: &Listener{}, br: bufio.NewReader(bytes.NewReader(append(tc.in, 0)))}
		r := c.newFrameReader(len(tc.in) + 1)
		got, err := r.uvarint()
		r.release()
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("uvarint(% x) = %d, %v; want %d, ok %t", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
