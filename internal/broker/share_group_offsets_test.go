package broker

import (
	"fmt"
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/group"
	"github.com/samsa-streaming/samsa/internal/share"
)

// TestAlterShareGroupOffsetsUncheckedStarts: AlterShareGroupOffsets takes start
// offsets as Kafka does, unchecked: -1 (and here any negative start) leaves the start
// unknown, an offset past the log end is kept, and a partition named twice is answered
// at each mention and keeps the last offset (partition 0: 5, then -7).
func TestAlterShareGroupOffsetsUncheckedStarts(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "starts", 3)
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = "g"
	for _, parts := range [][][2]int64{{{0, 5}, {1, 1 << 40}, {2, -1}}, {{0, -7}}} {
		rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		rt.Topic = "starts"
		for _, p := range parts {
			rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
			rp.Partition, rp.StartOffset = int32(p[0]), p[1]
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"g"}
	untilDone(t, "FindCoordinator", func() int16 {
		return call[*kmsg.FindCoordinatorResponse](t, b, fc).Coordinators[0].ErrorCode
	})
	var resp *kmsg.AlterShareGroupOffsetsResponse
	untilDone(t, "AlterShareGroupOffsets", func() int16 {
		resp = call[*kmsg.AlterShareGroupOffsetsResponse](t, b, req)
		return resp.ErrorCode
	})
	answered := 0
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			answered++
			if rp.ErrorCode != 0 {
				t.Errorf("partition %d: %v", rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
			}
		}
	}
	if answered != 4 {
		t.Fatalf("%d partitions answered, want 4", answered)
	}

	dreq := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	dg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	dg.GroupID = "g"
	dt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
	dt.Topic, dt.Partitions = "starts", []int32{0, 1, 2}
	dg.Topics = append(dg.Topics, dt)
	dreq.Groups = append(dreq.Groups, dg)
	dresp := call[*kmsg.DescribeShareGroupOffsetsResponse](t, b, dreq)
	want := map[int32]int64{0: -1, 1: 1 << 40, 2: -1}
	for _, g := range dresp.Groups {
		for _, rt := range g.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 || rp.StartOffset != want[rp.Partition] {
					t.Errorf("partition %d: start %d (%v), want %d", rp.Partition, rp.StartOffset, kerr.ErrorForCode(rp.ErrorCode), want[rp.Partition])
				}
				delete(want, rp.Partition)
			}
		}
	}
	if len(want) != 0 {
		t.Errorf("partitions %v not described", want)
	}
}

// alterShareStarts sends AlterShareGroupOffsets for group: starts by partition of
// topic; every partition must be answered without error.
func alterShareStarts(t *testing.T, b *Broker, group, topic string, starts map[int32]int64) {
	t.Helper()
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = group
	rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
	rt.Topic = topic
	for p, off := range starts {
		rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
		rp.Partition, rp.StartOffset = p, off
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	var resp *kmsg.AlterShareGroupOffsetsResponse
	untilDone(t, "AlterShareGroupOffsets", func() int16 {
		resp = call[*kmsg.AlterShareGroupOffsetsResponse](t, b, req)
		return resp.ErrorCode
	})
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("AlterShareGroupOffsets %s/%d: %v", rt.Topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
			}
		}
	}
}

// describeShareStarts sends DescribeShareGroupOffsets for group, of every topic when
// topics is nil, and returns the start offsets answered as "topic/partition" → start.
func describeShareStarts(t *testing.T, b *Broker, group string, topics map[string][]int32) map[string]int64 {
	t.Helper()
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = group
	for name, ps := range topics {
		rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
		rt.Topic, rt.Partitions = name, ps
		rg.Topics = append(rg.Topics, rt)
	}
	req.Groups = append(req.Groups, rg)
	resp := call[*kmsg.DescribeShareGroupOffsetsResponse](t, b, req)
	out := map[string]int64{}
	for _, g := range resp.Groups {
		if g.ErrorCode != 0 {
			t.Fatalf("DescribeShareGroupOffsets %s: %v", group, kerr.ErrorForCode(g.ErrorCode))
		}
		for _, rt := range g.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("DescribeShareGroupOffsets %s/%d: %v", rt.Topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
				}
				out[fmt.Sprintf("%s/%d", rt.Topic, rp.Partition)] = rp.StartOffset
			}
		}
	}
	return out
}

