package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
