package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/samsa-streaming/samsa/internal/record"
)

func startNull(t *testing.T, cfg NullBrokerConfig) *NullBroker {
	t.Helper()
	nb, err := StartNullBroker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nb.Close() })
	return nb
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, deadline time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestNullBrokerProduceAssignsIncreasingOffsets(t *testing.T) {
	nb := startNull(t, NullBrokerConfig{Partitions: 3})
	ctx := testContext(t)
	cl := newClient(t, nb.Addr(), kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	next := map[int32]int64{}
	for i := range 30 {
		p := int32(i % 3)
		r := &kgo.Record{Partition: p, Value: []byte("v")}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if r.Offset != next[p] {
			t.Fatalf("record %d to partition %d got offset %d, want %d", i, p, r.Offset, next[p])
		}
		next[p]++
	}
	// Batched, asynchronous produce keeps offsets dense per partition.
	results := make(chan *kgo.Record, 300)
	for range 300 {
		cl.Produce(ctx, &kgo.Record{Partition: 1, Value: make([]byte, 100)}, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("async produce: %v", err)
			}
			results <- r
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for range 300 {
		r := <-results
		seen[r.Offset] = true
	}
	for o := int64(10); o < 310; o++ {
		if !seen[o] {
			t.Fatalf("offset %d missing from acknowledgements", o)
		}
	}
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("orders", 1); o.Offset != 310 {
		t.Fatalf("end offset of partition 1 = %d, want 310", o.Offset)
	}
}

func TestNullBrokerAcksZero(t *testing.T) {
	nb := startNull(t, NullBrokerConfig{})
	ctx := testContext(t)
	cl := newClient(t, nb.Addr(), kgo.DefaultProduceTopic("fire"), kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	for range 500 {
		cl.Produce(ctx, &kgo.Record{Value: []byte("x")}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(newClient(t, nb.Addr()))
	waitFor(t, 10*time.Second, "500 records counted", func() bool {
		ends, err := adm.ListEndOffsets(ctx, "fire")
		o, _ := ends.Lookup("fire", 0)
		return err == nil && o.Offset == 500
	})
}

func TestNullBrokerConsumeForever(t *testing.T) {
	const recordSize = 200
	nb := startNull(t, NullBrokerConfig{Partitions: 2, RecordSize: recordSize, BatchBytes: 4096})
	ctx := testContext(t)
	// Create the topic as a user would; the null broker answers CreateTopics.
	adm := kadm.NewClient(newClient(t, nb.Addr()))
	if resp, err := adm.CreateTopic(ctx, 2, 1, nil, "events"); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	cl := newClient(t, nb.Addr(), kgo.ConsumeTopics("events"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	next := map[int32]int64{0: 0, 1: 0}
	total := 0
	// Far more records than anyone produced: the null broker serves reads forever.
	for total < 5000 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("polled %d records: %v", total, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] {
				t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
			}
			if len(r.Value) != recordSize {
				t.Fatalf("value of %d bytes, want %d", len(r.Value), recordSize)
			}
			next[r.Partition]++
			total++
		})
	}
	if next[0] == 0 || next[1] == 0 {
		t.Fatalf("both partitions should be read: %v", next)
	}
}

func TestNullBrokerDeleteTopic(t *testing.T) {
	nb := startNull(t, NullBrokerConfig{})
	ctx := testContext(t)
	adm := kadm.NewClient(newClient(t, nb.Addr()))
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, "gone"); err != nil {
		t.Fatal(err)
	}
	again, err := adm.CreateTopic(ctx, 4, 1, nil, "gone")
	if !errors.Is(err, kerr.TopicAlreadyExists) && !errors.Is(again.Err, kerr.TopicAlreadyExists) {
		t.Fatalf("second create should fail with TOPIC_ALREADY_EXISTS, got %v / %v", err, again.Err)
	}
	if resp, err := adm.DeleteTopic(ctx, "gone"); err != nil || resp.Err != nil {
		t.Fatalf("delete: %v %v", err, resp.Err)
	}
	if resp, err := adm.DeleteTopic(ctx, "gone"); err == nil && resp.Err == nil {
		t.Fatal("deleting a deleted topic should fail")
	}
}

// captureConn records what is written to it.
type captureConn struct {
	net.Conn
	buf bytes.Buffer
}

func (c *captureConn) Write(b []byte) (int, error) { return c.buf.Write(b) }

// TestFetchEncodingMatchesKmsg checks the hand-written Fetch response against kmsg's
// encoder at every version served, and that every batch copy carries the right offset.
func TestFetchEncodingMatchesKmsg(t *testing.T) {
	nb := startNull(t, NullBrokerConfig{Partitions: 2, RecordSize: 100, BatchBytes: 1000})
	tp, _ := nb.topic("t", true, 2)
	batch := nb.canned.bytes
	perBatch := nb.canned.records
	for version := int16(4); version <= (&kmsg.FetchRequest{}).MaxVersion(); version++ {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(version)
		req.MaxBytes = int32(3*len(batch) + 10)
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "t", tp.id
		for _, p := range []struct {
			partition int32
			offset    int64
			maxBytes  int32
		}{{0, 7, int32(2*len(batch) + 5)}, {1, 100, int32(5 * len(batch))}, {9, 0, 1 << 20}} {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p.partition, p.offset, p.maxBytes
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)

		conn := &captureConn{}
		if err := nb.fetch(&connState{conn: conn}, 42, req); err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		got := conn.buf.Bytes()

		// What kmsg writes for the same response.
		want := kmsg.NewPtrFetchResponse()
		want.SetVersion(version)
		wt := kmsg.NewFetchResponseTopic()
		wt.Topic, wt.TopicID = "t", tp.id
		copies := func(from int64, n int) []byte {
			out := []byte{} // empty, not null, as Kafka answers a partition without data
			for k := range n {
				b := append([]byte(nil), batch...)
				binary.BigEndian.PutUint64(b, uint64(from+int64(k)*perBatch))
				out = append(out, b...)
			}
			return out
		}
		for _, p := range []struct {
			partition int32
			errCode   int16
			from      int64
			n         int
		}{{0, 0, 7, 2}, {1, 0, 100, 1}, {9, errCodeUnknownTopicOrPartition, 0, 0}} {
			wp := kmsg.NewFetchResponseTopicPartition()
			wp.Partition, wp.ErrorCode = p.partition, p.errCode
			wp.HighWatermark = p.from + int64(p.n)*perBatch
			wp.LastStableOffset = wp.HighWatermark
			wp.LogStartOffset = 0
			wp.RecordBatches = copies(p.from, p.n)
			wt.Partitions = append(wt.Partitions, wp)
		}
		want.Topics = append(want.Topics, wt)
		wantBytes := binary.BigEndian.AppendUint32(nil, 0)
		wantBytes = binary.BigEndian.AppendUint32(wantBytes, 42)
		if want.IsFlexible() {
			wantBytes = append(wantBytes, 0)
		}
		wantBytes = want.AppendTo(wantBytes)
		binary.BigEndian.PutUint32(wantBytes, uint32(len(wantBytes)-4))
		if !bytes.Equal(got, wantBytes) {
			at := 0
			for at < min(len(got), len(wantBytes)) && got[at] == wantBytes[at] {
				at++
			}
			t.Fatalf("v%d: response differs from kmsg's encoding (%d vs %d bytes) at byte %d", version, len(got), len(wantBytes), at)
		}
	}
}

func TestCountRecords(t *testing.T) {
	nb := startNull(t, NullBrokerConfig{RecordSize: 10, BatchBytes: 500})
	batch := nb.canned.bytes
	two := append(append([]byte(nil), batch...), batch...)
	tests := []struct {
		name string
		in   []byte
		want int64
		ok   bool
	}{
		{"one batch", batch, nb.canned.records, true},
		{"two batches", two, 2 * nb.canned.records, true},
		{"empty", nil, 0, false},
		{"truncated", batch[:len(batch)-1], 0, false},
		{"short header", batch[:30], 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := countRecords(tc.in)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("countRecords = %d, %t; want %d, %t", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestNullBrokerAcrossVersions produces and consumes with the client pinned to older
// and newer versions: names before topic ids (Produce v13, Fetch v13), non-flexible
// and flexible encodings.
func TestNullBrokerAcrossVersions(t *testing.T) {
	tests := []struct{ produce, fetch int16 }{{3, 4}, {7, 11}, {9, 12}, {12, 13}, {13, 16}}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("produce v%d fetch v%d", tc.produce, tc.fetch), func(t *testing.T) {
			nb := startNull(t, NullBrokerConfig{RecordSize: 50, BatchBytes: 512})
			ctx := testContext(t)
			versions := kversion.Stable()
			versions.SetMaxKeyVersion(0, tc.produce)
			versions.SetMaxKeyVersion(1, tc.fetch)
			topic := "v"
			cl := newClient(t, nb.Addr(), kgo.MaxVersions(versions), kgo.DefaultProduceTopic(topic),
				kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			for i := range 3 {
				r := &kgo.Record{Value: []byte("hello")}
				if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
					t.Fatalf("produce: %v", err)
				}
				if r.Offset != int64(i) {
					t.Fatalf("offset %d, want %d", r.Offset, i)
				}
			}
			var got int64
			for got < 100 {
				fs := cl.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatalf("polled %d records: %v", got, err)
				}
				fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
				fs.EachRecord(func(r *kgo.Record) {
					if r.Offset != got {
						t.Fatalf("offset %d, want %d", r.Offset, got)
					}
					got++
				})
			}
		})
	}
}

// TestNullBrokerKeepsTopicNames guards against keeping strings that alias a reused
// request buffer: topics created one after another on one connection keep their names.
func TestNullBrokerKeepsTopicNames(t *testing.T) {
	nb := startNull(t, NullBrokerConfig{})
	ctx := testContext(t)
	adm := kadm.NewClient(newClient(t, nb.Addr()))
	names := []string{"alpha", "bravo", "charl", "delta"}
	for _, n := range names {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, n); err != nil {
			t.Fatal(err)
		}
	}
	listed, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if !listed.Has(n) {
			t.Fatalf("topic %q lost; listed %v", n, listed.Names())
		}
	}
	if len(listed.Names()) != len(names) {
		t.Fatalf("listed %v, want %v", listed.Names(), names)
	}
}

// Share consumers of one partition split it: each record is polled by exactly one of
// them, the canned batch (snappy here) decodes, and closing the consumers (final
// acknowledgements, epoch -1 session ends, leaving heartbeats) succeeds.
func TestNullBrokerShareConsumersSplitRecords(t *testing.T) {
	const recordSize = 100
	nb := startNull(t, NullBrokerConfig{RecordSize: recordSize, BatchBytes: 4096, Compression: record.CompressionSnappy})
	ctx := testContext(t)
	const consumers, want = 3, 20_000
	var mu sync.Mutex
	seen := make(map[int64]int)
	var wg sync.WaitGroup
	for range consumers {
		cl, err := kgo.NewClient(kgo.SeedBrokers(nb.Addr()), kgo.ShareGroup("g"), kgo.ConsumeTopics("queue"))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				fs.EachError(func(topic string, p int32, err error) {
					if ctx.Err() == nil {
						t.Errorf("fetch %s/%d: %v", topic, p, err)
					}
				})
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) {
					if len(r.Value) != recordSize {
						t.Errorf("value of %d bytes, want %d", len(r.Value), recordSize)
					}
					seen[r.Offset]++
				})
				done := len(seen) >= want
				mu.Unlock()
				if done {
					return
				}
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("polled %d distinct records before the deadline, want %d", len(seen), want)
	}
	for o, n := range seen {
		if n != 1 {
			t.Fatalf("offset %d polled %d times", o, n)
		}
	}
}
