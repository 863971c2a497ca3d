package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-streaming/samsa/internal/record"
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

// TestShareFetchLogStartMovesBetweenReads: an acquisition reads the log in steps; the
// log start moves past where its second step reads after the first acquired records.
// The acquisition goes on from the log start, and what the first step acquired is
// answered, not dropped behind an error (held by the member, never seen by it,
// until its locks expired).
func TestShareFetchLogStartMovesBetweenReads(t *testing.T) {
	b := startTestBroker(t)
	k := shareTestTopic(t, b, "moving-start-steps")
	if rp := shareFetchAcking(t, b, k, "m", 0); len(rp.AcquiredRecords) != 0 {
		t.Fatalf("acquired %v from an empty partition", rp.AcquiredRecords)
	}
	value := make([]byte, 1000)
	for range 60 {
		batch, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Value: value}})
		if err != nil {
			t.Fatal(err)
		}
		if code := produceBatch(t, b, "moving-start-steps", batch); code != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(code))
		}
	}
	// Records taken as one byte each: the first step reads shareMinRead, about 15 of
	// the 1 KB records.
	b.shareRecordSizes.Store(shareLogKeyOf(k), 1)
	p := b.replicas.Get("moving-start-steps", 0)
	var froms []int64
	b.beforeShareRead = func(_ share.Key, from int64) {
		froms = append(froms, from)
		if len(froms) == 2 {
			if _, err := p.Log.DeleteRecordsBefore(40); err != nil {
				t.Error(err)
			}
		}
	}
	rp := shareFetchAcking(t, b, k, "m", 1)
	b.beforeShareRead = nil
	if len(froms) < 2 || froms[1] >= 40 {
		t.Fatalf("reads from %v: want a second step below 40", froms)
	}
	if rp.ErrorCode != 0 {
		t.Fatalf("ShareFetch answered %v (with %v acquired) after the log start moved between its reads",
			kerr.ErrorForCode(rp.ErrorCode), rp.AcquiredRecords)
	}
	got := acquiredOffsets(rp.AcquiredRecords)
	for o := range froms[1] {
		if _, ok := got[o]; !ok {
			t.Fatalf("offset %d, acquired by the first step, not answered: %v", o, rp.AcquiredRecords)
		}
	}
	for o := froms[1]; o < 40; o++ {
		if _, ok := got[o]; ok {
			t.Fatalf("offset %d, below the log start 40 when read, acquired: %v", o, rp.AcquiredRecords)
		}
	}
	if _, ok := got[40]; !ok {
		t.Fatalf("the acquisition did not go on from the log start 40: %v", rp.AcquiredRecords)
	}
}
