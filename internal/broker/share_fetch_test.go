package broker

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/share"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// shareTestTopic creates a topic of one partition and returns its share partition
// of group g.
func shareTestTopic(t *testing.T, b *Broker, topic string) share.Key {
	t.Helper()
	createTestTopic(t, b, topic, 1)
	tp, _ := b.image().Topic(topic)
	return share.Key{Group: "g", TopicID: tp.ID, Partition: 0}
}

// shareFetch sends a ShareFetch of k's partition for member on connection conn and
// returns the channel its answer comes on.
func shareFetch(b *Broker, conn uint64, k share.Key, member string, epoch, maxWaitMs int32) <-chan protocol.Response {
	return shareFetchUpTo(b, conn, k, member, epoch, maxWaitMs, 100)
}

// shareFetchUpTo is shareFetch asking for maxRecords records.
func shareFetchUpTo(b *Broker, conn uint64, k share.Key, member string, epoch, maxWaitMs, maxRecords int32) <-chan protocol.Response {
	req := kmsg.NewPtrShareFetchRequest()
	req.SetVersion(1)
	req.GroupID, req.MemberID = kmsg.StringPtr(k.Group), kmsg.StringPtr(member)
	req.ShareSessionEpoch, req.MaxWaitMillis, req.MaxRecords, req.MaxBytes = epoch, maxWaitMs, maxRecords, 1<<20
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = k.TopicID
	rt.Partitions = append(rt.Partitions, kmsg.NewShareFetchRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	return b.Handle(&protocol.Request{Key: req.Key(), Version: req.GetVersion(), Body: req, ConnID: conn})
}

// acquired returns the acquired records of a ShareFetch answer (within 5 s).
func acquired(t *testing.T, ch <-chan protocol.Response) []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord {
	t.Helper()
	select {
	case r := <-ch:
		resp := r.Body.(*kmsg.ShareFetchResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("ShareFetch: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		var out []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("ShareFetch partition: %v", kerr.ErrorForCode(rp.ErrorCode))
				}
				out = append(out, rp.AcquiredRecords...)
			}
		}
		return out
	case <-time.After(5 * time.Second):
		t.Fatal("no ShareFetch answer within 5 s")
		return nil
	}
}

// stateOf is an offset's state and delivery count in the share partition.
func stateOf(t *testing.T, b *Broker, k share.Key, offset int64) (state uint8, deliveries int16) {
	t.Helper()
	if err := b.shares.Do(context.Background(), k, func(p *share.Partition) error {
		state, deliveries = p.StateOf(offset)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return state, deliveries
}

// TestShareSessionEndsWithItsConnection: when the connection that opened a share
// session closes, a fetch of the session waiting for records is answered at once and
// acquires nothing after, and what the member acquired in the session is released
// with its delivery count lowered, for another member to get as a first delivery.
func TestShareSessionEndsWithItsConnection(t *testing.T) {
	b := startTestBroker(t)
	k := shareTestTopic(t, b, "close")

	// A fetch waits on connection 1 (the partition is empty); the connection closes.
	waiting := shareFetch(b, 1, k, "m1", 0, 30_000)
	b.ConnClosed(1)
	if recs := acquired(t, waiting); len(recs) != 0 {
		t.Fatalf("the fetch of a closed connection acquired %v", recs)
	}
	if code := produceTo(t, b, "close"); code != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(code))
	}
	if state, _ := stateOf(t, b, k, 0); state != share.Available {
		t.Fatalf("offset 0 is in state %d after the fetch's connection closed, want available", state)
	}

	// m1 acquires it on connection 2, which closes: it is released, count lowered.
	if recs := acquired(t, shareFetch(b, 2, k, "m1", 0, 0)); len(recs) != 1 || recs[0].DeliveryCount != 1 {
		t.Fatalf("m1 acquired %v", recs)
	}
	b.ConnClosed(2)
	testutil.WaitFor(t, 5*time.Second, func() bool {
		state, deliveries := stateOf(t, b, k, 0)
		return state == share.Available && deliveries == 0
	}, "the record m1 held to be released with its delivery count lowered")
	if code := shareFetchEpoch(b, 2, k, "m1", 1); code != kerr.ShareSessionNotFound.Code {
		t.Fatalf("m1's session after its connection closed: %v, want SHARE_SESSION_NOT_FOUND", kerr.ErrorForCode(code))
	}
	if recs := acquired(t, shareFetch(b, 3, k, "m2", 0, 0)); len(recs) != 1 || recs[0].DeliveryCount != 1 {
		t.Fatalf("m2 acquired %v", recs)
	}

	// A member that opened its session again on another connection keeps it when
	// the old connection closes.
	if recs := acquired(t, shareFetch(b, 4, k, "m3", 0, 0)); len(recs) != 0 {
		t.Fatalf("m3 acquired %v", recs)
	}
	if recs := acquired(t, shareFetch(b, 5, k, "m3", 0, 0)); len(recs) != 0 {
		t.Fatalf("m3 acquired %v", recs)
	}
	b.ConnClosed(4)
	if code := shareFetchEpoch(b, 5, k, "m3", 1); code != 0 {
		t.Fatalf("m3's session opened on connection 5 after connection 4 closed: %v", kerr.ErrorForCode(code))
	}
}

