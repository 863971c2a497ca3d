package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchDuplicatePartition: a partition named twice in one Fetch is answered once,
// where it is first named and from the offset of its last mention, as Kafka keys a
// fetch's partitions by topic and partition; a topic entry left with nothing to answer
// is dropped. Without a session (before v7, and epoch -1) and with one (epoch 0).
func TestFetchDuplicatePartition(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "dup", 2)
	if code := produceTo(t, b, "dup"); code != 0 { // one record, at offset 0 of partition 0
		t.Fatalf("produce: %v", kerr.ErrorForCode(code))
	}
	tp, _ := b.image().Topic("dup")
	for _, tc := range []struct {
		name         string
		version      int16
		sessionEpoch int32
	}{
		{"v6 by name", 6, -1},
		{"v13 by id", 13, -1},
		{"v13 opening a session", 13, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := consumerFetch(0, 0, 1<<20)
			req.SetVersion(tc.version)
			req.SessionEpoch = tc.sessionEpoch
			// dup-0 from offset 0, dup-1, dup-1 again in the same entry, then dup-0
			// again from offset 1 (past the record).
			for _, parts := range [][][2]int64{{{0, 0}, {1, 0}, {1, 0}}, {{0, 1}}} {
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic, rt.TopicID = tp.Name, tp.ID
				for _, p := range parts {
					rp := kmsg.NewFetchRequestTopicPartition()
					rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = int32(p[0]), p[1], 1<<20, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				req.Topics = append(req.Topics, rt)
			}
			resp := <-sendFetch(t, b, req)
			if resp.ErrorCode != 0 {
				t.Fatalf("fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
			}
			var answered []int32
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					answered = append(answered, rp.Partition)
					if rp.ErrorCode != 0 {
						t.Errorf("partition %d: %v", rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
					}
					if rp.Partition == 0 && len(rp.RecordBatches) != 0 {
						t.Errorf("partition 0 answered from offset 0, want the last mention's offset 1")
					}
				}
			}
			if len(resp.Topics) != 1 || len(answered) != 2 || answered[0] != 0 || answered[1] != 1 {
				t.Fatalf("%d topic entries answering partitions %v, want 1 answering [0 1]", len(resp.Topics), answered)
			}
		})
	}
}
