package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
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
	fetch := func(maxWait int32) <-chan *kmsg.FetchResponse {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(13)
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, maxWait, 1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "idle", tp.ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, 0, 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		out := make(chan *kmsg.FetchResponse, 1)
		answer := b.Handle(&protocol.Request{Key: req.Key(), Version: req.GetVersion(), Body: req})
		go func() {
			r := <-answer
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
