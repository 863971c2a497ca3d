package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/server"
)

// BenchmarkProduceRequest sends one Produce request at a time over TCP to a real
// server and broker (in this process, data in a temporary directory) and reads its
// response, shaped as a franz-go producer with 1 KiB records sends them to a broker
// that keeps up: a batch of up to 1 MiB for every partition of the topic, up to about
// 50 MB (franz-go's default of 50,000 buffered records) per request. allocs/op and B/op count the whole
// process per request, server and broker included (the raw client allocates
// nothing per request); the steady state should allocate nothing per partition.
func BenchmarkProduceRequest(b *testing.B) {
	for _, shape := range []struct{ partitions, requestBytes int }{
		{1, 1 << 20}, {6, 6 << 20}, {64, 32 << 20}, {1000, 50 << 20},
	} {
		b.Run(fmt.Sprintf("partitions=%d", shape.partitions), func(b *testing.B) {
			benchProduce(b, shape.partitions, shape.requestBytes, 1024)
		})
	}
}

func benchProduce(b *testing.B, partitions, requestBytes, recordSize int) {
	addr := startBenchBroker(b, "bench", int32(partitions))
	frame := produceFrame(b, "bench", partitions, requestBytes, recordSize)
	c := dialBench(b, addr)
	var resp []byte
	roundTrip := func() { resp = c.roundTrip(frame) }
	for range 20 { // warm up pools, page cache and segment preallocation
		roundTrip()
	}
	checkProduceResponse(b, resp)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	cpu0 := processCPU(b)
	b.ResetTimer()
	for range b.N {
		roundTrip()
	}
	b.StopTimer()
	// CPU time of the whole process (the raw client's share is one write and one
	// read per request) per MB of request: comparable across partition counts when
	// the wall time is not, on a shared machine.
	b.ReportMetric(float64((processCPU(b)-cpu0).Milliseconds())/(float64(b.N)*float64(len(frame))/(1<<20)), "cpu-ms/MB")
	checkProduceResponse(b, resp)
}

// processCPU returns the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchConn is a raw client connection: one request at a time, its response read into
// a reused buffer.
type benchConn struct {
	b    *testing.B
	conn net.Conn
	resp []byte
}

func dialBench(b *testing.B, addr string) *benchConn {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return &benchConn{b: b, conn: conn, resp: make([]byte, 1<<20)}
}

// roundTrip sends a framed request and returns its response frame (after the size),
// valid until the next call.
func (c *benchConn) roundTrip(frame []byte) []byte {
	if _, err := c.conn.Write(frame); err != nil {
		c.b.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		c.b.Fatal(err)
	}
	n := int(binary.BigEndian.Uint32(size[:]))
	if n > len(c.resp) {
		c.resp = make([]byte, n)
	}
	if _, err := io.ReadFull(c.conn, c.resp[:n]); err != nil {
		c.b.Fatal(err)
	}
	return c.resp[:n]
}