// shareFetchEpoch sends a ShareFetch at epoch without waiting and returns its
// top-level error code.
func shareFetchEpoch(b *Broker, conn uint64, k share.Key, member string, epoch int32) int16 {
	r := <-shareFetch(b, conn, k, member, epoch, 0)
	return r.Body.(*kmsg.ShareFetchResponse).ErrorCode
}

// TestShareFetchWaitersDoNotPileUp: fetches that wait for records and time out leave
// nothing registered on the share partition or the topic partition, however many
// there are.
func TestShareFetchWaitersDoNotPileUp(t *testing.T) {
	b := startTestBroker(t)
	k := shareTestTopic(t, b, "idle")
	part, err := b.sharePartition(k)
	if err != nil {
		t.Fatal(err)
	}
	epoch := int32(0)
	for range 200 {
		if recs := acquired(t, shareFetch(b, 1, k, "m", epoch, 2)); len(recs) != 0 {
			t.Fatalf("acquired %v from an empty partition", recs)
		}
		epoch = nextSessionEpoch(epoch)
	}
	testutil.WaitFor(t, 5*time.Second, func() bool {
		return b.shares.Waiting(k) == 0 && part.Waiting() == 0
	}, "no waiter left on the partitions")
}

// TestShareFetchFullWindow: while the window of record locks is full, a fetch of the
// member holding its first record is answered at once (only that member's
// acknowledgement moves the window on, and it comes with its next request); a fetch of
// another member, even one holding records further in, waits, and gets records as soon
// as the first member's acknowledgement makes room.
func TestShareFetchFullWindow(t *testing.T) {
	b := startTestBrokerWith(t, nil, []string{"group.share.partition.max.record.locks=100"}, t.TempDir())
	k := shareTestTopic(t, b, "full-window")
	// The sessions open on the empty partition (share.auto.offset.reset=latest).
	for i, m := range []string{"a", "b"} {
		if recs := acquired(t, shareFetchUpTo(b, uint64(i+1), k, m, 0, 0, 50)); len(recs) != 0 {
			t.Fatalf("%s acquired %v from an empty partition", m, recs)
		}
	}
	for range 3 { // offsets 0-59, 60-119, 120-179
		batch, err := record.Build(record.DefaultBuildOptions(), make([]record.Record, 60))
		if err != nil {
			t.Fatal(err)
		}
		if code := produceBatch(t, b, "full-window", batch); code != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(code))
		}
	}
	// a takes the first batch and b the second: the window [0, 120) is full.
	if recs := acquired(t, shareFetchUpTo(b, 1, k, "a", 1, 0, 50)); len(recs) != 1 || recs[0].FirstOffset != 0 || recs[0].LastOffset != 59 {
		t.Fatalf("a acquired %v, want offsets 0-59", recs)
	}
	if recs := acquired(t, shareFetchUpTo(b, 2, k, "b", 1, 0, 50)); len(recs) != 1 || recs[0].FirstOffset != 60 || recs[0].LastOffset != 119 {
		t.Fatalf("b acquired %v, want offsets 60-119", recs)
	}
	if recs := acquired(t, shareFetchUpTo(b, 1, k, "a", 2, 30_000, 50)); len(recs) != 0 {
		t.Fatalf("a acquired %v from a full window", recs)
	}
	waiting := shareFetchUpTo(b, 2, k, "b", 2, 30_000, 50)
	testutil.WaitFor(t, 5*time.Second, func() bool { return b.shares.Waiting(k) == 1 }, "b's fetch waiting for room")
	select {
	case r := <-waiting:
		t.Fatalf("b's fetch answered %+v while the window is full and a holds its first record; want it to wait", r.Body)
	default:
	}
	if top, part := shareAcknowledge(t, b, 1, k, "a", 3, 0, 59, share.AckAccept); top != 0 || part != 0 {
		t.Fatalf("a's acknowledgement: %v, %v", kerr.ErrorForCode(top), kerr.ErrorForCode(part))
	}
	if recs := acquired(t, waiting); len(recs) != 1 || recs[0].FirstOffset != 120 || recs[0].LastOffset != 179 {
		t.Fatalf("b's waiting fetch acquired %v once a accepted offsets 0-59, want offsets 120-179", recs)
	}
}

