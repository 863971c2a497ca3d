package cluster

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// idemProducer sends raw batches of one idempotent producer id, one request per
// batch, straight to a node (no client retries: each answer is the broker's own).
type idemProducer struct {
	pid   int64
	epoch int16
	topic string
	id    [16]byte
}

// produce sends one record (seq -1: a batch without producer) to partition 0 of the
// topic on cl with the given acks and returns the base offset and the partition's
// error.
func (p *idemProducer) produce(t *testing.T, cl *nodeClient, acks int16, seq int32, value string) (int64, error) {
	t.Helper()
	opts := record.DefaultBuildOptions()
	if seq >= 0 {
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = p.pid, p.epoch, seq
	}
	batch, err := record.Build(opts, []record.Record{{Value: []byte(value)}})
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = p.topic, p.id
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.request(ctxT(t, 20*time.Second), req)
	if err != nil {
		t.Fatalf("produce sequence %d: %v", seq, err)
	}
	r := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if r.ErrorCode != 0 {
		t.Logf("sequence %d (%q): %v %s", seq, value, kerr.ErrorForCode(r.ErrorCode), deref(r.ErrorMessage))
	}
	return r.BaseOffset, kerr.ErrorForCode(r.ErrorCode)
}

// TestIdempotentProducerStateAcrossLeaders: an idempotent producer's sequences follow
// the partition from leader to leader. After the leader is killed (-9), the new
// leader answers a retry of an acknowledged batch as a duplicate at its first offset
// and refuses a gap; the old leader, back as a follower, cuts the batches only it
// held and its producer state with them: once it leads again, a sequence whose batch
// it cut is written (not answered as a duplicate of the batch that is gone). The
// partition then holds each acknowledged record once, in order, at its offset.
func TestIdempotentProducerStateAcrossLeaders(t *testing.T) {
	t.Parallel()
	c := testutil.StartCluster(t, testutil.ClusterOptions{Overrides: replicationOverrides, ProxyReplication: true})
	const topic = "idem-leaders"
	first := int32(1)
	admin := clientExcept(t, c)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition, a.Replicas = 0, []int32{first, 2, 3}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	createTopicAs(t, admin, rt)
	waitPartition(t, admin, topic, 0, 30*time.Second, "led by 1 with three replicas in sync", func(m kmsg.MetadataResponseTopicPartition) bool {
		return m.Leader == first && len(m.ISR) == 3
	})
	md, err := admin.metadata(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	p := &idemProducer{topic: topic}
	for _, mt := range md.Topics {
		if deref(mt.Topic) == topic {
			p.id = mt.TopicID
		}
	}
	testutil.WaitFor(t, 30*time.Second, func() bool {
		r, err := admin.request(ctxT(t, 10*time.Second), kmsg.NewPtrInitProducerIDRequest())
		if err != nil {
			return false
		}
		ir := r.(*kmsg.InitProducerIDResponse)
		p.pid, p.epoch = ir.ProducerID, ir.ProducerEpoch
		return ir.ErrorCode == 0
	}, "a producer id")

	want := map[int64]string{} // offset -> value acknowledged there
	expect := func(cl *nodeClient, acks int16, seq int32, value string, wantErr error, wantOffset int64, what string) {
		t.Helper()
		off, err := p.produce(t, cl, acks, seq, value)
		if err != wantErr || (err == nil && off != wantOffset) {
			t.Fatalf("%s: %v at offset %d, want %v at offset %d", what, err, off, wantErr, wantOffset)
		}
		if err == nil && acks == -1 {
			want[off] = value
		}
	}
	l1 := newNodeClient(t, c.Node(first).Addr)
	// kgo sends a Produce request with the acks of its configuration.
	one, err := kgo.NewClient(kgo.SeedBrokers(c.Node(first).Addr), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	l1One := &nodeClient{cl: one}
	for seq := range int32(5) {
		expect(l1, -1, seq, fmt.Sprint(seq), nil, int64(seq), fmt.Sprintf("sequence %d", seq))
	}
	// Sequences 5 and 6 reach the leader alone (acks=1, its followers cut off), and
	// the leader dies with them.
	c.Node(first).ReplicationProxy.Blackhole()
	expect(l1One, 1, 5, "5a", nil, 5, "sequence 5 on the leader alone")
	expect(l1One, 1, 6, "6a", nil, 6, "sequence 6 on the leader alone")
	c.Node(first).Kill()
	c.Node(first).ReplicationProxy.Cut() // what it held for its followers is lost
	watcher := clientExcept(t, c, first)
	np := waitPartition(t, watcher, topic, 0, 60*time.Second, "a new leader", func(m kmsg.MetadataResponseTopicPartition) bool {
		return m.Leader >= 0 && m.Leader != first
	})
	l2 := newNodeClient(t, c.Node(np.Leader).Addr)
	testutil.WaitFor(t, 30*time.Second, func() bool {
		_, err := p.produce(t, l2, -1, 4, "4")
		return err == nil
	}, "the new leader to take writes")
	expect(l2, -1, 3, "3", nil, 3, "retry of sequence 3 on the new leader")
	expect(l2, -1, 4, "4", nil, 4, "retry of sequence 4 on the new leader")
	expect(l2, -1, 6, "6", kerr.OutOfOrderSequenceNumber, 0, "a gap on the new leader")
	// A record without producer first, so that the offsets of the new history differ
	// from the ones the old leader gave sequences 5 and 6.
	expect(l2, -1, -1, "plain", nil, 5, "a record without producer")
	expect(l2, -1, 5, "5b", nil, 6, "sequence 5 on the new leader")

	c.Node(first).ReplicationProxy.Pass()
	c.StartAgain(t, first)
	waitPartition(t, watcher, topic, 0, 60*time.Second, "three replicas in sync again", func(m kmsg.MetadataResponseTopicPartition) bool {
		return len(m.ISR) == 3
	})
	adm := kadm.NewClient(watcher.cl)
	testutil.WaitFor(t, 60*time.Second, func() bool {
		if _, err := adm.ElectLeaders(ctxT(t, 10*time.Second), kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}}}); err != nil {
			return false
		}
		m, ok := partitionState(t, watcher, topic, 0)
		return ok && m.Leader == first
	}, "node 1 leading again")
	l1 = newNodeClient(t, c.Node(first).Addr)
	testutil.WaitFor(t, 30*time.Second, func() bool {
		_, err := p.produce(t, l1, -1, 5, "5b")
		return err == nil
	}, "node 1 to take writes")
	expect(l1, -1, 5, "5b", nil, 6, "retry of sequence 5 on the old leader")
	expect(l1, -1, 6, "6b", nil, 7, "sequence 6, whose first batch the old leader cut")
	expect(l1, -1, 7, "7", nil, 8, "sequence 7")

	// History: each acknowledged record once, in order, at its offset.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BrokerAddrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxT(t, 60*time.Second)
	var got []string
	for len(got) < 9 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		for _, r := range fs.Records() {
			if r.Offset != int64(len(got)) {
				t.Fatalf("offset %d read after %d records", r.Offset, len(got))
			}
			got = append(got, string(r.Value))
		}
	}
	wantAll := []string{"0", "1", "2", "3", "4", "plain", "5b", "6b", "7"}
	if !slices.Equal(got, wantAll) {
		t.Fatalf("partition holds %q, want %q", got, wantAll)
	}
	for off, v := range want {
		if got[off] != v {
			t.Fatalf("offset %d holds %q, acknowledged %q there", off, got[off], v)
		}
	}
}
