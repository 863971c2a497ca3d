package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/group"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestDeletedTopicShareStateDeleted: deleting a topic deletes the share state a
// share group held on its partitions and drops the topic from the group's topics, as
// Kafka's group coordinator does (onPartitionsDeleted): the state does not linger in
// __share_group_state, where DeleteGroups (which looks at the group's topics in the
// image) would never find it again.
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

	del := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("gone")
	del.Topics = append(del.Topics, dt)
	if code := call[*kmsg.DeleteTopicsResponse](t, b, del).Topics[0].ErrorCode; code != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(code))
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		_, _, ids, _ := b.groups.ShareStateTopics("g")
		if slices.Contains(ids, group.TopicID(old.ID)) {
			return false
		}
		sums, failed := b.shareStore.SummaryEach(ctx, keys)
		return len(failed) == 0 && !sums[keys[0]].found && !sums[keys[1]].found
	}, "the deleted topic's share state deleted and the topic dropped from the group")
	for _, k := range keys {
		snap, found, err := b.shareState.summary(ctx, k, -1)
		if err != nil || (found && snap.Start >= 0) {
			t.Fatalf("%v: stored %+v %v %v", k, snap, found, err)
		}
	}
}