// TestShareFetchAnswerBuffersGoBack: a ShareFetch answer holds the pooled buffer
// its records were read into until the server has written it (Response.Written),
// whether it was answered at once or after waiting, and a fetch that acquires
// nothing holds none: every buffer goes back to the pool.
func TestShareFetchAnswerBuffersGoBack(t *testing.T) {
	b := startTestBroker(t)
	k := shareTestTopic(t, b, "bufs")
	batch, err := record.Build(record.DefaultBuildOptions(), make([]record.Record, 40))
	if err != nil {
		t.Fatal(err)
	}
	// The sessions open on the empty partition (share.auto.offset.reset=latest).
	for i, m := range []string{"m1", "m2", "m3"} {
		if recs := acquired(t, shareFetch(b, uint64(i+1), k, m, 0, 0)); len(recs) != 0 {
			t.Fatalf("%s acquired %v from an empty partition", m, recs)
		}
	}
	// answer takes a ShareFetch answer as the server does: it reads what it
	// acquired, then gives the answer back once written.
	answer := func(ch <-chan protocol.Response) int {
		t.Helper()
		var r protocol.Response
		select {
		case r = <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("no ShareFetch answer within 5 s")
		}
		n := 0
		for _, rt := range r.Body.(*kmsg.ShareFetchResponse).Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("ShareFetch partition: %v", kerr.ErrorForCode(rp.ErrorCode))
				}
				for _, a := range rp.AcquiredRecords {
					n += int(a.LastOffset - a.FirstOffset + 1)
				}
			}
		}
		if held := b.shareReads.InUse(); (n > 0) != (held > 0) {
			t.Fatalf("an answer of %d records holds %d bytes of pooled buffers", n, held)
		}
		if r.Written != nil {
			r.Written()
		}
		if held := b.shareReads.InUse(); held != 0 {
			t.Fatalf("%d bytes of pooled buffers still held after the answer was written", held)
		}
		return n
	}
	for range 3 {
		if code := produceBatch(t, b, "bufs", batch); code != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(code))
		}
	}
	if n := answer(shareFetch(b, 1, k, "m1", 1, 0)); n != 120 {
		t.Fatalf("m1 acquired %d records, want the 120 produced (whole batches past 100)", n)
	}
	if n := answer(shareFetch(b, 2, k, "m2", 1, 0)); n != 0 {
		t.Fatalf("m2 acquired %d records, all of them held by m1", n)
	}
	waiting := shareFetch(b, 3, k, "m3", 1, 30_000)
	testutil.WaitFor(t, 5*time.Second, func() bool { return b.shares.Waiting(k) == 1 }, "m3's fetch to wait")
	if code := produceBatch(t, b, "bufs", batch); code != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(code))
	}
	if n := answer(waiting); n != 40 {
		t.Fatalf("m3's waiting fetch acquired %d records, want the 40 produced", n)
	}
}

