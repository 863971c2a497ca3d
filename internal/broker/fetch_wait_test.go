package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestLongPollsLeaveNoWaiters: a consumer long-polling a partition where nothing is
// written — what every idle partition of a fetch session sees, twice a second —
// leaves nothing registered on it once each fetch is answered; a fetch that was
// woken by a write finds the record and leaves nothing either.
func TestLongPollsLeaveNoWaiters(t *testing.T) {
	b := startTestBroker(t)
	shareTestTopic(t, b, "idle")
	tp, _ := b.image().Topic("idle")
	part := b.replicas.Get("idle", 0)
	if part == nil {
		t.Fatal("no replica of idle-0")
	}
	fetch := func(maxWait int32) <-chan *kmsg.FetchResponse { return longPoll(t, b, maxWait, 1, tp) }
	for range 100 {
		if r := <-fetch(1); len(r.Topics[0].Partitions[0].RecordBatches) != 0 {
			t.Fatal("records from an empty partition")
		}
	}
	testutil.WaitFor(t, 5*time.Second, func() bool { return part.Waiting() == 0 },
		"no fetch left waiting on the idle partition")

	woken := fetch(10_000)
	testutil.WaitFor(t, 5*time.Second, func() bool { return part.Waiting() == 1 }, "the long poll waiting")
	if code := produceTo(t, b, "idle"); code != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(code))
	}
	select {
	case r := <-woken:
		if len(r.Topics[0].Partitions[0].RecordBatches) == 0 {
			t.Fatal("the woken fetch returned no record")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the write did not wake the long poll")
	}
	if n := part.Waiting(); n != 0 {
		t.Fatalf("%d channels still registered after the answer", n)
	}
}

// longPoll sends a consumer's Fetch (v13) of partition 0 of each topic from offset 0
// and returns the channel its decoded answer comes on.
func longPoll(t *testing.T, b *Broker, maxWait, minBytes int32, topics ...*metadata.Topic) <-chan *kmsg.FetchResponse {
	return sendFetch(t, b, consumerFetch(maxWait, minBytes, 1<<20, topics...))
}

// consumerFetch is a consumer's Fetch (v13) of partition 0 of each topic from offset
// 0, up to 1 MiB of each.
func consumerFetch(maxWait, minBytes, maxBytes int32, topics ...*metadata.Topic) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(13)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, maxWait, minBytes, maxBytes
	for _, tp := range topics {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = tp.Name, tp.ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, 0, 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// sendFetch hands req to the broker and returns the channel its decoded answer comes
// on.
func sendFetch(t *testing.T, b *Broker, req *kmsg.FetchRequest) <-chan *kmsg.FetchResponse {
	out := make(chan *kmsg.FetchResponse, 1)
	answer := b.Handle(&protocol.Request{Key: req.Key(), Version: req.GetVersion(), Body: req})
	go func() {
		r := <-answer
		if r.Body != nil { // an answer without records: a fetch session's error
			out <- r.Body.(*kmsg.FetchResponse)
			return
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.SetVersion(req.GetVersion())
		err := resp.ReadFrom(flatten(t, r.Chunks))
		if r.Written != nil {
			r.Written()
		}
		if err != nil {
			t.Error(err)
		}
		out <- resp
	}()
	return out
}

// TestLongPollWokenTwiceByOnePartition: a long poll of two partitions that needs two
// writes (MinBytes) gets both from the same partition — the first wake-up spends the
// fetch's registration there, and the fetch registers again before it reads the
// partition again (only the partition that changed is read again) — and leaves
// nothing registered on either partition once answered.
func TestLongPollWokenTwiceByOnePartition(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "wa", 1)
	createTestTopic(t, b, "wb", 1)
	ta, _ := b.image().Topic("wa")
	tb, _ := b.image().Topic("wb")
	pa, pb := b.replicas.Get("wa", 0), b.replicas.Get("wb", 0)
	one, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	answer := longPoll(t, b, 10_000, int32(len(one))+1, ta, tb)
	testutil.WaitFor(t, 5*time.Second, func() bool { return pa.Waiting() == 1 && pb.Waiting() == 1 }, "the long poll waiting on both")
	for i := range 2 {
		if code := produceTo(t, b, "wa"); code != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(code))
		}
		if i == 0 {
			// Woken, one batch short of MinBytes: it registers on wa again.
			testutil.WaitFor(t, 5*time.Second, func() bool { return pa.Changes() > 0 && pa.Waiting() == 1 }, "the long poll waiting on wa again")
			select {
			case <-answer:
				t.Fatal("answered with one batch, below MinBytes")
			default:
			}
		}
	}
	select {
	case r := <-answer:
		if n := len(r.Topics[0].Partitions[0].RecordBatches); n == 0 || r.Topics[0].Partitions[0].HighWatermark != 2 {
			t.Fatalf("wa answered %d bytes of batches, high watermark %d; want both records", n, r.Topics[0].Partitions[0].HighWatermark)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second write to wa did not wake the long poll")
	}
	if na, nb := pa.Waiting(), pb.Waiting(); na != 0 || nb != 0 {
		t.Fatalf("%d and %d channels still registered on wa and wb after the answer", na, nb)
	}
}

// TestFetchMaxBytes: a consumer's fetch is answered with no more than fetch.max.bytes
// whatever MaxBytes it asks for, the first batch whole.
func TestFetchMaxBytes(t *testing.T) {
	b := startTestBroker(t)
	shareTestTopic(t, b, "capped")
	tp, _ := b.image().Topic("capped")
	for range 3 {
		if code := produceTo(t, b, "capped"); code != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(code))
		}
	}
	b.cfg.FetchMaxBytes = 1
	batches := func(r *kmsg.FetchResponse) int {
		raw, err := record.Split(r.Topics[0].Partitions[0].RecordBatches)
		if err != nil {
			t.Fatal(err)
		}
		return len(raw)
	}
	req := consumerFetch(0, 1, 1<<30, tp)
	if n := batches(<-sendFetch(t, b, req)); n != 1 {
		t.Fatalf("a consumer asking for 1 GiB with fetch.max.bytes=1 got %d batches, want the first one only", n)
	}
	b.cfg.FetchMaxBytes = 1 << 20
	if n := batches(<-sendFetch(t, b, req)); n != 3 {
		t.Fatalf("with fetch.max.bytes=1MiB: %d batches, want 3", n)
	}
}
