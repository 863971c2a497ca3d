package cluster

import (
	"encoding/binary"
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

	// Fetch sessions (KIP-227) meet KIP-392: a consumer's session on the follower works
	// as one on a leader — an incremental fetch naming nothing gets the record
	// acknowledged since, once the follower's high watermark passes it — and in a
	// session on the leader a consumer in zone-b is pointed at the follower each time,
	// though nothing else about the partition changed.
	onFollower, first := openRawFetchSession(t, follower, topic, followed, "zone-b")
	if first.ErrorCode != 0 || first.HighWatermark <= 0 || len(first.RecordBatches) == 0 {
		t.Fatalf("session fetch of %s-%d from follower 2: %v, high watermark %d, %d bytes", topic, followed,
			kerr.ErrorForCode(first.ErrorCode), first.HighWatermark, len(first.RecordBatches))
	}
	end := first.HighWatermark
	if p, answered := onFollower.next(t, &end, 100*time.Millisecond); answered {
		t.Fatalf("incremental fetch of %s-%d from follower 2 at its high watermark %d: answered %+v, want nothing new", topic, followed, end, p)
	}
	if err := produceRawTo(t, newNodeClient(t, leader), topic, followed, "in a session", 10*time.Second); err != nil {
		t.Fatalf("acks=all produce to %s-%d: %v", topic, followed, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, answered := onFollower.next(t, nil, 5*time.Second)
		if answered && len(p.RecordBatches) > 0 {
			if p.ErrorCode != 0 || p.HighWatermark <= end || int64(binary.BigEndian.Uint64(p.RecordBatches)) != end {
				t.Fatalf("incremental fetch of %s-%d from follower 2: %v, high watermark %d, batch at %d, want the record at %d",
					topic, followed, kerr.ErrorForCode(p.ErrorCode), p.HighWatermark, binary.BigEndian.Uint64(p.RecordBatches), end)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower's session never answered the record acknowledged at %d of %s-%d", end, topic, followed)
		}
	}
	onLeader, first := openRawFetchSession(t, leader, topic, followed, "zone-b")
	if first.PreferredReadReplica != 2 || len(first.RecordBatches) != 0 {
		t.Fatalf("session fetch of %s-%d from its leader for a consumer in zone-b: preferred read replica %d and %d bytes, want 2 and none",
			topic, followed, first.PreferredReadReplica, len(first.RecordBatches))
	}
	if p, answered := onLeader.next(t, nil, 0); !answered || p.PreferredReadReplica != 2 || len(p.RecordBatches) != 0 {
		t.Errorf("incremental fetch of %s-%d from its leader for a consumer in zone-b: answered %v, preferred read replica %d, want 2",
			topic, followed, answered, p.PreferredReadReplica)
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
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.ReplicaID, req.MaxBytes, req.Rack = -1, 1<<20, rack
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, topicIDAt(t, conn, topic)
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

// topicIDAt asks the node conn reaches for topic's id.
func topicIDAt(t *testing.T, conn *peer.Conn, topic string) [16]byte {
	t.Helper()
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(12)
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	md, err := conn.Request(ctxT(t, 10*time.Second), meta)
	if err != nil {
		t.Fatal(err)
	}
	return md.(*kmsg.MetadataResponse).Topics[0].TopicID
}

// rawFetchSession is a consumer's incremental fetch session (KIP-227) of one partition
// on one node, driven with raw Fetch v17 requests (topics by id).
type rawFetchSession struct {
	conn      *peer.Conn
	topic     string
	topicID   [16]byte
	partition int32
	rack      string
	id, epoch int32
}

// openRawFetchSession opens a session on the node at addr with a full fetch of the
// partition from offset 0 and returns it with the partition's answer.
func openRawFetchSession(t *testing.T, addr, topic string, partition int32, rack string) (*rawFetchSession, kmsg.FetchResponseTopicPartition) {
	t.Helper()
	conn := peer.New(addr, peer.Options{ClientID: "cluster-test"})
	t.Cleanup(conn.Close)
	s := &rawFetchSession{conn: conn, topic: topic, topicID: topicIDAt(t, conn, topic), partition: partition, rack: rack}
	offset := int64(0)
	resp := s.fetch(t, &offset, 0)
	if resp.ErrorCode != 0 || resp.SessionID == 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("the fetch opening a session on %s answered %+v", addr, resp)
	}
	s.id, s.epoch = resp.SessionID, 1
	return s, resp.Topics[0].Partitions[0]
}

// next sends the session's next incremental fetch — naming the partition only when
// offset is set (it moved) — waiting up to maxWait for records, and returns the
// partition's answer, if the response holds it.
func (s *rawFetchSession) next(t *testing.T, offset *int64, maxWait time.Duration) (kmsg.FetchResponseTopicPartition, bool) {
	t.Helper()
	resp := s.fetch(t, offset, maxWait)
	if resp.ErrorCode != 0 || resp.SessionID != s.id {
		t.Fatalf("incremental fetch %d of session %d: %v, session %d", s.epoch, s.id, kerr.ErrorForCode(resp.ErrorCode), resp.SessionID)
	}
	s.epoch++
	if len(resp.Topics) == 0 {
		return kmsg.FetchResponseTopicPartition{}, false
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("incremental fetch %d of session %d answered %+v", s.epoch-1, s.id, resp)
	}
	return resp.Topics[0].Partitions[0], true
}

func (s *rawFetchSession) fetch(t *testing.T, offset *int64, maxWait time.Duration) *kmsg.FetchResponse {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(17)
	req.ReplicaID, req.MaxBytes, req.Rack = -1, 1<<20, s.rack
	req.MinBytes, req.MaxWaitMillis = 1, int32(maxWait/time.Millisecond)
	req.SessionID, req.SessionEpoch = s.id, s.epoch
	if offset != nil {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = s.topic, s.topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.FetchOffset = s.partition, 1<<20, -1, *offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := s.conn.Request(ctxT(t, maxWait+10*time.Second), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.FetchResponse)
}