// TestShareStateDeleteFencesHolder: a leader that still holds a share partition in
// memory when its state is deleted on the share coordinator (DeleteShareGroupState
// from another broker: DeleteShareGroupOffsets, DeleteGroups) does not write the
// deleted state back; its write is fenced, and it reads the state again, finding
// none.
func TestShareStateDeleteFencesHolder(t *testing.T) {
	b := startTestBroker(t)
	k := shareTestTopic(t, b, "deleted")
	ctx := context.Background()
	if recs := acquired(t, shareFetch(b, 1, k, "m", 0, 0)); len(recs) != 0 {
		t.Fatalf("acquired %v from an empty partition", recs)
	}
	for range 3 {
		if code := produceTo(t, b, "deleted"); code != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(code))
		}
	}
	if recs := acquired(t, shareFetch(b, 1, k, "m", 1, 0)); len(recs) != 1 || recs[0].FirstOffset != 0 || recs[0].LastOffset != 2 {
		t.Fatalf("acquired %v, want offsets 0-2", recs)
	}
	accept := func(offset int64) error {
		return b.shares.Do(ctx, k, func(p *share.Partition) error {
			return p.Acknowledge("m", offset, offset, []int8{share.AckAccept}, b.clock.Now(), nil)
		})
	}
	if err := accept(0); err != nil {
		t.Fatal(err)
	}
	if sum, err := b.shareStore.Summary(ctx, k); err != nil || !sum.found || sum.start != 1 {
		t.Fatalf("stored state %+v (%v), want start 1", sum, err)
	}

	// The coordinator deletes the state; this broker's share manager is not told.
	if err := b.shareState.deleteState(ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := accept(1); !errors.Is(err, share.ErrFencedStateEpoch) {
		t.Fatalf("the holder's write after the delete: %v, want it fenced", err)
	}
	if sum, err := b.shareStore.Summary(ctx, k); err != nil || sum.found {
		t.Fatalf("stored state after the holder's write %+v (%v), want none", sum, err)
	}
	// Read again: the partition starts afresh (share.auto.offset.reset=latest).
	var start int64
	if err := b.shares.Do(ctx, k, func(p *share.Partition) error { start = p.Start(); return nil }); err != nil {
		t.Fatal(err)
	}
	if sum, err := b.shareStore.Summary(ctx, k); err != nil || start != 3 || !sum.found || sum.start != 3 {
		t.Fatalf("after reading again: start %d, stored %+v (%v), want 3", start, sum, err)
	}
}

// shareFetchAcking is shareFetch (no wait) with acknowledgement batches of k's
// partition; it returns the answer's partition (empty when the answer has none).
func shareFetchAcking(t *testing.T, b *Broker, k share.Key, member string, epoch int32,
	acks ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) kmsg.ShareFetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.SetVersion(1)
	req.GroupID, req.MemberID = kmsg.StringPtr(k.Group), kmsg.StringPtr(member)
	req.ShareSessionEpoch, req.MaxRecords, req.MaxBytes = epoch, 100, 1<<20
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = k.TopicID
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rp.AcknowledgementBatches = acks
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := call[*kmsg.ShareFetchResponse](t, b, req)
	switch {
	case resp.ErrorCode == 0 && len(resp.Topics) == 0: // nothing acquired or acknowledged
		return kmsg.NewShareFetchResponseTopicPartition()
	case resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1:
		t.Fatalf("ShareFetch answered %+v", resp)
	}
	return resp.Topics[0].Partitions[0]
}

func ackBatch(first, last int64, t int8) kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch {
	return kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: first, LastOffset: last, AcknowledgeTypes: []int8{t}}
}

