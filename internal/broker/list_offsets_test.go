package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestListOffsetsDuplicatePartition: a partition named twice in one request is
// answered INVALID_REQUEST each time, as Kafka does; the others are answered.
func TestListOffsetsDuplicatePartition(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "dup", 2)
	req := kmsg.NewPtrListOffsetsRequest()
	for _, partitions := range [][]int32{{0, 1}, {0}} { // partition 0 again in a second topic entry
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "dup"
		for _, p := range partitions {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = p, listLatest
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp := call[*kmsg.ListOffsetsResponse](t, b, req)
	want := [][]int16{{kerr.InvalidRequest.Code, 0}, {kerr.InvalidRequest.Code}}
	if len(resp.Topics) != len(want) {
		t.Fatalf("%d topics answered, want %d", len(resp.Topics), len(want))
	}
	for i, rt := range resp.Topics {
		if len(rt.Partitions) != len(want[i]) {
			t.Fatalf("topic entry %d: %d partitions answered, want %d", i, len(rt.Partitions), len(want[i]))
		}
		for j, rp := range rt.Partitions {
			if rp.ErrorCode != want[i][j] {
				t.Errorf("topic entry %d, partition %d: %v, want %v", i, rp.Partition, kerr.ErrorForCode(rp.ErrorCode), kerr.ErrorForCode(want[i][j]))
			}
		}
	}
}
