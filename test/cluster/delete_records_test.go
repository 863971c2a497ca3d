package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestDeleteRecordsReachesFollowersBeforeItAnswers: DeleteRecords answers once every
// live replica's log start reached the offset — its low watermark is the smallest
// of them (Kafka's DelayedDeleteRecords over Partition.lowWatermarkIfLeader) — so
// records deleted stay deleted when the leader dies right after: the new leader's
// earliest offset is where the deletion left the log. Followers waiting in a fetch
// (replica.fetch.wait.max.ms, long here) hear of the new log start at once.
func TestDeleteRecordsReachesFollowersBeforeItAnswers(t *testing.T) {
	t.Parallel()
	const topic, records = "deleted-stays-deleted", 10
	c := testutil.StartCluster(t, testutil.ClusterOptions{Overrides: []string{"replica.fetch.wait.max.ms=8000"}})
	admin := newNodeClient(t, c.Node(1).Addr)
	ctrl := activeController(t, admin)
	leader := int32(1)
	for leader == ctrl {
		leader++
	}
	replicas := []int32{leader}
	for id := int32(1); id <= 3; id++ {
		if id != leader {
			replicas = append(replicas, id)
		}
	}
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	createTopicAs(t, admin, rt)
	direct := newNodeClient(t, c.Node(leader).Addr)
	// The leader's own view: the controller's can show the topic before the leader
	// has opened it.
	waitFullISR(t, direct, topic, 1, 30*time.Second)
	for i := range records {
		deadline := time.Now().Add(30 * time.Second)
		err := produceRawTo(t, direct, topic, 0, "r", 10*time.Second)
		// Refused before any append while the leader opens the partition: sent again.
		for errors.Is(err, kerr.UnknownTopicOrPartition) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			err = produceRawTo(t, direct, topic, 0, "r", 10*time.Second)
		}
		if err != nil {
			t.Fatalf("acks=all record %d: %v", i, err)
		}
	}

	del := kmsg.NewPtrDeleteRecordsRequest()
	del.TimeoutMillis = 15_000
	dt := kmsg.NewDeleteRecordsRequestTopic()
	dt.Topic = topic
	dp := kmsg.NewDeleteRecordsRequestTopicPartition()
	dp.Partition, dp.Offset = 0, records
	dt.Partitions = append(dt.Partitions, dp)
	del.Topics = append(del.Topics, dt)
	asked := time.Now()
	r, err := direct.request(ctxT(t, 20*time.Second), del)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("DeleteRecords answered in %v", time.Since(asked).Round(time.Millisecond))
	sp := r.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
	if sp.ErrorCode != 0 || sp.LowWatermark != records {
		t.Fatalf("DeleteRecords before %d: %v, low watermark %d", records, kerr.ErrorForCode(sp.ErrorCode), sp.LowWatermark)
	}
	c.Node(leader).Kill()

	survivor := clientExcept(t, c, leader)
	m := waitPartition(t, survivor, topic, 0, 30*time.Second, "a new leader", func(m kmsg.MetadataResponseTopicPartition) bool {
		return m.Leader >= 0 && m.Leader != leader
	})
	newLeader := newNodeClient(t, c.Node(m.Leader).Addr)
	var earliest int64
	testutil.WaitFor(t, 20*time.Second, func() bool {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = topic
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp, lp.CurrentLeaderEpoch = 0, -2, -1
		lt.Partitions = append(lt.Partitions, lp)
		req.Topics = append(req.Topics, lt)
		r, err := newLeader.request(ctxT(t, 5*time.Second), req)
		if err != nil {
			return false
		}
		p := r.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		earliest = p.Offset
		return p.ErrorCode == 0
	}, "ListOffsets earliest on the new leader")
	if earliest != records {
		t.Fatalf("the new leader %d's earliest offset is %d: records deleted before %d (acknowledged with low watermark %d) are back",
			m.Leader, earliest, records, sp.LowWatermark)
	}
}