// TestShareFetchAcknowledgesWithAcquisition: the acknowledgements a ShareFetch
// carries for the partition it fetches are applied before its acquisition (a
// released record is delivered again at once) and written with it; a refused one is
// answered in AcknowledgeErrorCode and does not stop the acquisition.
func TestShareFetchAcknowledgesWithAcquisition(t *testing.T) {
	b := startTestBroker(t)
	k := shareTestTopic(t, b, "acking")
	if rp := shareFetchAcking(t, b, k, "m", 0); len(rp.AcquiredRecords) != 0 {
		t.Fatalf("acquired %v from an empty partition", rp.AcquiredRecords)
	}
	for range 3 {
		if code := produceTo(t, b, "acking"); code != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(code))
		}
	}
	rp := shareFetchAcking(t, b, k, "m", 1)
	if len(rp.AcquiredRecords) != 1 || rp.AcquiredRecords[0].FirstOffset != 0 || rp.AcquiredRecords[0].LastOffset != 2 {
		t.Fatalf("acquired %v, want offsets 0-2", rp.AcquiredRecords)
	}
	rp = shareFetchAcking(t, b, k, "m", 2, ackBatch(0, 1, share.AckAccept), ackBatch(2, 2, share.AckRelease))
	if rp.AcknowledgeErrorCode != 0 || rp.ErrorCode != 0 {
		t.Fatalf("acknowledging: %v, partition %v", kerr.ErrorForCode(rp.AcknowledgeErrorCode), kerr.ErrorForCode(rp.ErrorCode))
	}
	if a := rp.AcquiredRecords; len(a) != 1 || a[0].FirstOffset != 2 || a[0].LastOffset != 2 || a[0].DeliveryCount != 2 {
		t.Fatalf("acquired %v after releasing offset 2, want it again (delivery 2)", rp.AcquiredRecords)
	}
	if sum, err := b.shareStore.Summary(context.Background(), k); err != nil || !sum.found || sum.start != 2 {
		t.Fatalf("stored state %+v (%v), want start 2", sum, err)
	}
	if code := produceTo(t, b, "acking"); code != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(code))
	}
	// Offset 0 is done: acknowledging it again is refused; offset 3 is acquired.
	rp = shareFetchAcking(t, b, k, "m", 3, ackBatch(0, 0, share.AckAccept))
	if rp.AcknowledgeErrorCode != kerr.InvalidRecordState.Code || rp.ErrorCode != 0 {
		t.Fatalf("acknowledging a done offset: %v, partition %v; want INVALID_RECORD_STATE",
			kerr.ErrorForCode(rp.AcknowledgeErrorCode), kerr.ErrorForCode(rp.ErrorCode))
	}
	if len(rp.AcquiredRecords) != 1 || rp.AcquiredRecords[0].FirstOffset != 3 || rp.AcquiredRecords[0].LastOffset != 3 {
		t.Fatalf("acquired %v, want offset 3", rp.AcquiredRecords)
	}
}

// shareFetchKeys sends a ShareFetch of keys for member, acquiring up to maxRecords,
// with acks for some of them, and returns each partition's answer.
func shareFetchKeys(t *testing.T, b *Broker, member string, epoch, maxRecords int32, keys []share.Key,
	acks map[share.Key][]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) map[share.Key]kmsg.ShareFetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.SetVersion(1)
	req.GroupID, req.MemberID = kmsg.StringPtr(keys[0].Group), kmsg.StringPtr(member)
	req.ShareSessionEpoch, req.MaxRecords, req.MaxBytes = epoch, maxRecords, 1<<20
	for _, k := range keys {
		rt := kmsg.NewShareFetchRequestTopic()
		rt.TopicID = k.TopicID
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rp.Partition, rp.AcknowledgementBatches = k.Partition, acks[k]
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	resp := call[*kmsg.ShareFetchResponse](t, b, req)
	if resp.ErrorCode != 0 {
		t.Fatalf("ShareFetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	out := map[share.Key]kmsg.ShareFetchResponseTopicPartition{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			out[share.Key{Group: keys[0].Group, TopicID: rt.TopicID, Partition: rp.Partition}] = rp
		}
	}
	return out
}

