package cluster

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestISRShrinkPastAFencedFollower: a follower that is caught up but fenced (cut off
// from the quorum, it still fetches from its leader) is not proposed for the ISR, so
// it cannot hold up the removal of a member that stopped fetching. Kafka's leader
// adds only ISR-eligible replicas (Partition.isReplicaIsrEligible: registered,
// unfenced, not shutting down, at the broker epoch it fetched with); the controller
// refuses an AlterPartition naming another (INELIGIBLE_REPLICA), lagging member and
// all. Node 1 is the only controller and leads; 3 is fenced and out of the ISR; then
// 2 stops (SIGSTOP) and a record is written: the leader drops 2 after
// replica.lag.time.max.ms, well before broker.session.timeout.ms fences it, and the
// acks=all write is acknowledged.
func TestISRShrinkPastAFencedFollower(t *testing.T) {
	t.Parallel()
	const topic = "isr-eligible"
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3, Roles: map[int32]string{2: "broker", 3: "broker"},
		ProxyControllerLinks: true,
		Overrides:            []string{"replica.lag.time.max.ms=1000", "broker.session.timeout.ms=10000"}})
	admin := newNodeClient(t, c.Node(1).Addr)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{1, 2, 3}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	createTopicAs(t, admin, rt)
	waitFullISR(t, admin, topic, 1, 30*time.Second)

	c.Isolate(3)
	waitPartition(t, admin, topic, 0, 30*time.Second, "the fenced node 3 out of the ISR",
		func(m kmsg.MetadataResponseTopicPartition) bool {
			return m.Leader == 1 && slices.Equal(m.ISR, []int32{1, 2})
		})

	c.Node(2).Pause()
	t.Cleanup(c.Node(2).Resume)
	paused := time.Now()
	// A record node 2 lacks (on an idle partition it would lack nothing and stay in
	// sync): the acks=all write is acknowledged once node 2 left the ISR.
	if err := produceRawTo(t, admin, topic, 0, "after the pause", 7*time.Second); err != nil {
		t.Fatalf("acks=all write with node 2 stopped (%v after it stopped): %v", time.Since(paused), err)
	}
	waitPartition(t, admin, topic, 0, 7*time.Second, "the ISR down to the leader, node 2 removed for its lag",
		func(m kmsg.MetadataResponseTopicPartition) bool {
			return m.Leader == 1 && slices.Equal(m.ISR, []int32{1})
		})
	fenced, err := admin.describeCluster(ctxT(t, 5*time.Second), true)
	if err != nil {
		t.Fatal(err)
	}
	if fenced[2] {
		t.Fatalf("node 2 left the ISR only when the controller fenced it (%v after it stopped), not for its lag", time.Since(paused))
	}
	t.Logf("node 2 left the ISR %v after it stopped", time.Since(paused).Round(time.Millisecond))
}
