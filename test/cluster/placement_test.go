package cluster

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/peer"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestReplicationReassignmentCopiesData: a partition holding data moves, under an
// acks=all load, from its one replica to the two other brokers (kadm
// AlterPartitionAssignments). The new replicas copy the log and are in the ISR
// whenever the old replica is gone from the replica set; the move completes, and
// everything acknowledged — before, during and after it — is read back from the new
// replicas.
func TestReplicationReassignmentCopiesData(t *testing.T) {
	t.Parallel()
	c := testutil.StartCluster(t, testutil.ClusterOptions{Overrides: replicationOverrides})
	inv := watchInvariants(t, c)
	const topic, partitions = "moving-house", 2
	admin := newNodeClient(t, c.Node(1).Addr)
	createTopic(t, admin, topic, partitions, 1)
	from := waitPartition(t, admin, topic, 0, 30*time.Second, "a leader", func(m kmsg.MetadataResponseTopicPartition) bool { return m.Leader >= 0 }).Replicas[0]
	var to []int32
	for _, n := range c.Nodes() {
		if n.ID != from {
			to = append(to, n.ID)
		}
	}
	l := startLoad(t, c, topic)
	l.waitAcks(t, 5000, "records in the partition before it moves")

	// Watch the partition's metadata while it moves: the old replica leaves the
	// replica set only with both new ones in the ISR.
	var (
		mu       sync.Mutex
		states   []string
		problems []string
		stop     = make(chan struct{})
		watching = make(chan struct{})
	)
	go func() {
		defer close(watching)
		for {
			if m, ok := partitionState(t, admin, topic, 0); ok {
				mu.Lock()
				state := fmt.Sprintf("replicas %v isr %v leader %d", m.Replicas, m.ISR, m.Leader)
				if len(states) == 0 || states[len(states)-1] != state {
					states = append(states, state)
				}
				if !slices.Contains(m.Replicas, from) && (!slices.Contains(m.ISR, to[0]) || !slices.Contains(m.ISR, to[1])) {
					problems = append(problems, fmt.Sprintf("replica %d dropped before %v were in sync: %s", from, to, state))
				}
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()

	adm := kadm.NewClient(admin.cl)
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, to)
	res, err := adm.AlterPartitionAssignments(ctxT(t, 10*time.Second), req)
	if err != nil || res[topic][0].Err != nil {
		t.Fatalf("reassign %s-0 from %d to %v: %v %+v", topic, from, to, err, res)
	}
	moving := time.Now()
	waitPartition(t, admin, topic, 0, 60*time.Second, fmt.Sprintf("moved to %v, both in sync", to), func(m kmsg.MetadataResponseTopicPartition) bool {
		return slices.Equal(sorted(m.Replicas), to) && slices.Equal(sorted(m.ISR), to) && m.Leader >= 0
	})
	t.Logf("%s-0 (%d records acknowledged so far) moved from %d to %v in %v", topic, l.acks(), from, to, time.Since(moving).Round(time.Millisecond))
	testutil.WaitFor(t, 30*time.Second, func() bool {
		listed, err := adm.ListPartitionReassignments(ctxT(t, 5*time.Second), kadm.TopicsSet{topic: {0: {}}})
		return err == nil && len(listed[topic]) == 0
	}, "no reassignment listed any more")
	close(stop)
	<-watching
	mu.Lock()
	t.Logf("%s-0 while moving: %v", topic, states)
	for _, p := range problems {
		t.Error(p)
	}
	mu.Unlock()
	l.waitAcks(t, 1000, "writes after the move")
	h := l.stop(t)
	h.check(t, c, topic)
	inv.check()
}

// TestRackAwareFetch is KIP-392 on three nodes in three racks with the rack-aware
// replica selector: a consumer naming its rack reads every partition from the
// replica in its rack — the leaders point it there — and gets every acknowledged
// record, in order; a consumer without a rack reads from the leaders.
func TestRackAwareFetch(t *testing.T) {
	t.Parallel()
	c := testutil.StartCluster(t, testutil.ClusterOptions{
		Overrides: append([]string{"replica.selector.class=" + config.RackAwareReplicaSelector}, replicationOverrides...),
		NodeOverrides: map[int32][]string{
			1: {"broker.rack=zone-a"}, 2: {"broker.rack=zone-b"}, 3: {"broker.rack=zone-c"},
		},
	})
	inv := watchInvariants(t, c)
	const topic, partitions = "nearby", 3
	admin := newNodeClient(t, c.Node(1).Addr)
	createTopic(t, admin, topic, partitions, 3)
	waitFullISR(t, admin, topic, partitions, 30*time.Second)
	l := startLoad(t, c, topic)
	l.waitAcks(t, 3000, "records to read")
	h := l.stop(t)
	waitFullISR(t, admin, topic, partitions, 30*time.Second)
	leaders := map[int32]int32{}
	for p := range int32(partitions) {
		m, _ := partitionState(t, admin, topic, p)
		leaders[p] = m.Leader
	}

	near := &batchSources{}
	h.check(t, c, topic, kgo.Rack("zone-b"), kgo.WithHooks(near))
	if got := len(near.byPartition()); got != partitions {
		t.Fatalf("batches of %d partitions read, want %d: %v (leaders %v)", got, partitions, near.byPartition(), leaders)
	}
	for p, from := range near.byPartition() {
		if len(from) != 1 || from[0] != 2 {
			t.Errorf("a consumer in zone-b read %s-%d (leader %d) from brokers %v, want only broker 2, in its zone", topic, p, leaders[p], from)
		}
	}
	// Straight to the follower in zone-b: a consumer's Fetch v11+ is served up to its
	// high watermark, an older one only by the leader; the leader points a consumer in
	// zone-b at it.
	var followed int32 = -1
	for p, leader := range leaders {
		if leader != 2 {
			followed = p
		}
	}
	follower, leader := c.Node(2).Addr, c.Node(leaders[followed]).Addr
	if p := fetchRaw(t, follower, topic, followed, 10, ""); p.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Errorf("Fetch v10 of %s-%d from follower 2: %v, want NOT_LEADER_OR_FOLLOWER", topic, followed, kerr.ErrorForCode(p.ErrorCode))
	}
	if p := fetchRaw(t, follower, topic, followed, 12, ""); p.ErrorCode != 0 || len(p.RecordBatches) == 0 || p.HighWatermark <= 0 {
		t.Errorf("Fetch v12 of %s-%d from follower 2: %v, high watermark %d, %d bytes", topic, followed,
			kerr.ErrorForCode(p.ErrorCode), p.HighWatermark, len(p.RecordBatches))
	}
	if p := fetchRaw(t, leader, topic, followed, 12, "zone-b"); p.PreferredReadReplica != 2 || len(p.RecordBatches) != 0 {
		t.Errorf("Fetch v12 of %s-%d from its leader for a consumer in zone-b: preferred read replica %d and %d bytes, want 2 and none",
			topic, followed, p.PreferredReadReplica, len(p.RecordBatches))
	}
	if p := fetchRaw(t, leader, topic, followed, 12, "zone-x"); p.PreferredReadReplica != -1 || len(p.RecordBatches) == 0 {
		t.Errorf("Fetch v12 of %s-%d from its leader for a consumer in a rack without a replica: preferred read replica %d and %d bytes, want -1 and records",
			topic, followed, p.PreferredReadReplica, len(p.RecordBatches))
	}

	plain := &batchSources{}
	h.check(t, c, topic, kgo.WithHooks(plain))
	if got := len(plain.byPartition()); got != partitions {
		t.Fatalf("batches of %d partitions read, want %d: %v (leaders %v)", got, partitions, near.byPartition(), leaders)
	}
	for p, from := range plain.byPartition() {
		if len(from) != 1 || from[0] != leaders[p] {
			t.Errorf("a consumer without a rack read %s-%d from brokers %v, want only its leader %d", topic, p, from, leaders[p])
		}
	}
	inv.check()
}

// batchSources records which broker served each partition's batches (a franz-go
// HookFetchBatchRead).
type batchSources struct {
	mu   sync.Mutex
	from map[int32]map[int32]bool // partition → brokers
}

func (b *batchSources) OnFetchBatchRead(meta kgo.BrokerMetadata, _ string, partition int32, _ kgo.FetchBatchMetrics) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.from == nil {
		b.from = map[int32]map[int32]bool{}
	}
	if b.from[partition] == nil {
		b.from[partition] = map[int32]bool{}
	}
	b.from[partition][meta.NodeID] = true
}

func (b *batchSources) byPartition() map[int32][]int32 {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[int32][]int32{}
	for p, brokers := range b.from {
		for id := range brokers {
			out[p] = append(out[p], id)
		}
		slices.Sort(out[p])
	}
	return out
}

func sorted(ids []int32) []int32 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// fetchRaw sends a consumer's Fetch of one partition from offset 0, at exactly that
// version (a peer connection: kgo would raise it), with the consumer's rack, straight
// to the node at addr, and returns the partition's answer.
func fetchRaw(t *testing.T, addr, topic string, partition int32, version int16, rack string) kmsg.FetchResponseTopicPartition {
	t.Helper()
	conn := peer.New(addr, peer.Options{ClientID: "cluster-test"})
	defer conn.Close()
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(12)
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	md, err := conn.Request(ctxT(t, 10*time.Second), meta)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.ReplicaID, req.MaxBytes, req.Rack = -1, 1<<20, rack
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, md.(*kmsg.MetadataResponse).Topics[0].TopicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = partition, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := conn.Request(ctxT(t, 10*time.Second), req)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.(*kmsg.FetchResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("Fetch answered %+v", r)
	}
	return r.Topics[0].Partitions[0]
}