// TestShareFetchRotatesPartitions: a fetch reads its session's partitions from
// position epoch mod their number, so a partition with more records than a fetch
// takes does not keep the others waiting, and the acknowledgements of a partition
// not read first are applied before it is read.
func TestShareFetchRotatesPartitions(t *testing.T) {
	b := startTestBroker(t)
	ka, kb := shareTestTopic(t, b, "rotate-a"), shareTestTopic(t, b, "rotate-b")
	keys := []share.Key{ka, kb}
	// The session opens on empty partitions (share.auto.offset.reset=latest).
	if got := shareFetchKeys(t, b, "m", 0, 5, keys, nil); len(got) != 0 {
		t.Fatalf("epoch 0 answered %v from empty partitions", got)
	}
	for range 30 {
		if code := produceTo(t, b, "rotate-a"); code != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(code))
		}
	}
	for range 3 {
		if code := produceTo(t, b, "rotate-b"); code != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(code))
		}
	}
	// Epoch 1 starts at rotate-b: its 3 records, then 2 of rotate-a.
	got := shareFetchKeys(t, b, "m", 1, 5, keys, nil)
	if a := got[kb].AcquiredRecords; len(a) != 1 || a[0].FirstOffset != 0 || a[0].LastOffset != 2 {
		t.Fatalf("epoch 1 acquired %v of rotate-b, want offsets 0-2", a)
	}
	if a := got[ka].AcquiredRecords; len(a) != 1 || a[0].FirstOffset != 0 || a[0].LastOffset != 1 {
		t.Fatalf("epoch 1 acquired %v of rotate-a, want offsets 0-1", a)
	}
	// Epoch 2 starts at rotate-a, with its acknowledgement; rotate-b's is applied
	// beside it.
	got = shareFetchKeys(t, b, "m", 2, 5, keys, map[share.Key][]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{
		ka: {ackBatch(0, 1, share.AckAccept)},
		kb: {ackBatch(0, 2, share.AckAccept)},
	})
	if a := got[ka].AcquiredRecords; len(a) != 1 || a[0].FirstOffset != 2 || a[0].LastOffset != 6 || len(got[kb].AcquiredRecords) != 0 {
		t.Fatalf("epoch 2 acquired %v of rotate-a and %v of rotate-b, want offsets 2-6 of rotate-a only", a, got[kb].AcquiredRecords)
	}
	for k, last := range map[share.Key]int64{ka: 1, kb: 2} {
		if code := got[k].AcknowledgeErrorCode; code != 0 {
			t.Fatalf("acknowledging partition of %x: %v", k.TopicID, kerr.ErrorForCode(code))
		}
		for off := range last + 1 {
			if state, _ := stateOf(t, b, k, off); state != share.Acknowledged {
				t.Fatalf("offset %d of %x in state %d after its ACCEPT, want acknowledged", off, k.TopicID, state)
			}
		}
	}
}

// TestShareSessionPartitions: a session's partitions keep the order they were added
// in, a partition named twice is held once, forgetting removes it, lists handed out
// earlier are not changed by later requests, and each fetch reads them from one
// position further on.
func TestShareSessionPartitions(t *testing.T) {
	var s shareSessions
	key := func(p int32) share.Key { return share.Key{Group: "g", Partition: p} }
	keys := func(ps ...int32) []share.Key {
		var out []share.Key
		for _, p := range ps {
			out = append(out, key(p))
		}
		return out
	}
	_, first, _, code := s.use("g", "m", 0, 0, keys(3, 1, 3, 2), nil, true)
	if code != 0 || !slices.Equal(first, keys(3, 1, 2)) {
		t.Fatalf("opened with %v (code %d), want [3 1 2]", first, code)
	}
	// Acknowledgements (fetch false) get the partitions in the session's order.
	_, next, _, code := s.use("g", "m", 0, 1, keys(4, 1), keys(1, 9), false)
	if code != 0 || !slices.Equal(next, keys(3, 2, 4)) {
		t.Fatalf("after adding 4 and 1 and forgetting 1 and 9: %v (code %d), want [3 2 4]", next, code)
	}
	if !slices.Equal(first, keys(3, 1, 2)) {
		t.Fatalf("the first list changed to %v", first)
	}
	many := make([]share.Key, 100_000)
	for i := range many {
		many[i] = key(int32(i))
	}
	_, all, _, _ := s.use("g", "m", 0, 2, many, nil, false)
	if len(all) != 100_000 || all[0] != key(3) || all[2] != key(4) || all[3] != key(0) {
		t.Fatalf("after adding 100,000 partitions: %d, starting %v", len(all), all[:4])
	}
	// The session's second fetch starts one position on, the third two.
	s.use("g", "m", 0, 3, nil, many[5:], false)
	for i, want := range [][]share.Key{keys(2, 4, 0, 1, 3), keys(4, 0, 1, 3, 2)} {
		epoch := int32(4 + i)
		_, got, _, code := s.use("g", "m", 0, epoch, nil, nil, true)
		if code != 0 || !slices.Equal(got, want) {
			partitions := func(ks []share.Key) (ps []int32) {
				for _, k := range ks {
					ps = append(ps, k.Partition)
				}
				return ps
			}
			t.Fatalf("fetch at epoch %d read partitions %v (code %d), want %v", epoch, partitions(got), code, partitions(want))
		}
	}
}

