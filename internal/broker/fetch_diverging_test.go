package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConsumerFetchDivergingEpoch: a consumer's Fetch (v12+) naming the epoch of the
// last batch it fetched is checked against the leader's log as a follower's is
// (KIP-320; Kafka's Partition.readRecords does it for every fetch): when that epoch
// ends here before the fetch offset, the answer carries DivergingEpoch (the epoch and
// where it ends here) and no records; an epoch the log does not know, or a fetch
// offset below the log start, is OFFSET_OUT_OF_RANGE; an epoch that did not diverge
// is served as usual.
func TestConsumerFetchDivergingEpoch(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "div", 1)
	tp, _ := b.image().Topic("div")
	for range 2 { // offsets 0 and 1, in the first epoch
		if code := produceTo(t, b, "div"); code != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(code))
		}
	}
	p := b.namedReplica(b.image(), "div", 0)
	first := p.State()
	next := first
	next.LeaderEpoch, next.PartitionEpoch = first.LeaderEpoch+1, first.PartitionEpoch+1
	if _, err := p.Apply(next, time.Now()); err != nil { // a new leader epoch, led here still
		t.Fatal(err)
	}
	for range 2 { // offsets 2 and 3, in the second epoch
		if code := produceTo(t, b, "div"); code != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(code))
		}
	}
	fetch := func(offset int64, lastFetchedEpoch int32) kmsg.FetchResponseTopicPartition {
		t.Helper()
		req := consumerFetch(0, 0, 1<<20, tp)
		req.Topics[0].Partitions[0].FetchOffset = offset
		req.Topics[0].Partitions[0].LastFetchedEpoch = lastFetchedEpoch
		resp := <-sendFetch(t, b, req)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("fetch: %v, %d topics", kerr.ErrorForCode(resp.ErrorCode), len(resp.Topics))
		}
		return resp.Topics[0].Partitions[0]
	}

	rp := fetch(3, first.LeaderEpoch) // the first epoch ends at 2 here
	if rp.ErrorCode != 0 || rp.DivergingEpoch.Epoch != first.LeaderEpoch || rp.DivergingEpoch.EndOffset != 2 {
		t.Errorf("fetch at 3 after epoch %d: %v, diverging epoch %d end %d; want epoch %d end 2",
			first.LeaderEpoch, kerr.ErrorForCode(rp.ErrorCode), rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset, first.LeaderEpoch)
	}
	if len(rp.RecordBatches) != 0 {
		t.Errorf("a diverging fetch got %d bytes of records, want none", len(rp.RecordBatches))
	}

	rp = fetch(2, first.LeaderEpoch) // not diverged: served
	if rp.ErrorCode != 0 || rp.DivergingEpoch.Epoch != -1 || len(rp.RecordBatches) == 0 {
		t.Errorf("fetch at 2 after epoch %d: %v, diverging epoch %d, %d bytes; want records",
			first.LeaderEpoch, kerr.ErrorForCode(rp.ErrorCode), rp.DivergingEpoch.Epoch, len(rp.RecordBatches))
	}

	rp = fetch(3, next.LeaderEpoch+5) // an epoch this log never had
	if rp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("fetch after an unknown epoch: %v, want OFFSET_OUT_OF_RANGE", kerr.ErrorForCode(rp.ErrorCode))
	}
}
