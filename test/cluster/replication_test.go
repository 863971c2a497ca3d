package cluster

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// replicationOverrides make ISR changes happen in seconds.
var replicationOverrides = []string{"replica.lag.time.max.ms=3000", "replica.fetch.backoff.ms=200"}

// clientExcept returns a node client of a broker other than the given ones.
func clientExcept(t *testing.T, c *testutil.Cluster, except ...int32) *nodeClient {
	t.Helper()
	for _, n := range c.Nodes() {
		if n.IsBroker() && !slices.Contains(except, n.ID) {
			return newNodeClient(t, n.Addr)
		}
	}
	t.Fatalf("no broker other than %v", except)
	return nil
}

// partitionState returns a partition's metadata as a node serves it.
func partitionState(t *testing.T, cl *nodeClient, topic string, partition int32) (kmsg.MetadataResponseTopicPartition, bool) {
	md, err := cl.metadata(ctxT(t, 5*time.Second))
	if err != nil {
		return kmsg.MetadataResponseTopicPartition{}, false
	}
	for _, p := range partitionsOf(md, topic) {
		if p.Partition == partition {
			return p, true
		}
	}
	return kmsg.MetadataResponseTopicPartition{}, false
}

// waitPartition waits until a partition's metadata satisfies cond and returns it.
func waitPartition(t *testing.T, cl *nodeClient, topic string, partition int32, d time.Duration, what string,
	cond func(kmsg.MetadataResponseTopicPartition) bool) kmsg.MetadataResponseTopicPartition {
	t.Helper()
	var p kmsg.MetadataResponseTopicPartition
	testutil.WaitFor(t, d, func() bool {
		var ok bool
		p, ok = partitionState(t, cl, topic, partition)
		return ok && cond(p)
	}, fmt.Sprintf("%s-%d: %s", topic, partition, what))
	return p
}

// waitFullISR waits until every partition of topic has all its replicas in its ISR.
func waitFullISR(t *testing.T, cl *nodeClient, topic string, partitions int32, d time.Duration) {
	t.Helper()
	for p := range partitions {
		waitPartition(t, cl, topic, p, d, "every replica back in the ISR", func(m kmsg.MetadataResponseTopicPartition) bool {
			return m.Leader >= 0 && len(m.ISR) == len(m.Replicas)
		})
	}
}

func alterTopicConfig(t *testing.T, cl *nodeClient, topic, key, value string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value, c.Op = key, kmsg.StringPtr(value), kmsg.IncrementalAlterConfigOpSet
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	r, err := cl.request(ctxT(t, 15*time.Second), req)
	if err != nil {
		t.Fatal(err)
	}
	if code := r.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode; code != 0 {
		t.Fatalf("set %s=%s on %s: %v", key, value, topic, kerr.ErrorForCode(code))
	}
}

// TestReplicationKillLeadersUnderLoad: with acks=all, min.insync.replicas=2 and
// replication factor 3, kill -9 the leader of a partition under load, then the active
// controller; each comes back and its replicas rejoin the ISR; every acknowledged record
// is there once, in order, at its offset.
func TestReplicationKillLeadersUnderLoad(t *testing.T) {
	t.Parallel()
	const topic, partitions = "orders", 3
	c, inv, l := clusterUnderLoad(t, testutil.ClusterOptions{}, topic, partitions, 3000, "acknowledged records before the first kill")

	for round := range 2 {
		cl := newNodeClient(t, c.Node(1).Addr)
		ctrl := activeController(t, cl)
		victim := ctrl
		if round == 0 {
			p, _ := partitionState(t, cl, topic, 0)
			victim = p.Leader
			if victim == ctrl { // the first round kills a leader that is not the controller
				p, _ = partitionState(t, cl, topic, 1)
				victim = p.Leader
			}
		}
		led := ledBy(t, cl, topic, victim)
		t.Logf("round %d: kill -9 node %d (active controller %d, leading partitions %v)", round, victim, ctrl, led)
		killed := time.Now()
		c.Node(victim).Kill()
		survivor := clientExcept(t, c, victim)
		outlastLostNode(t, c, l, survivor, topic, partitions, victim, fmt.Sprintf("round %d: kill -9 of node %d", round, victim), killed, led, 2000, 1000, nil)
	}
	h := l.stop(t)
	h.check(t, c, topic)
	inv.check()
}