// startBenchBroker starts a broker and a server on 127.0.0.1:0 with one topic. Its
// fetch.max.bytes lets a fetch of 1,000 partitions take 128 KiB of each.
func startBenchBroker(b *testing.B, topic string, partitions int32) string {
	cfg, err := config.Load("", []string{"log.dirs=" + b.TempDir(), "listeners=PLAINTEXT://127.0.0.1:0", "fetch.max.bytes=268435456"})
	if err != nil {
		b.Fatal(err)
	}
	brk, err := New(Options{Config: cfg, Clock: clock.Real{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { brk.Close() })
	if err := brk.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	req.Topics = append(req.Topics, rt)
	req.SetVersion(5)
	r := <-brk.Handle(&protocol.Request{Key: req.Key(), Version: req.GetVersion(), Body: req})
	if code := r.Body.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
		b.Fatalf("create topic: error %d", code)
	}
	srv, err := server.New(server.Config{
		Listeners:      server.Listen("127.0.0.1:0"),
		Handler:        brk,
		Versions:       Versions,
		APIKeys:        APIKeys,
		ReusableFrames: ReusableFrames,
		Produce:        brk,
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	return srv.Addrs()[0].String()
}

// produceFrame encodes a Produce v9 request (acks=1) with one batch of recordSize-byte
// records per partition, requestBytes of records in all, size prefix included.
func produceFrame(b *testing.B, topic string, partitions, requestBytes, recordSize int) []byte {
	perPartition := min(max(requestBytes/partitions/recordSize, 1), 1000) // a batch stays below max.message.bytes
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	value := make([]byte, recordSize)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	for p := range partitions {
		recs := make([]record.Record, perPartition)
		for i := range recs {
			recs[i] = record.Record{Value: value, TimestampDelta: int64(i)}
		}
		opts := record.DefaultBuildOptions()
		opts.BaseTimestamp = time.Now().UnixMilli()
		batch, err := record.Build(opts, recs)
		if err != nil {
			b.Fatal(err)
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = int32(p), batch
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	body := req.AppendTo(nil)
	frame := binary.BigEndian.AppendUint32(nil, 0)
	frame = binary.BigEndian.AppendUint16(frame, uint16(kmsg.Produce))
	frame = binary.BigEndian.AppendUint16(frame, 9)
	frame = binary.BigEndian.AppendUint32(frame, 1)      // correlation id
	frame = binary.BigEndian.AppendUint16(frame, 0xffff) // null client id
	frame = append(frame, 0)                             // header tags (v9 is flexible)
	frame = append(frame, body...)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	return frame
}

// checkProduceResponse fails the benchmark unless every partition of the last response
// (a Produce v9 response body after the 4-byte correlation id and the header tags)
// succeeded.
func checkProduceResponse(b *testing.B, frame []byte) {
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(9)
	if err := resp.ReadFrom(frame[5:]); err != nil {
		b.Fatalf("decoding the produce response: %v", err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				b.Fatalf("partition %d: error %d", p.Partition, p.ErrorCode)
			}
		}
	}
}

// BenchmarkFetchRequest reads the same data again and again, one Fetch request at a
// time over TCP: every partition of the topic from offset 0, up to 128 KiB each (a
// consumer of many partitions), in batches of 32 KiB. allocs/op counts the whole process.
func BenchmarkFetchRequest(b *testing.B) {
	for _, partitions := range []int{1, 64, 1000} {
		b.Run(fmt.Sprintf("partitions=%d", partitions), func(b *testing.B) {
			addr := startBenchBroker(b, "bench", int32(partitions))
			roundTrip := dialBench(b, addr).roundTrip
			for range 8 { // 8 batches of 32 × 1 KiB records in every partition
				roundTrip(produceFrame(b, "bench", partitions, partitions*32<<10, 1024))
			}
			req := kmsg.NewPtrFetchRequest()
			req.SetVersion(12)
			req.MaxWaitMillis, req.MaxBytes = 0, 256<<20
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = "bench"
			for p := range partitions {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.PartitionMaxBytes = int32(p), 128<<10
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			frame := binary.BigEndian.AppendUint32(nil, 0)
			frame = binary.BigEndian.AppendUint16(frame, uint16(kmsg.Fetch))
			frame = binary.BigEndian.AppendUint16(frame, 12)
			frame = binary.BigEndian.AppendUint32(frame, 2)
			frame = binary.BigEndian.AppendUint16(frame, 0xffff)
			frame = append(frame, 0)
			frame = req.AppendTo(frame)
			binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
			body := roundTrip(frame)
			fr := kmsg.NewPtrFetchResponse()
			fr.SetVersion(12)
			if err := fr.ReadFrom(body[5:]); err != nil {
				b.Fatal(err)
			}
			for _, t := range fr.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode != 0 || len(p.RecordBatches) < 96<<10 {
						b.Fatalf("partition %d: error %d, %d bytes of records, high watermark %d", p.Partition, p.ErrorCode, len(p.RecordBatches), p.HighWatermark)
					}
				}
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				roundTrip(frame)
			}
		})
	}
}
