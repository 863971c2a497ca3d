package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestElectLeadersDuplicatePartition: a partition named twice, in one topic entry or
// two, is answered at each mention, as Kafka's controller answers it.
func TestElectLeadersDuplicatePartition(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "elect", 2)
	req := kmsg.NewPtrElectLeadersRequest()
	for _, partitions := range [][]int32{{0, 1, 0}, {0}} {
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = "elect", partitions
		req.Topics = append(req.Topics, rt)
	}
	resp := call[*kmsg.ElectLeadersResponse](t, b, req)
	if resp.ErrorCode != 0 {
		t.Fatalf("elect: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	answered := map[int32]int{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			answered[rp.Partition]++
			if rp.ErrorCode != kerr.ElectionNotNeeded.Code { // one node: the preferred replica leads
				t.Errorf("partition %d: %v, want ELECTION_NOT_NEEDED", rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
			}
		}
	}
	if answered[0] != 3 || answered[1] != 1 || len(answered) != 2 {
		t.Fatalf("answers per partition %v, want partition 0 three times and 1 once", answered)
	}
}