// TestReplicationPausedFollower: a follower stopped with SIGSTOP leaves the ISR and
// writes go on with min.insync.replicas=2; resumed, it catches up and rejoins. With
// min.insync.replicas=3 and the follower out, writes are refused with
// NOT_ENOUGH_REPLICAS — never acknowledged with fewer copies.
func TestReplicationPausedFollower(t *testing.T) {
	t.Parallel()
	c := testutil.StartCluster(t, testutil.ClusterOptions{Overrides: append([]string{"min.insync.replicas=2"}, replicationOverrides...)})
	inv := watchInvariants(t, c)
	const topic = "payments"
	admin := newNodeClient(t, c.Node(1).Addr)
	createTopic(t, admin, topic, 1, 3)
	p := waitPartition(t, admin, topic, 0, 30*time.Second, "a leader", func(m kmsg.MetadataResponseTopicPartition) bool { return m.Leader >= 0 })
	ctrl := activeController(t, admin)
	var follower int32 = -1
	for _, r := range p.Replicas {
		if r != p.Leader && r != ctrl {
			follower = r
		}
	}
	if follower < 0 {
		for _, r := range p.Replicas {
			if r != p.Leader {
				follower = r
			}
		}
	}
	watcher := clientExcept(t, c, follower)
	l := startLoad(t, c, topic)
	l.waitAcks(t, 1000, "acknowledged records before the pause")

	c.Node(follower).Pause()
	waitPartition(t, watcher, topic, 0, 30*time.Second, fmt.Sprintf("follower %d out of the ISR", follower),
		func(m kmsg.MetadataResponseTopicPartition) bool { return !slices.Contains(m.ISR, follower) })
	l.waitAcks(t, 1000, "writes with two in-sync replicas")
	c.Node(follower).Resume()
	waitPartition(t, watcher, topic, 0, 60*time.Second, fmt.Sprintf("follower %d back in the ISR", follower),
		func(m kmsg.MetadataResponseTopicPartition) bool { return slices.Contains(m.ISR, follower) })
	l.waitAcks(t, 500, "writes with three in-sync replicas")
	h := l.stop(t)
	h.check(t, c, topic)

	// min.insync.replicas=3 with a follower out of the ISR: refused.
	alterTopicConfig(t, watcher, topic, "min.insync.replicas", "3")
	c.Node(follower).Pause()
	waitPartition(t, watcher, topic, 0, 30*time.Second, fmt.Sprintf("follower %d out of the ISR again", follower),
		func(m kmsg.MetadataResponseTopicPartition) bool { return !slices.Contains(m.ISR, follower) })
	leaderClient := newNodeClient(t, c.Node(p.Leader).Addr)
	if err := produceRaw(t, leaderClient, topic, "refused"); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("a write with 2 in-sync replicas < min.insync.replicas 3: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	c.Node(follower).Resume()
	waitPartition(t, watcher, topic, 0, 60*time.Second, "all three in the ISR", func(m kmsg.MetadataResponseTopicPartition) bool {
		return len(m.ISR) == 3
	})
	testutil.WaitFor(t, 30*time.Second, func() bool { return produceRaw(t, leaderClient, topic, "accepted") == nil },
		"a write accepted once three replicas are in sync")
	inv.check()
}

// TestReplicationUncleanElection is the seed's misconfiguration: replication factor 2,
// min.insync.replicas=1, the follower out of the ISR when the leader dies. With
// unclean.leader.election.enable=false the partition stays offline until the leader
// returns, and nothing acknowledged is lost; with it true the follower takes over and
// the returning leader drops, and reports, what it alone held.
func TestReplicationUncleanElection(t *testing.T) {
	t.Parallel()
	c := testutil.StartCluster(t, testutil.ClusterOptions{Overrides: append([]string{"min.insync.replicas=1"}, replicationOverrides...)})
	inv := watchInvariants(t, c)
	for _, unclean := range []bool{false, true} {
		topic := fmt.Sprintf("seed-unclean-%t", unclean)
		admin := clientExcept(t, c)
		createTopic(t, admin, topic, 1, 2)
		if unclean {
			alterTopicConfig(t, admin, topic, "unclean.leader.election.enable", "true")
		}
		p := waitPartition(t, admin, topic, 0, 30*time.Second, "two replicas in sync", func(m kmsg.MetadataResponseTopicPartition) bool {
			return m.Leader >= 0 && len(m.ISR) == 2
		})
		leader := p.Leader
		follower := p.Replicas[0]
		if follower == leader {
			follower = p.Replicas[1]
		}
		l := startLoad(t, c, topic)
		l.waitAcks(t, 500, "acknowledged records with both replicas in sync")
		c.Node(follower).Pause()
		watcher := clientExcept(t, c, follower, leader)
		waitPartition(t, watcher, topic, 0, 30*time.Second, "the follower out of the ISR", func(m kmsg.MetadataResponseTopicPartition) bool {
			return slices.Equal(m.ISR, []int32{leader})
		})
		l.waitAcks(t, 500, "records acknowledged by the leader alone")
		h := l.stop(t)
		c.Node(leader).Kill()
		c.Node(follower).Resume()
		if !unclean {
			waitPartition(t, watcher, topic, 0, 30*time.Second, "offline", func(m kmsg.MetadataResponseTopicPartition) bool { return m.Leader < 0 })
			// It must stay offline: the follower is alive but out of the ISR.
			deadline := time.Now().Add(6 * time.Second)
			for time.Now().Before(deadline) {
				if m, ok := partitionState(t, watcher, topic, 0); ok && m.Leader >= 0 {
					t.Fatalf("%s led by %d with unclean election off and its only in-sync replica down", topic, m.Leader)
				}
				time.Sleep(200 * time.Millisecond)
			}
			c.StartAgain(t, leader)
			waitPartition(t, watcher, topic, 0, 60*time.Second, "led by the returning leader", func(m kmsg.MetadataResponseTopicPartition) bool {
				return m.Leader == leader
			})
			h.check(t, c, topic)
			continue
		}
		waitPartition(t, watcher, topic, 0, 30*time.Second, fmt.Sprintf("led by follower %d (unclean)", follower),
			func(m kmsg.MetadataResponseTopicPartition) bool { return m.Leader == follower })
		c.StartAgain(t, leader)
		testutil.WaitFor(t, 60*time.Second, func() bool {
			return hasLine(c.Node(leader).Log(), "follower truncated a divergent tail")
		}, "the returning leader to report the records it alone held")
		waitPartition(t, watcher, topic, 0, 60*time.Second, "both replicas in sync again", func(m kmsg.MetadataResponseTopicPartition) bool {
			return len(m.ISR) == 2
		})
	}
	inv.check()
}

func hasLine(log, substr string) bool { return strings.Contains(log, substr) }

// produceRaw sends one record to partition 0 of topic with acks=all, straight to the
// node (no client-side retries), and returns the partition's error.
func produceRaw(t *testing.T, cl *nodeClient, topic, value string) error {
	t.Helper()
	return produceRawTo(t, cl, topic, 0, value, 5*time.Second)
}

// produceRawTo is produceRaw to any partition, with the request's timeout.
func produceRawTo(t *testing.T, cl *nodeClient, topic string, partition int32, value string, timeout time.Duration) error {
	t.Helper()
	batch, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Value: []byte(value)}})
	if err != nil {
		t.Fatal(err)
	}
	md, err := cl.metadata(ctxT(t, 10*time.Second))
	if err != nil {
		return err
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, int32(timeout/time.Millisecond)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic // up to v12; v13 (what kgo sends) names it by id
	for _, mt := range md.Topics {
		if deref(mt.Topic) == topic {
			rt.TopicID = mt.TopicID
		}
	}
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.request(ctxT(t, timeout+10*time.Second), req)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)
}
