package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/group"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/share"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestDeletedTopicShareStateDeleted: deleting a topic deletes the share state a
// share group held on its partitions and drops the topic from the group's topics, as
// Kafka's group coordinator does (onPartitionsDeleted): the state does not linger in
// __share_group_state, where DeleteGroups (which looks at the group's topics in the
// image) would never find it again. Its share partitions leave memory.
func TestDeletedTopicShareStateDeleted(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "gone", 2)
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = "g"
	rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
	rt.Topic = "gone"
	for p := range int32(2) {
		rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
		rp.Partition, rp.StartOffset = p, 5
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"g"}
	untilDone(t, "FindCoordinator", func() int16 {
		return call[*kmsg.FindCoordinatorResponse](t, b, fc).Coordinators[0].ErrorCode
	})
	untilDone(t, "AlterShareGroupOffsets", func() int16 {
		resp := call[*kmsg.AlterShareGroupOffsetsResponse](t, b, req)
		if resp.ErrorCode != 0 {
			return resp.ErrorCode
		}
		for _, rp := range resp.Topics[0].Partitions {
			if rp.ErrorCode != 0 {
				return rp.ErrorCode
			}
		}
		return 0
	})
	old, _ := b.image().Topic("gone")
	keys := shareKeysOf("g", old)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if sums, failed := b.shareStore.SummaryEach(ctx, keys); len(failed) != 0 || !sums[keys[0]].found || !sums[keys[1]].found {
		t.Fatalf("before the deletion: %v %v", sums, failed)
	}

	if err := b.shares.Do(ctx, keys[0], func(*share.Partition) error { return nil }); err != nil {
		t.Fatalf("load the share partition: %v", err)
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("gone")
	del.Topics = append(del.Topics, dt)
	if code := call[*kmsg.DeleteTopicsResponse](t, b, del).Topics[0].ErrorCode; code != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(code))
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		_, _, ids, _ := b.groups.ShareStateTopics("g")
		if slices.Contains(ids, group.TopicID(old.ID)) || len(b.shares.Loaded("g")) > 0 {
			return false
		}
		sums, failed := b.shareStore.SummaryEach(ctx, keys)
		return len(failed) == 0 && !sums[keys[0]].found && !sums[keys[1]].found
	}, "the deleted topic's share state deleted and the topic dropped from the group and from memory")
	for _, k := range keys {
		snap, found, err := b.shareState.summary(ctx, k, -1)
		if err != nil || (found && snap.Start >= 0) {
			t.Fatalf("%v: stored %+v %v %v", k, snap, found, err)
		}
	}
}

// TestShareFetchHeldWhileTopicDeleted: a share fetch waiting for records when one of
// its session's topics is deleted is answered soon, that topic's partition with
// UNKNOWN_TOPIC_ID (as Kafka completes the delayed share fetches of a deleted
// partition), its share partition leaves memory, and the session goes on serving the
// group's other topic.
func TestShareFetchHeldWhileTopicDeleted(t *testing.T) {
	b := startTestBroker(t)
	ka, kb := shareTestTopic(t, b, "held-gone"), shareTestTopic(t, b, "held-stays")
	req := kmsg.NewPtrShareFetchRequest()
	req.SetVersion(1)
	req.GroupID, req.MemberID = kmsg.StringPtr("g"), kmsg.StringPtr("m")
	req.MaxWaitMillis, req.MaxRecords, req.MaxBytes = 30_000, 100, 1<<20
	for _, k := range []share.Key{ka, kb} {
		rt := kmsg.NewShareFetchRequestTopic()
		rt.TopicID = k.TopicID
		rt.Partitions = append(rt.Partitions, kmsg.NewShareFetchRequestTopicPartition())
		req.Topics = append(req.Topics, rt)
	}
	ch := b.Handle(&protocol.Request{Key: req.Key(), Version: req.GetVersion(), Body: req, ConnID: 1})
	select {
	case r := <-ch:
		t.Fatalf("answered before the deletion: %+v", r.Body)
	case <-time.After(300 * time.Millisecond):
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("held-gone")
	del.Topics = append(del.Topics, dt)
	if code := call[*kmsg.DeleteTopicsResponse](t, b, del).Topics[0].ErrorCode; code != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(code))
	}
	select {
	case r := <-ch:
		resp := r.Body.(*kmsg.ShareFetchResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("ShareFetch: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		codes := map[[16]byte]int16{}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				codes[rt.TopicID] = rp.ErrorCode
			}
		}
		if c := codes[ka.TopicID]; c != kerr.UnknownTopicID.Code && c != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("the deleted topic's partition answered %v, want UNKNOWN_TOPIC_ID", kerr.ErrorForCode(c))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the held share fetch was not answered within 5 s of its topic's deletion")
	}
	// The deleted topic's share partition leaves memory on its leader, whichever node
	// coordinates the group (here none: the group never joined).
	testutil.WaitFor(t, 5*time.Second, func() bool { return !slices.Contains(b.shares.Loaded("g"), ka) },
		"the deleted topic's share partition gone from memory")
	if code := produceTo(t, b, "held-stays"); code != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(code))
	}
	got := shareFetchKeys(t, b, "m", 1, 100, []share.Key{kb}, nil)
	if rp := got[kb]; rp.ErrorCode != 0 || len(rp.AcquiredRecords) == 0 {
		t.Fatalf("the other topic answered %v, %d acquired runs; want its record", kerr.ErrorForCode(rp.ErrorCode), len(rp.AcquiredRecords))
	}
}
