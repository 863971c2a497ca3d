package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-streaming/samsa/internal/share"
)

// TestShareFetchLogStartMovesBeforeRead: the log start moves (DeleteRecords,
// retention) after a share acquisition moved the share partition's start to the log
// start and before it reads the log. The read falls below the log start; as Kafka
// does on OFFSET_OUT_OF_RANGE (SharePartition.updateCacheAndOffsets), the share
// partition moves to the new log start and the acquisition carries on from there,
// rather than the partition being answered with an error.
func TestShareFetchLogStartMovesBeforeRead(t *testing.T) {
	b := startTestBroker(t)
	k := shareTestTopic(t, b, "moving-start")
	if rp := shareFetchAcking(t, b, k, "m", 0); len(rp.AcquiredRecords) != 0 {
		t.Fatalf("acquired %v from an empty partition", rp.AcquiredRecords)
	}
	for range 6 {
		if code := produceTo(t, b, "moving-start"); code != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(code))
		}
	}
	p := b.replicas.Get("moving-start", 0)
	moved := false
	b.beforeShareRead = func(_ share.Key, from int64) {
		if !moved && from == 0 {
			moved = true
			if _, err := p.Log.DeleteRecordsBefore(3); err != nil {
				t.Error(err)
			}
		}
	}
	rp := shareFetchAcking(t, b, k, "m", 1)
	if rp.ErrorCode != 0 {
		t.Fatalf("ShareFetch answered %v after the log start moved under it", kerr.ErrorForCode(rp.ErrorCode))
	}
	if a := rp.AcquiredRecords; len(a) != 1 || a[0].FirstOffset != 3 || a[0].LastOffset != 5 || a[0].DeliveryCount != 1 {
		t.Fatalf("acquired %v, want offsets 3-5 (delivery 1)", a)
	}
	if !moved {
		t.Fatal("the log start was not moved")
	}
	b.beforeShareRead = nil
	if err := b.shares.Do(t.Context(), k, func(sp *share.Partition) error {
		if sp.Start() != 3 {
			t.Errorf("share partition start %d, want the log start 3", sp.Start())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
