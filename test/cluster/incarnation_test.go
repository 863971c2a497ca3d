package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestRestartedFollowerRejoinsOnItsOwnFetches (KIP-903): a follower that restarts
// having lost its log (kill -9, then its partition's directory removed: what a crash
// with unflushed data or a replaced disk leaves) is a new incarnation, at a new broker
// epoch. Its leader still holds the previous incarnation's position, caught up within
// replica.lag.time.max.ms; proposing it for the ISR on that position, at the epoch
// the registration has now, let a replica holding nothing join the ISR, and lose
// every acknowledged record were it elected. Followers fetch with their broker epoch
// (Fetch v15), the leader proposes each at the epoch it fetched with and the
// controller refuses any other. Node 1 is the controller; 2 leads, 3 follows; the
// leader's REPLICATION listener is cut while 3 is down, so the new incarnation cannot
// fetch: it must stay out of the ISR until the old position is past the lag, then
// join once it has fetched everything back, and hold every acknowledged record when
// it is elected.
func TestRestartedFollowerRejoinsOnItsOwnFetches(t *testing.T) {
	t.Parallel()
	const (
		topic  = "incarnations"
		lagMax = 20 * time.Second
	)
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3,
		Roles:            map[int32]string{1: "controller", 2: "broker", 3: "broker"},
		ProxyReplication: true,
		Overrides:        []string{"replica.lag.time.max.ms=20000", "replica.fetch.backoff.ms=200", "min.insync.replicas=1"}})
	inv := watchInvariants(t, c)
	admin := newNodeClient(t, c.Node(2).Addr)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{2, 3}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	createTopicAs(t, admin, rt)
	waitPartition(t, admin, topic, 0, 30*time.Second, "led by 2 with 3 in sync", func(m kmsg.MetadataResponseTopicPartition) bool {
		return m.Leader == 2 && slices.Equal(m.ISR, []int32{2, 3})
	})
	l := startLoad(t, c, topic)
	l.waitAcks(t, 300, "records acknowledged by both replicas")
	h := l.stop(t)

	// The leader last heard from node 3 with its log complete; the new incarnation
	// starts from nothing and cannot reach the leader.
	killed := time.Now()
	c.Node(3).Kill()
	if err := os.RemoveAll(filepath.Join(c.Node(3).Dir, topic+"-0")); err != nil {
		t.Fatal(err)
	}
	c.Node(2).ReplicationProxy.Blackhole()
	c.StartAgain(t, 3)
	testutil.WaitFor(t, 30*time.Second, func() bool {
		fenced, err := admin.describeCluster(ctxT(t, 5*time.Second), true)
		f, ok := fenced[3]
		return err == nil && ok && !f
	}, "node 3 registered again and unfenced")

	// Until the previous incarnation's position is older than the lag (and one more
	// round of the leader's ISR loop, every half of it), the leader could propose it.
	for until := killed.Add(lagMax + lagMax/2); time.Now().Before(until); time.Sleep(200 * time.Millisecond) {
		if m, ok := partitionState(t, admin, topic, 0); ok && slices.Contains(m.ISR, 3) {
			t.Fatalf("node 3 in the ISR %v %v after its restart with an empty log, before it fetched anything", m.ISR, time.Since(killed))
		}
	}

	c.Node(2).ReplicationProxy.Pass()
	waitPartition(t, admin, topic, 0, 60*time.Second, "node 3 back in the ISR once it fetched everything", func(m kmsg.MetadataResponseTopicPartition) bool {
		return slices.Equal(m.ISR, []int32{2, 3})
	})
	c.Node(2).Kill()
	watcher := newNodeClient(t, c.Node(3).Addr)
	waitPartition(t, watcher, topic, 0, 30*time.Second, "led by node 3", func(m kmsg.MetadataResponseTopicPartition) bool {
		return m.Leader == 3
	})
	h.check(t, c, topic)
	inv.check()
}