// TestDescribeShareGroupOffsetsOfItsTopics: DescribeShareGroupOffsets of every topic
// (as `samsa group describe` and kadm send it) answers for the partitions with state of
// the topics the group may hold state on — here the ones AlterShareGroupOffsets named —
// and looks up those topics' partitions only, not every partition of the cluster.
// DeleteShareGroupOffsets and DeleteGroups drop the state on them.
func TestDescribeShareGroupOffsetsOfItsTopics(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "altered", 3)
	createTestTopic(t, b, "other", 40)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"g", "h"}
	untilDone(t, "FindCoordinator", func() int16 {
		resp := call[*kmsg.FindCoordinatorResponse](t, b, fc)
		return max(resp.Coordinators[0].ErrorCode, resp.Coordinators[1].ErrorCode)
	})
	alterShareStarts(t, b, "g", "altered", map[int32]int64{2: 7})
	alterShareStarts(t, b, "h", "other", map[int32]int64{0: 1})

	if got := describeShareStarts(t, b, "g", nil); !maps.Equal(got, map[string]int64{"altered/2": 7}) {
		t.Errorf("g, every topic: %v, want altered/2 at 7", got)
	}
	_, _, ids, all := b.groups.ShareStateTopics("g")
	if keys := shareStateKeys(b.image(), "g", ids, all); len(keys) != 3 {
		t.Errorf("g's share partitions looked up: %d (%v), want altered's 3", len(keys), keys)
	}

	// DeleteShareGroupOffsets: the state goes and so does the topic.
	dreq := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	dreq.GroupID = "g"
	dt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
	dt.Topic = "altered"
	dreq.Topics = append(dreq.Topics, dt)
	if resp := call[*kmsg.DeleteShareGroupOffsetsResponse](t, b, dreq); resp.ErrorCode != 0 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("DeleteShareGroupOffsets: %v, topic %v", kerr.ErrorForCode(resp.ErrorCode), kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	}
	if got := describeShareStarts(t, b, "g", nil); len(got) != 0 {
		t.Errorf("g after its offsets were deleted: %v, want none", got)
	}
	if _, _, ids, all := b.groups.ShareStateTopics("g"); len(ids) != 0 || all {
		t.Errorf("g's topics after its offsets were deleted: %v (all %v), want none", ids, all)
	}

	// DeleteGroups: h's state on other goes with it; a group of that name made again
	// starts without it.
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Groups = []string{"h"}
	if resp := call[*kmsg.DeleteGroupsResponse](t, b, dg); resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("DeleteGroups h: %v", kerr.ErrorForCode(resp.Groups[0].ErrorCode))
	}
	alterShareStarts(t, b, "h", "altered", map[int32]int64{0: 3})
	want := map[string]int64{"other/0": -1}
	if got := describeShareStarts(t, b, "h", map[string][]int32{"other": {0}}); !maps.Equal(got, want) {
		t.Errorf("h made again, other/0: %v, want %v (no state)", got, want)
	}
	if got := describeShareStarts(t, b, "h", nil); !maps.Equal(got, map[string]int64{"altered/0": 3}) {
		t.Errorf("h made again, every topic: %v, want altered/0 at 3", got)
	}
}

// TestNewShareStateNotWrittenForADeletedGroup: the background initialization of a
// share group's new partitions runs under the group's admin lock and writes nothing
// for a group deleted meanwhile (its state would be left for a new group of that name).
func TestNewShareStateNotWrittenForADeletedGroup(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "init", 3)
	alter := func(g string) {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKeys = []string{g}
		untilDone(t, "FindCoordinator "+g, func() int16 {
			return call[*kmsg.FindCoordinatorResponse](t, b, fc).Coordinators[0].ErrorCode
		})
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = g
		rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		rt.Topic = "init"
		rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
		rp.StartOffset = 5
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		untilDone(t, "AlterShareGroupOffsets "+g, func() int16 {
			r := call[*kmsg.AlterShareGroupOffsetsResponse](t, b, req)
			if r.ErrorCode != 0 {
				return r.ErrorCode
			}
			return r.Topics[0].Partitions[0].ErrorCode
		})
	}
	alter("deleted")
	alter("kept")
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"deleted"}
	untilDone(t, "DeleteGroups", func() int16 { return call[*kmsg.DeleteGroupsResponse](t, b, del).Groups[0].ErrorCode })

	info, _ := b.image().Topic("init")
	ctx := t.Context()
	if err := b.initNewShareState(ctx, "deleted", group.TopicID(info.ID), 1, 3); err == nil {
		t.Fatal("initializing the new partitions of a deleted group succeeded")
	}
	if err := b.initNewShareState(ctx, "kept", group.TopicID(info.ID), 1, 3); err != nil {
		t.Fatalf("initializing the new partitions of a live group: %v", err)
	}
	for _, g := range []string{"deleted", "kept"} {
		var keys []share.Key
		for p := int32(1); p < 3; p++ {
			keys = append(keys, share.Key{Group: g, TopicID: info.ID, Partition: p})
		}
		sums, failed := b.shareStore.SummaryEach(ctx, keys)
		if len(failed) > 0 {
			t.Fatalf("%s: reading the state: %v", g, failed)
		}
		for k, sum := range sums {
			if sum.found != (g == "kept") {
				t.Errorf("%s partition %d: state found %v", g, k.Partition, sum.found)
			}
		}
	}
}