// TestShareSessionLimit: past group.share.max.share.sessions a new session is refused
// with SHARE_SESSION_LIMIT_REACHED; a member opening its session again, or one after
// another ended, is not.
func TestShareSessionLimit(t *testing.T) {
	s := shareSessions{max: 2}
	open := func(member string, epoch int32) int16 {
		_, _, _, code := s.use("g", member, 0, epoch, nil, nil, true)
		return code
	}
	if open("a", 0) != 0 || open("b", 0) != 0 {
		t.Fatal("two sessions within the limit refused")
	}
	if code := open("c", 0); code != kerr.ShareSessionLimitReached.Code {
		t.Fatalf("a third session: %v, want SHARE_SESSION_LIMIT_REACHED", kerr.ErrorForCode(code))
	}
	if code := open("a", 0); code != 0 {
		t.Fatalf("a opening its session again: %v", kerr.ErrorForCode(code))
	}
	if code := open("b", -1); code != 0 {
		t.Fatalf("b closing: %v", kerr.ErrorForCode(code))
	}
	if code := open("c", 0); code != 0 {
		t.Fatalf("c after b closed: %v", kerr.ErrorForCode(code))
	}
}

// acquiredOffsets lists the offsets of acquired runs, with their delivery counts.
func acquiredOffsets(recs []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord) map[int64]int16 {
	out := map[int64]int16{}
	for _, r := range recs {
		for o := r.FirstOffset; o <= r.LastOffset; o++ {
			out[o] = r.DeliveryCount
		}
	}
	return out
}

// shareAcknowledge sends a ShareAcknowledge of k's partition for member on connection
// conn at epoch, one batch [first, last] of type ackType, and returns the top-level
// and the partition's error codes.
func shareAcknowledge(t *testing.T, b *Broker, conn uint64, k share.Key, member string, epoch int32, first, last int64, ackType int8) (top, part int16) {
	t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.SetVersion(1)
	req.GroupID, req.MemberID = kmsg.StringPtr(k.Group), kmsg.StringPtr(member)
	req.ShareSessionEpoch = epoch
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = k.TopicID
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{
		FirstOffset: first, LastOffset: last, AcknowledgeTypes: []int8{ackType},
	})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	select {
	case r := <-b.Handle(&protocol.Request{Key: req.Key(), Version: req.GetVersion(), Body: req, ConnID: conn}):
		resp := r.Body.(*kmsg.ShareAcknowledgeResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) == 0 {
			return resp.ErrorCode, 0
		}
		return 0, resp.Topics[0].Partitions[0].ErrorCode
	case <-time.After(5 * time.Second):
		t.Fatal("no ShareAcknowledge answer within 5 s")
		return 0, 0
	}
}

