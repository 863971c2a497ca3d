package cluster

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestDynamicBrokerConfigsAcrossControllerFailover holds KIP-226 dynamic broker
// configs, kept in the metadata log, to what they promise through the loss of the
// active controller, under an acks=all load of small records:
//
//  1. the cluster default message.max.bytes=600 (the load's batches are up to 512
//     bytes, franz-go's least ProducerBatchMaxBytes), set through a broker that is
//     not the active controller, survives the kill -9 of the controller right after
//     it was answered: once another controller is elected every live broker
//     describes it (DYNAMIC_DEFAULT_BROKER_CONFIG) and refuses a 2,000-byte record
//     in every partition (MESSAGE_TOO_LARGE);
//  2. with that node still down, a value of its own (message.max.bytes=100000, sent
//     during the election: retriable errors are retried) and a new cluster default
//     (700) are set; the live brokers follow the default;
//  3. started again, the node describes both, its own as DYNAMIC_BROKER_CONFIG winning
//     over the default, and the partitions it leads take 2,000 bytes that the others
//     refuse; a follower of them answers those 2,000 bytes NOT_LEADER_OR_FOLLOWER;
//  4. its own value deleted, it falls back to the cluster default;
//  5. every acknowledged record is there once, in order, at its offset.
//
// Cell 3 found that a follower checked a batch against its own max.message.bytes
// before its leadership: a client whose metadata still named it the leader was told
// MESSAGE_TOO_LARGE, which it does not retry, and lost a record the leader would have
// taken. Kafka's Partition.appendRecordsToLeader checks leadership first, as Samsa's
// produce now does.
func TestDynamicBrokerConfigsAcrossControllerFailover(t *testing.T) {
	t.Parallel()
	const topic, partitions = "dyn-faults", 6
	c := testutil.StartCluster(t, testutil.ClusterOptions{Overrides: append([]string{"min.insync.replicas=2"}, replicationOverrides...)})
	inv := watchInvariants(t, c)
	via := notTheActiveController(t, c)
	createTopic(t, newNodeClient(t, via.Addr), topic, partitions, 3)
	// Batches of at most 512 bytes (franz-go's least) stay under every
	// message.max.bytes the test sets.
	l := startLoadAt(t, c, topic, 20, kgo.ProducerBatchMaxBytes(512))
	l.waitAcks(t, 100, "acknowledged records before the first alter")

	probes := newProbeClient(t, c, topic)
	viaCl := newNodeClient(t, via.Addr)

	// 1. The cluster default, then the active controller killed.
	alterBrokerConfigs(t, viaCl, "set the cluster default message.max.bytes=600",
		brokerConfigOp{"", "message.max.bytes", "600", kmsg.IncrementalAlterConfigOpSet})
	down := activeController(t, viaCl)
	c.Node(down).Kill()
	t.Logf("node %d, the active controller, killed right after the alter answered", down)
	live := others(c, down)
	ask := c.Node(live[0])
	if ask.ID == via.ID {
		ask = c.Node(live[1])
	}

	// 2a. Its own value, sent while the survivors elect a controller.
	alterBrokerConfigs(t, viaCl, fmt.Sprintf("set message.max.bytes=100000 for the down node %d", down),
		brokerConfigOp{strconv.Itoa(int(down)), "message.max.bytes", "100000", kmsg.IncrementalAlterConfigOpSet})
	next := waitNewController(t, c, ask.ID, down)
	t.Logf("node %d became the active controller", next)

	waitLeadersOtherThan(t, newNodeClient(t, ask.Addr), topic, partitions, down)
	for _, id := range live {
		waitBrokerConfig(t, c.Node(id), "message.max.bytes", "600", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	}
	probes.expectTooLarge(t, allPartitions(partitions), 2000, "message.max.bytes=600 after the failover")

	// 2b. A new cluster default, the node still down.
	alterBrokerConfigs(t, viaCl, "set the cluster default message.max.bytes=700",
		brokerConfigOp{"", "message.max.bytes", "700", kmsg.IncrementalAlterConfigOpSet})
	for _, id := range live {
		waitBrokerConfig(t, c.Node(id), "message.max.bytes", "700", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	}
	probes.expectTooLarge(t, allPartitions(partitions), 2000, "message.max.bytes=700 with node "+strconv.Itoa(int(down))+" down")
	l.waitAcks(t, 100, "writes going on without node "+strconv.Itoa(int(down)))

	// 3. The node back: its own value wins over the default, in the partitions it leads.
	c.StartAgain(t, down)
	n := c.Node(down)
	waitBrokerConfig(t, n, "message.max.bytes", "100000", kmsg.ConfigSourceDynamicBrokerConfig)
	if v, src, syn, err := describeBrokerConfig(t, n, strconv.Itoa(int(down)), "message.max.bytes"); err != nil ||
		!slices.Contains(syn, configSynonym{"message.max.bytes", "700", kmsg.ConfigSourceDynamicDefaultBrokerConfig}) {
		t.Errorf("node %d describes message.max.bytes=%s (%v) with synonyms %v, %v; want the cluster default 700 among them",
			down, v, src, syn, err)
	}
	waitBrokerConfigOn(t, n, "", "message.max.bytes", "700", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	cl := newNodeClient(t, n.Addr)
	waitFullISR(t, cl, topic, partitions, 60*time.Second)
	led := leadAgain(t, c, cl, topic, partitions, down)
	// A broker that leads none of them says NOT_LEADER_OR_FOLLOWER to 2,000 bytes,
	// not MESSAGE_TOO_LARGE by its own limit: a client with metadata from before the
	// election must learn to go to the leader, not fail the record.
	for _, p := range led {
		value := fmt.Sprintf("%-2000s", fmt.Sprintf("raw-%d", p)) // its own value, were it written
		if err := produceRawTo(t, viaCl, topic, p, value, 10*time.Second); !errors.Is(err, kerr.NotLeaderForPartition) {
			t.Errorf("partition %d, led by %d: 2000 bytes to node %d answered %v, want NOT_LEADER_OR_FOLLOWER", p, down, via.ID, err)
		}
	}
	probes.expectAccepted(t, led, 2000, fmt.Sprintf("node %d's own message.max.bytes=100000", down))
	probes.expectTooLarge(t, notIn(allPartitions(partitions), led), 2000, "the cluster default 700 on the other leaders")

	// 4. Its own value deleted: the cluster default again.
	alterBrokerConfigs(t, viaCl, fmt.Sprintf("delete node %d's message.max.bytes", down),
		brokerConfigOp{strconv.Itoa(int(down)), "message.max.bytes", "", kmsg.IncrementalAlterConfigOpDelete})
	waitBrokerConfig(t, n, "message.max.bytes", "700", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	probes.expectTooLarge(t, led, 2000, fmt.Sprintf("node %d back on the cluster default 700", down))

	// 5. History.
	l.waitAcks(t, 100, "writes after the per-broker value was deleted")
	h := l.stop(t)
	h.check(t, c, topic)
	inv.check()
}

type brokerConfigOp struct {
	resource, name, value string
	op                    kmsg.IncrementalAlterConfigOp
}

// alterBrokerConfigs sends IncrementalAlterConfigs for op to cl's node until it answers
// something other than a retriable error (an election may be under way), and fails the
// test unless that answer is success.
func alterBrokerConfigs(t *testing.T, cl *nodeClient, what string, op brokerConfigOp) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, op.resource
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Op = op.name, op.op
	if op.op != kmsg.IncrementalAlterConfigOpDelete {
		cfg.Value = kmsg.StringPtr(op.value)
	}
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	ctx := ctxT(t, 60*time.Second)
	for {
		r, err := cl.request(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		rr := r.(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
		err = kerr.ErrorForCode(rr.ErrorCode)
		if err == nil {
			return
		}
		if !kerr.IsRetriable(err) || ctx.Err() != nil {
			t.Fatalf("%s: %v %s", what, err, deref(rr.ErrorMessage))
		}
		t.Logf("%s: %v %s (retrying)", what, err, deref(rr.ErrorMessage))
		time.Sleep(100 * time.Millisecond) // a retry backoff, as a client's
	}
}

type configSynonym struct {
	name, value string
	source      kmsg.ConfigSource
}

// describeBrokerConfig asks node n for one config of a broker resource, with its
// synonyms.
func describeBrokerConfig(t *testing.T, n *testutil.Node, resource, name string) (string, kmsg.ConfigSource, []configSynonym, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = kmsg.ConfigResourceTypeBroker, resource, []string{name}
	req.Resources = append(req.Resources, res)
	r, err := newNodeClient(t, n.Addr).request(ctxT(t, 10*time.Second), req)
	if err != nil {
		return "", 0, nil, err
	}
	rr := r.(*kmsg.DescribeConfigsResponse).Resources[0]
	if err := kerr.ErrorForCode(rr.ErrorCode); err != nil {
		return "", 0, nil, fmt.Errorf("%w: %s", err, deref(rr.ErrorMessage))
	}
	if len(rr.Configs) != 1 {
		return "", 0, nil, fmt.Errorf("%d configs described for %s, want 1", len(rr.Configs), name)
	}
	var syn []configSynonym
	for _, s := range rr.Configs[0].ConfigSynonyms {
		syn = append(syn, configSynonym{s.Name, deref(s.Value), s.Source})
	}
	return deref(rr.Configs[0].Value), rr.Configs[0].Source, syn, nil
}

// waitBrokerConfig waits until node n describes name on itself with value and source.
func waitBrokerConfig(t *testing.T, n *testutil.Node, name, value string, source kmsg.ConfigSource) {
	t.Helper()
	waitBrokerConfigOn(t, n, strconv.Itoa(int(n.ID)), name, value, source)
}

// waitBrokerConfigOn waits until node n describes name on the broker resource with
// value and source.
func waitBrokerConfigOn(t *testing.T, n *testutil.Node, resource, name, value string, source kmsg.ConfigSource) {
	t.Helper()
	last := ""
	testutil.WaitFor(t, 30*time.Second, func() bool {
		v, src, _, err := describeBrokerConfig(t, n, resource, name)
		if now := fmt.Sprintf("%s=%s (%v) %v", name, v, src, err); now != last {
			t.Logf("node %d describes on broker resource %q: %s", n.ID, resource, now)
			last = now
		}
		return err == nil && v == value && src == source
	}, fmt.Sprintf("node %d describing %s=%s (%v) on broker resource %q", n.ID, name, value, source, resource))
}

// leadAgain moves the leaderships of topic back to their preferred replicas and
// returns the partitions node leads then, once every node of c says so.
func leadAgain(t *testing.T, c *testutil.Cluster, cl *nodeClient, topic string, partitions, node int32) []int32 {
	t.Helper()
	adm := kadm.NewClient(cl.cl)
	var led []int32
	testutil.WaitFor(t, 30*time.Second, func() bool {
		set := kadm.TopicsSet{}
		set.Add(topic, allPartitions(partitions)...)
		res, err := adm.ElectLeaders(ctxT(t, 10*time.Second), kadm.ElectPreferredReplica, set)
		if err != nil {
			t.Logf("ElectLeaders: %v (retrying)", err)
		}
		for _, r := range res[topic] {
			if r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) {
				t.Logf("ElectLeaders %s-%d: %v %s", topic, r.Partition, r.Err, r.ErrMessage)
			}
		}
		led = ledBy(t, cl, topic, node)
		return len(led) > 0
	}, fmt.Sprintf("node %d leading a partition of %s again", node, topic))
	// The brokers that led them before must know they do no more: one that has not
	// applied the election yet would still take a produce, under its own limit.
	for _, n := range c.Nodes() {
		ncl := newNodeClient(t, n.Addr)
		for _, p := range led {
			waitPartition(t, ncl, topic, p, 30*time.Second, fmt.Sprintf("node %d led by %d", n.ID, node),
				func(m kmsg.MetadataResponseTopicPartition) bool { return m.Leader == node })
		}
	}
	return led
}

func allPartitions(n int32) []int32 {
	var out []int32
	for p := range n {
		out = append(out, p)
	}
	return out
}

func notIn(all, some []int32) []int32 {
	var out []int32
	for _, p := range all {
		if !slices.Contains(some, p) {
			out = append(out, p)
		}
	}
	return out
}

// probeClient produces single uncompressed records of a given size, each with a value
// of its own (the history check reads them back as records nobody acknowledged to it).
type probeClient struct {
	cl *kgo.Client
	n  atomic.Int64
}

func newProbeClient(t *testing.T, c *testutil.Cluster, topic string) *probeClient {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BrokerAddrs()...), kgo.ProducerLinger(0), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &probeClient{cl: cl}
}

func (p *probeClient) produce(t *testing.T, partition int32, size int) error {
	value := make([]byte, size)
	copy(value, fmt.Sprintf("probe-%d-%d", partition, p.n.Add(1)))
	return p.cl.ProduceSync(ctxT(t, 30*time.Second), &kgo.Record{Partition: partition, Value: value}).FirstErr()
}

// expectTooLarge waits until a record of size is refused as MESSAGE_TOO_LARGE in each
// partition: a leader follows the metadata image it has, which may lag the describe
// of another broker by a moment.
func (p *probeClient) expectTooLarge(t *testing.T, partitions []int32, size int, what string) {
	t.Helper()
	for _, part := range partitions {
		testutil.WaitFor(t, 30*time.Second, func() bool {
			err := p.produce(t, part, size)
			if !errors.Is(err, kerr.MessageTooLarge) {
				t.Logf("%s: partition %d answered %d bytes with %v", what, part, size, err)
			}
			return errors.Is(err, kerr.MessageTooLarge)
		}, fmt.Sprintf("%s: partition %d refusing %d bytes as MESSAGE_TOO_LARGE", what, part, size))
	}
}

// expectAccepted fails the test unless a record of size is acknowledged in each
// partition.
func (p *probeClient) expectAccepted(t *testing.T, partitions []int32, size int, what string) {
	t.Helper()
	for _, part := range partitions {
		if err := p.produce(t, part, size); err != nil {
			t.Errorf("%s: partition %d refused %d bytes: %v", what, part, size, err)
		}
	}
}