// TestShareGroupLeavesMemoryWithItsLastSession: a group's share partitions stay in
// memory while one of its members has a share session on the broker, and leave it
// when the last one ends (here its connection closes), as in Kafka; the next member's
// fetch reads the state again: the accepted records are not delivered again, a
// released one is, and those acquired but not acknowledged are, as first deliveries
// (the release on the session's close lowered their count).
func TestShareGroupLeavesMemoryWithItsLastSession(t *testing.T) {
	b := startTestBroker(t)
	k := shareTestTopic(t, b, "idle-group")
	// m1 and m2 open sessions on two connections (the share partition starts at the
	// end: share.auto.offset.reset=latest); m1 acquires the five records produced.
	for i, member := range []string{"m1", "m2"} {
		if recs := acquired(t, shareFetch(b, uint64(i+1), k, member, 0, 0)); len(recs) != 0 {
			t.Fatalf("%s acquired %v from an empty partition", member, recs)
		}
	}
	for range 5 {
		if code := produceTo(t, b, "idle-group"); code != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(code))
		}
	}
	got := acquiredOffsets(acquired(t, shareFetch(b, 1, k, "m1", 1, 0)))
	if len(got) != 5 {
		t.Fatalf("m1 acquired %v, want offsets 0-4", got)
	}
	// m1 accepts 0-1 and closes its session, holding 2-4: m2's session keeps the
	// partition in memory.
	if top, part := shareAcknowledge(t, b, 1, k, "m1", 2, 0, 1, share.AckAccept); top != 0 || part != 0 {
		t.Fatalf("m1 accepting 0-1: %v, partition %v", kerr.ErrorForCode(top), kerr.ErrorForCode(part))
	}
	if top, _ := shareAcknowledge(t, b, 1, k, "m1", -1, 2, 2, share.AckRelease); top != 0 {
		t.Fatalf("m1 closing its session: %v", kerr.ErrorForCode(top))
	}
	if loaded := b.shares.Loaded(k.Group); len(loaded) != 1 {
		t.Fatalf("share partitions in memory while m2 has a session: %v, want [%v]", loaded, k)
	}
	// m2's connection closes: the group has no session here any more.
	b.ConnClosed(2)
	testutil.WaitFor(t, 5*time.Second, func() bool { return len(b.shares.Loaded(k.Group)) == 0 },
		"the group's share partitions to leave memory after its last session ended")
	if sum, err := b.shareStore.Summary(context.Background(), k); err != nil || !sum.found || sum.start != 2 {
		t.Fatalf("stored state %+v (%v), want start 2", sum, err)
	}

	// m3 gets exactly 2-4: 2, which m1 released, as a second delivery; 3-4, which m1
	// still held when its session closed, as first deliveries.
	got = acquiredOffsets(acquired(t, shareFetch(b, 3, k, "m3", 0, 0)))
	if len(got) != 3 || got[2] != 2 || got[3] != 1 || got[4] != 1 {
		t.Fatalf("m3 acquired %v (offset: delivery count), want 2 delivered twice, 3-4 once", got)
	}
	if loaded := b.shares.Loaded(k.Group); len(loaded) != 1 {
		t.Fatalf("share partitions in memory after m3's fetch: %v, want [%v]", loaded, k)
	}
}

// TestShareSessionsIdle: a group is idle on the broker once each of its sessions ended
// and what its member held was released; a member opening its session again counts
// once, and the connection of its replaced session ends nothing when it closes.
func TestShareSessionsIdle(t *testing.T) {
	var s shareSessions
	open := func(member string, conn uint64) {
		t.Helper()
		if _, _, _, code := s.use("g", member, conn, 0, nil, nil, true); code != 0 {
			t.Fatalf("opening %s's session: %v", member, kerr.ErrorForCode(code))
		}
	}
	open("a", 1)
	open("a", 2) // replaces a's session of connection 1
	open("b", 3)
	if ended := s.closeConn(1); len(ended) != 0 {
		t.Fatalf("closing the connection of a's replaced session ended %d sessions", len(ended))
	}
	if _, _, closing, code := s.use("g", "a", 2, -1, nil, nil, true); !closing || code != 0 {
		t.Fatalf("closing a's session: closing %v, %v", closing, kerr.ErrorForCode(code))
	}
	s.released("g")
	if s.idle("g") {
		t.Fatal("g idle while b has a session")
	}
	if ended := s.closeConn(3); len(ended) != 1 {
		t.Fatalf("closing b's connection ended %d sessions, want 1", len(ended))
	}
	if s.idle("g") {
		t.Fatal("g idle before what b held was released")
	}
	s.released("g")
	if !s.idle("g") || !s.idle("other") {
		t.Fatalf("idle: g %v, a group never seen %v; want both", s.idle("g"), s.idle("other"))
	}
}
