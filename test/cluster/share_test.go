package cluster

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestClusterShareGroupStateFailover: KIP-932 share consumers on a three-node cluster
// whose topic partitions are led by other nodes than the __share_group_state
// partitions keeping their state, so the leaders read and write it with the share
// coordinator's requests. Three consumers accept every record while a producer
// writes; then the share coordinator of a partition led elsewhere is killed with
// kill -9 while they run; its state partition moves to another replica.
//
// What the test holds the cluster to, from the consumers' ledger of every delivery
// and every acknowledgement the broker confirmed (a ShareAckCallback result without
// error after FlushAcks):
//   - before the kill nothing fails: every record is delivered once and its ACCEPT
//     confirmed;
//   - no record's ACCEPT is confirmed twice — a confirmed acknowledgement is durable,
//     across the failover of the state's coordinator (which must read it back from
//     the replicated log) and of the topic partitions the killed node led: a record
//     delivered again after it would be acquired by that consumer and its ACCEPT
//     confirmed once more;
//   - in the end every record produced is done: each partition's share-partition
//     start offset reaches its high watermark with no lag, and as the consumers only
//     ever accept and no record comes near the delivery count limit, done means
//     accepted; every record acknowledged by the producer was delivered.
//
// What it allows, as KIP-932 does (at-least-once delivery): a record whose ACCEPT was
// not confirmed — the broker refused it while the coordinator was unreachable (the
// change is undone and the consumer sends it again, possibly after its acquisition
// lock expired), or its answer was lost with the killed node — may be delivered again
// and accepted again; such a record may also end up accepted without any ACCEPT
// confirmed (the write was durable but its answer lost). A consumer may be handed a
// record after another consumer's ACCEPT of it was confirmed, when it acquired it
// before from the killed leader (franz-go buffers what it fetched ahead of a poll):
// its ACCEPT is then refused, which the first rule checks.
func TestClusterShareGroupStateFailover(t *testing.T) {
	t.Parallel()
	c := testutil.StartCluster(t, testutil.ClusterOptions{Overrides: shareOverrides})
	inv := watchInvariants(t, c)
	const topic, partitions = "shared", 6
	admin := newNodeClient(t, c.Node(1).Addr)
	createTopic(t, admin, topic, partitions, 3)

	groupID, layout := pickShareGroup(t, admin, topic, partitions)
	victim, statePartition := layout.victim()
	t.Logf("group %s: topic leaders %v, share coordinators %v; killing node %d, share coordinator of %s-%d (led by %d)",
		groupID, layout.leaders, layout.coordinators, victim, topic, statePartition, layout.leaders[statePartition])
	checkShareStateReplicas(t, admin)
	checkNotCoordinator(t, c, groupID, layout, statePartition)
	// Records produced before a share partition is first used count too.
	setShareGroupConfig(t, c, admin, groupID, "share.auto.offset.reset", "earliest")

	led := newShareLedger()
	gate := &holdGate{}
	addrs := c.BrokerAddrs()
	consumers := startShareConsumers(t, addrs, groupID, topic, led, gate, nil)
	p := startShareProducer(t, addrs, topic, led)

	led.waitConfirmed(t, 1500, 90*time.Second, "1500 records accepted before the kill")
	if redelivered, unconfirmed := led.faults(); redelivered > 0 || unconfirmed > 0 {
		t.Fatalf("before any fault: %d records delivered more than once, %d accepts not confirmed", redelivered, unconfirmed)
	}
	// The kill comes while every consumer holds records it has not acknowledged yet:
	// their acknowledgements go out after it, to the killed node or through it.
	gate.arm()
	testutil.WaitFor(t, 30*time.Second, func() bool { return gate.holding() == len(consumers) }, "every consumer holding records")
	before := led.confirmedCount()
	t.Logf("%d records accepted before the kill; kill -9 node %d", before, victim)
	killed := led.mark()
	c.Node(victim).Kill()
	gate.release()
	survivor := clientExcept(t, c, victim)
	key := shareKey(groupID, layout.topicID, statePartition)
	testutil.WaitFor(t, 60*time.Second, func() bool {
		node, err := findShareCoordinator(ctxT(t, 5*time.Second), survivor, key)
		return err == nil && node != victim
	}, "another node to become the share coordinator of "+key)
	led.waitConfirmed(t, before+1500, 120*time.Second, "1500 more records accepted after the kill")
	testutil.WaitFor(t, 60*time.Second, func() bool { return led.confirmedSince(killed, statePartition) > 0 },
		fmt.Sprintf("records of %s-%d accepted through its new share coordinator", topic, statePartition))

	var survivors []string
	for _, n := range c.Nodes() {
		if n.ID != victim {
			survivors = append(survivors, n.Addr)
		}
	}
	endShareTest(t, c, p, consumers, led, inv, survivors, groupID, topic, partitions)
}

// shareDeliveryLimit is the share groups' delivery count limit in these tests
// (group.share.delivery.count.limit; no test group sets share.delivery.count.limit).
const shareDeliveryLimit = 10

// shareLockDuration is the acquisition lock of the share group tests' groups.
const shareLockDuration = 10 * time.Second

// shareOverrides are the share group tests' cluster settings: few coordinator
// partitions, and sessions, locks and delivery counts that outlast the faults.
var shareOverrides = []string{
	"offsets.topic.num.partitions=6",
	"share.coordinator.state.topic.num.partitions=6",
	"group.share.min.heartbeat.interval.ms=500",
	"group.share.heartbeat.interval.ms=500",
	"group.share.min.session.timeout.ms=10000",
	"group.share.session.timeout.ms=10000",
	fmt.Sprintf("group.share.min.record.lock.duration.ms=%d", shareLockDuration.Milliseconds()),
	fmt.Sprintf("group.share.record.lock.duration.ms=%d", shareLockDuration.Milliseconds()),
	fmt.Sprintf("group.share.delivery.count.limit=%d", shareDeliveryLimit),
	"min.insync.replicas=2",
}

// startShareConsumers starts three share consumers m0–m2 of groupID, each
// bootstrapping through another node first. With mix, each mixes RELEASE and RENEW
// into its acknowledgements (shareMix), drawing from a source seeded with mix.seed
// and its index.
func startShareConsumers(t *testing.T, addrs []string, groupID, topic string, led *shareLedger, gate *holdGate, mix *shareMix) []*shareConsumer {
	t.Helper()
	var consumers []*shareConsumer
	for i := range 3 {
		seeds := append(slices.Clone(addrs[i:]), addrs[:i]...)
		var rng *rand.Rand
		if mix != nil {
			rng = rand.New(rand.NewPCG(mix.seed, uint64(i)+1))
		}
		consumers = append(consumers, startShareConsumer(t, fmt.Sprintf("m%d", i), seeds, groupID, topic, led, gate, rng))
	}
	return consumers
}

// shareLayout is who leads a topic's partitions and their share state.
type shareLayout struct {
	topicID      [16]byte
	leaders      map[int32]int32 // partition → leader
	coordinators map[int32]int32 // partition → share coordinator (state partition leader)
	controller   int32
}

// victim picks a share coordinator of a partition led by another node, preferring one
// that is not the active controller, and that partition.
func (l shareLayout) victim() (node, partition int32) {
	node, partition = -1, -1
	for p := range int32(len(l.leaders)) {
		if l.leaders[p] == l.coordinators[p] {
			continue
		}
		if node < 0 || node == l.controller && l.coordinators[p] != l.controller {
			node, partition = l.coordinators[p], p
		}
	}
	return node, partition
}

func (l shareLayout) remote() int {
	n := 0
	for p, leader := range l.leaders {
		if l.coordinators[p] != leader {
			n++
		}
	}
	return n
}

// pickShareGroup finds a group id whose share state lies mostly on other nodes than
// the topic partitions (FindCoordinator v6 with share keys, which also creates
// __share_group_state).
func pickShareGroup(t *testing.T, cl *nodeClient, topic string, partitions int32) (string, shareLayout) {
	t.Helper()
	var md *kmsg.MetadataResponse
	testutil.WaitFor(t, 30*time.Second, func() bool {
		var err error
		md, err = cl.metadata(ctxT(t, 5*time.Second))
		return err == nil && len(partitionsOf(md, topic)) == int(partitions)
	}, "the metadata of "+topic)
	l := shareLayout{leaders: map[int32]int32{}, controller: activeController(t, cl)}
	for _, mt := range md.Topics {
		if mt.Topic != nil && *mt.Topic == topic {
			l.topicID = mt.TopicID
		}
	}
	for _, p := range partitionsOf(md, topic) {
		l.leaders[p.Partition] = p.Leader
	}
	for i := range 20 {
		groupID := fmt.Sprintf("share-%d", i)
		l.coordinators = map[int32]int32{}
		for p := range partitions {
			key := shareKey(groupID, l.topicID, p)
			testutil.WaitFor(t, 60*time.Second, func() bool {
				node, err := findShareCoordinator(ctxT(t, 10*time.Second), cl, key)
				l.coordinators[p] = node
				return err == nil
			}, "the share coordinator of "+key)
		}
		if l.remote() >= 3 {
			return groupID, l
		}
	}
	t.Fatalf("no group id of 20 has its share state mostly away from the topic's leaders %v", l.leaders)
	return "", l
}

// setShareGroupConfig sets a group config (IncrementalAlterConfigs, forwarded to the
// active controller) and waits until every node describes it.
func setShareGroupConfig(t *testing.T, c *testutil.Cluster, cl *nodeClient, groupID, name, value string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, groupID
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = name, kmsg.StringPtr(value)
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	r, err := cl.request(ctxT(t, 20*time.Second), req)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(r.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode); err != nil {
		t.Fatalf("IncrementalAlterConfigs %s=%s: %v", name, value, err)
	}
	for _, n := range c.Nodes() {
		nc := newNodeClient(t, n.Addr)
		testutil.WaitFor(t, 20*time.Second, func() bool {
			d := kmsg.NewPtrDescribeConfigsRequest()
			dr := kmsg.NewDescribeConfigsRequestResource()
			dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, groupID
			d.Resources = append(d.Resources, dr)
			r, err := nc.request(ctxT(t, 5*time.Second), d)
			if err != nil {
				return false
			}
			for _, res := range r.(*kmsg.DescribeConfigsResponse).Resources {
				for _, c := range res.Configs {
					if c.Name == name && c.Value != nil && *c.Value == value {
						return true
					}
				}
			}
			return false
		}, fmt.Sprintf("node %d to describe %s=%s", n.ID, name, value))
	}
}

// shareKey is Kafka's share-coordinator key.
func shareKey(groupID string, topicID [16]byte, partition int32) string {
	return fmt.Sprintf("%s:%s:%d", groupID, base64.RawURLEncoding.EncodeToString(topicID[:]), partition)
}

// findShareCoordinator asks FindCoordinator v6 for a share key's coordinator.
func findShareCoordinator(ctx context.Context, cl *nodeClient, key string) (int32, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.SetVersion(6)
	req.CoordinatorType = 2
	req.CoordinatorKeys = []string{key}
	r, err := cl.request(ctx, req)
	if err != nil {
		return -1, err
	}
	resp := r.(*kmsg.FindCoordinatorResponse)
	if len(resp.Coordinators) != 1 {
		return -1, fmt.Errorf("FindCoordinator answered %d coordinators", len(resp.Coordinators))
	}
	co := resp.Coordinators[0]
	return co.NodeID, kerr.ErrorForCode(co.ErrorCode)
}

// checkNotCoordinator sends ReadShareGroupState for a share partition to every node:
// its coordinator answers (no state yet), the others NOT_COORDINATOR once their
// metadata holds the state topic.
func checkNotCoordinator(t *testing.T, c *testutil.Cluster, groupID string, l shareLayout, partition int32) {
	t.Helper()
	read := func(n *testutil.Node) (kmsg.ReadShareGroupStateResponseTopicPartition, error) {
		req := kmsg.NewPtrReadShareGroupStateRequest()
		req.GroupID = groupID
		rt := kmsg.NewReadShareGroupStateRequestTopic()
		rt.TopicID = l.topicID
		rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch = partition, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		r, err := newNodeClient(t, n.Addr).request(ctxT(t, 10*time.Second), req)
		if err != nil {
			return kmsg.ReadShareGroupStateResponseTopicPartition{}, err
		}
		return r.(*kmsg.ReadShareGroupStateResponse).Topics[0].Partitions[0], nil
	}
	for _, n := range c.Nodes() {
		if n.ID == l.coordinators[partition] {
			// Its own metadata may make it the leader a moment after FindCoordinator
			// (answered from another node's) named it.
			var got kmsg.ReadShareGroupStateResponseTopicPartition
			testutil.WaitFor(t, 20*time.Second, func() bool {
				var err error
				got, err = read(n)
				return err == nil && got.ErrorCode == 0
			}, fmt.Sprintf("node %d to serve ReadShareGroupState as the share coordinator", n.ID))
			if got.StartOffset != -1 {
				t.Fatalf("ReadShareGroupState on the coordinator, node %d: %v start %d", n.ID, kerr.ErrorForCode(got.ErrorCode), got.StartOffset)
			}
			continue
		}
		// A node whose metadata does not hold __share_group_state yet (FindCoordinator
		// created it through another node) answers COORDINATOR_NOT_AVAILABLE, which
		// clients retry; it must never serve.
		var got kmsg.ReadShareGroupStateResponseTopicPartition
		var err error
		testutil.WaitFor(t, 20*time.Second, func() bool {
			got, err = read(n)
			return err != nil || got.ErrorCode != kerr.CoordinatorNotAvailable.Code
		}, fmt.Sprintf("node %d to know the share coordinator's partitions", n.ID))
		if err != nil || got.ErrorCode != kerr.NotCoordinator.Code {
			t.Fatalf("ReadShareGroupState on node %d (coordinator %d): %v %v", n.ID, l.coordinators[partition], err, kerr.ErrorForCode(got.ErrorCode))
		}
	}
}

// checkShareStateReplicas checks that __share_group_state has three replicas per
// partition (share.coordinator.state.topic.replication.factor), so its state
// survives the loss of a node.
func checkShareStateReplicas(t *testing.T, cl *nodeClient) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("__share_group_state")
	req.Topics = append(req.Topics, rt)
	r, err := cl.request(ctxT(t, 10*time.Second), req)
	if err != nil {
		t.Fatal(err)
	}
	parts := partitionsOf(r.(*kmsg.MetadataResponse), "__share_group_state")
	if len(parts) != 6 {
		t.Fatalf("__share_group_state has %d partitions, want 6", len(parts))
	}
	for _, p := range parts {
		if len(p.Replicas) != 3 {
			t.Fatalf("__share_group_state-%d has replicas %v, want 3 (share.coordinator.state.topic.replication.factor)", p.Partition, p.Replicas)
		}
	}
}

// endShareTest ends a share group test: the producer stops, every record of topic's
// partitions is done for groupID (asked through addrs), the consumers stop, and the
// share ledger, the history and the metadata invariants are checked.
func endShareTest(t *testing.T, c *testutil.Cluster, p *shareProducer, consumers []*shareConsumer, led *shareLedger, inv *invariants,
	addrs []string, groupID, topic string, partitions int32) {
	t.Helper()
	h := p.stop(t)
	waitShareDone(t, addrs, groupID, topic, partitions)
	for _, sc := range consumers {
		sc.stop()
	}
	led.check(t, h)
	h.check(t, c, topic)
	inv.check()
}

// waitShareDone waits until every partition's share-partition start offset reached
// its high watermark with no lag (DescribeShareGroupOffsets v1, ListOffsets).
func waitShareDone(t *testing.T, addrs []string, groupID, topic string, partitions int32) {
	t.Helper()
	kc, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	var last string
	testutil.WaitFor(t, 120*time.Second, func() bool {
		ends, err := listEnds(ctxT(t, 10*time.Second), kc, topic, partitions)
		if err != nil {
			last = err.Error()
			return false
		}
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		rg.GroupID = groupID
		rtp := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
		rtp.Topic = topic
		for p := range partitions {
			rtp.Partitions = append(rtp.Partitions, p)
		}
		rg.Topics = append(rg.Topics, rtp)
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(ctxT(t, 10*time.Second), kc)
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || len(resp.Groups[0].Topics) != 1 {
			last = fmt.Sprintf("DescribeShareGroupOffsets: %v %+v", err, resp)
			return false
		}
		var state []string
		done := true
		for _, p := range resp.Groups[0].Topics[0].Partitions {
			state = append(state, fmt.Sprintf("%d: start %d hw %d lag %d err %d", p.Partition, p.StartOffset, ends[p.Partition], p.Lag, p.ErrorCode))
			if p.ErrorCode != 0 || p.StartOffset != ends[p.Partition] || p.Lag != 0 {
				done = false
			}
		}
		last = strings.Join(state, "; ")
		return done && len(state) == int(partitions)
	}, "every record of the topic done by the share group")
	t.Logf("share group %s done: %s", groupID, last)
}

func listEnds(ctx context.Context, cl *kgo.Client, topic string, partitions int32) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, err
			}
			out[p.Partition] = p.Offset
		}
	}
	return out, nil
}

// shareLedger records what the share consumers were given and what the broker
// confirmed, each event numbered in the order this process saw it.
type shareLedger struct {
	mu         sync.Mutex
	seq        int64
	deliveries map[string][]shareDelivery
	confirmed  map[string][]shareConfirm // value → its confirmed ACCEPTs, in order
	attempts   map[string]int            // value → ACCEPTs sent
	progress   chan struct{}             // a non-blocking nudge per confirmation round
	// RELEASE and RENEW (the soak's shareMix):
	releases    map[string][]shareDelivery // value → the deliveries whose RELEASE was confirmed (at: when)
	inFlight    map[string]int             // value → RELEASEs sent and not answered yet
	renewals    map[string]int             // value → RENEWs confirmed
	releaseSent int
	renewSent   int
}

type shareDelivery struct {
	member    string
	partition int32
	offset    int64
	count     int32
	at        int64
	fetched   time.Time // when the client read the fetch that acquired it
}

// shareConfirm is a confirmed ACCEPT: when the ledger noted it (at, and the time, just
// after the confirmation), and the member and delivery (its at) it was sent for.
type shareConfirm struct {
	at       int64
	noted    time.Time
	delivery int64
	member   string
}

func newShareLedger() *shareLedger {
	return &shareLedger{deliveries: map[string][]shareDelivery{}, confirmed: map[string][]shareConfirm{},
		attempts: map[string]int{}, progress: make(chan struct{}, 1),
		releases: map[string][]shareDelivery{}, inFlight: map[string]int{}, renewals: map[string]int{}}
}

// delivered notes a poll's records and returns the delivery's at.
func (l *shareLedger) delivered(member string, recs []*kgo.Record) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	for _, r := range recs {
		v := string(r.Value)
		// franz-go's deadline is the fetch's arrival plus the group's lock.
		fetched := r.AcquisitionDeadline().Add(-shareLockDuration)
		l.deliveries[v] = append(l.deliveries[v], shareDelivery{member, r.Partition, r.Offset, r.DeliveryCount(), l.seq, fetched})
	}
	return l.seq
}

// accepted notes member's ACCEPTs of delivery's recs: confirmed unless their partition
// failed.
func (l *shareLedger) accepted(member string, delivery int64, recs []*kgo.Record, confirmed func(partition int32) bool) {
	noted := time.Now()
	l.mu.Lock()
	l.seq++
	for _, r := range recs {
		v := string(r.Value)
		l.attempts[v]++
		if confirmed(r.Partition) {
			l.confirmed[v] = append(l.confirmed[v], shareConfirm{at: l.seq, noted: noted, delivery: delivery, member: member})
		}
	}
	l.mu.Unlock()
	select {
	case l.progress <- struct{}{}:
	default:
	}
}

// releasing notes RELEASEs about to be sent (checkClean allows their records a
// delivery more while they are in flight).
func (l *shareLedger) releasing(recs []*kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range recs {
		l.inFlight[string(r.Value)]++
	}
}

// released notes the answers to RELEASEs of member's recs: confirmed unless their
// partition failed.
func (l *shareLedger) released(member string, recs []*kgo.Record, confirmed func(partition int32) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	for _, r := range recs {
		v := string(r.Value)
		l.inFlight[v]--
		l.releaseSent++
		if confirmed(r.Partition) {
			l.releases[v] = append(l.releases[v], shareDelivery{member: member, partition: r.Partition, offset: r.Offset, count: r.DeliveryCount(), at: l.seq})
		}
	}
}

// renewed notes the answers to RENEWs of recs.
func (l *shareLedger) renewed(recs []*kgo.Record, confirmed func(partition int32) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	for _, r := range recs {
		l.renewSent++
		if confirmed(r.Partition) {
			l.renewals[string(r.Value)]++
		}
	}
}

// checkClean fails t unless nothing went wrong so far, as before any fault: every
// acknowledgement answered (ACCEPT, RELEASE, RENEW) was confirmed, and no record was
// delivered more times than its RELEASEs, confirmed or still in flight, explain.
func (l *shareLedger) checkClean(t *testing.T, what string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var problems []string
	accepts, releases, renewals := 0, 0, 0
	for v, ds := range l.deliveries {
		accepts += l.attempts[v] - len(l.confirmed[v])
		releases += len(l.releases[v])
		renewals += l.renewals[v]
		if len(ds) > 1+len(l.releases[v])+l.inFlight[v] {
			problems = append(problems, fmt.Sprintf("%s delivered %d times, %d RELEASEs confirmed: %+v", v, len(ds), len(l.releases[v]), ds))
		}
	}
	if accepts > 0 || releases < l.releaseSent || renewals < l.renewSent {
		problems = append(problems, fmt.Sprintf("%d ACCEPTs, %d of %d RELEASEs and %d of %d RENEWs not confirmed",
			accepts, l.releaseSent-releases, l.releaseSent, l.renewSent-renewals, l.renewSent))
	}
	slices.Sort(problems)
	if len(problems) > 20 {
		problems = append(problems[:20], fmt.Sprintf("… and %d more", len(problems)-20))
	}
	if len(problems) > 0 {
		t.Fatalf("%s: share ledger not clean:\n%s", what, strings.Join(problems, "\n"))
	}
	t.Logf("%s: share ledger clean: %d records delivered, %d ACCEPTs, %d RELEASEs, %d RENEWs confirmed",
		what, len(l.deliveries), len(l.confirmed), releases, renewals)
}

// mark returns the ledger's clock now.
func (l *shareLedger) mark() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	return l.seq
}

// confirmedSince counts the records of partition whose ACCEPT was confirmed after at.
func (l *shareLedger) confirmedSince(at int64, partition int32) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for v, conf := range l.confirmed {
		if ds := l.deliveries[v]; len(ds) > 0 && ds[0].partition == partition && conf[len(conf)-1].at > at {
			n++
		}
	}
	return n
}

func (l *shareLedger) confirmedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.confirmed)
}

// faults counts records delivered more than once and ACCEPTs not confirmed.
func (l *shareLedger) faults() (redelivered, unconfirmed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for v, ds := range l.deliveries {
		if len(ds) > 1 {
			redelivered++
		}
		unconfirmed += l.attempts[v] - len(l.confirmed[v])
	}
	return redelivered, unconfirmed
}

func (l *shareLedger) waitConfirmed(t *testing.T, n int, d time.Duration, what string) {
	t.Helper()
	testutil.WaitFor(t, d, func() bool { return l.confirmedCount() >= n }, what)
}

// check holds the ledger to what the test promises (see its comment), and, where the
// consumers released and renewed records (shareMix), to these rules:
//
//   - a RELEASE confirmed for a delivery of a record with delivery count c makes it
//     available again: unless c reached the delivery count limit (the record is then
//     archived), the record is delivered again — the ledger holds a delivery of it
//     with a count above c. Counts, not the ledger's clock: another member may be
//     handed the record before the releasing consumer's FlushAcks returns. A higher
//     count is what a later acquisition brings (ReleaseMember lowers the count of a
//     record held by a member that left, but only back to what it was before that
//     member acquired it, which after the release is c at least). Should the RELEASE
//     have applied to a later acquisition of the same member (its lock had expired
//     and its client acquired the record again before the RELEASE arrived), that one
//     had a count above c, and the next one more still. The record must be done in
//     the end, and done without a delivery means archived at the limit, which the
//     delivery count check below rules out.
//   - a record whose RENEW and then ACCEPT were confirmed is held to the ACCEPT rule
//     only (confirmed at most once). The sharper rule — the renewal kept the lock, so
//     no other member was handed the record between the two — cannot be stated under
//     these faults: locks are not durable, so a leader's failover or a member's lost
//     session hands the record to another member before the renewed lock ends, and
//     that is right; and a confirmed ACCEPT does not say which acquisition it applied
//     to (an ACCEPT names offsets): if the member's lock expired while its poll sat in
//     its buffer or its acknowledgement waited on a stopped node, another member may
//     have been handed the record and given it back, and the member acquired it again
//     before its RENEW and ACCEPT arrived, both then rightly confirmed. That a RENEW
//     restarts the lock is checked where nothing else can end it: before the first
//     fault (renewPastDeadline, checkClean).
func (l *shareLedger) check(t *testing.T, h *history) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var problems []string
	maxCount := int32(0)
	late := 0
	again := 0
	for v, ds := range l.deliveries {
		conf := l.confirmed[v]
		for _, c := range conf[min(1, len(conf)):] {
			if acceptedAgain(conf[0], c, ds) {
				again++
				continue
			}
			problems = append(problems, fmt.Sprintf("%s: ACCEPT confirmed %d times (deliveries %+v)", v, len(conf), ds))
			break
		}
		for _, d := range ds {
			maxCount = max(maxCount, d.count)
			if len(conf) > 0 && d.at > conf[0].at {
				late++ // acquired before, handed out of the client's buffer after
			}
		}
	}
	noConfirm := 0
	for v := range h.acked {
		if len(l.deliveries[v]) == 0 {
			problems = append(problems, fmt.Sprintf("%s acknowledged by the producer was never delivered", v))
		}
		if len(l.confirmed[v]) == 0 {
			noConfirm++
		}
	}
	if maxCount >= 8 {
		problems = append(problems, fmt.Sprintf("a record was delivered %d times: near the delivery count limit (%d), so done may not mean accepted", maxCount, shareDeliveryLimit))
	}
	releases := 0
	for v, rels := range l.releases {
		for _, rel := range rels {
			releases++
			if rel.count >= shareDeliveryLimit {
				continue // archived
			}
			if !slices.ContainsFunc(l.deliveries[v], func(d shareDelivery) bool { return d.count > rel.count }) {
				problems = append(problems, fmt.Sprintf("%s: RELEASE by %s of its delivery %d confirmed, and no delivery with a higher count followed (deliveries %+v)",
					v, rel.member, rel.count, l.deliveries[v]))
			}
		}
	}
	renewedAccepted, renewed := 0, 0
	for v, n := range l.renewals {
		renewed += n
		if n > 0 && len(l.confirmed[v]) > 0 {
			renewedAccepted++
		}
	}
	slices.Sort(problems)
	if len(problems) > 20 {
		problems = append(problems[:20], fmt.Sprintf("… and %d more", len(problems)-20))
	}
	redelivered, unconfirmed := 0, 0
	for v, ds := range l.deliveries {
		if len(ds) > 1 {
			redelivered++
		}
		unconfirmed += l.attempts[v] - len(l.confirmed[v])
	}
	if len(problems) > 0 {
		t.Fatalf("share ledger check failed:\n%s", strings.Join(problems, "\n"))
	}
	t.Logf("share ledger: %d records delivered, %d of them more than once (most deliveries of one record: %d), %d times polled after another delivery's ACCEPT was confirmed; %d ACCEPTs confirmed, %d not, %d confirmed again for a delivery its member fetched before its first ACCEPT was confirmed; %d records accepted without a confirmed ACCEPT; RELEASEs %d confirmed of %d sent; RENEWs %d confirmed of %d sent, %d renewed records' ACCEPT confirmed",
		len(l.deliveries), redelivered, maxCount, late, len(l.confirmed), unconfirmed, again, noConfirm, releases, l.releaseSent, renewed, l.renewSent, renewedAccepted)
}

// acceptedAgain reports whether a record's ACCEPT confirmed again (c), after its
// first (first), may be one the broker rightly confirmed: c was sent for a delivery
// the same member fetched before the first was confirmed. An ACCEPT names offsets, not
// an acquisition. Had the member's lock expired while the first delivery sat in its
// client's buffer (its acknowledgement waiting on a stopped node), its client could
// acquire the record again before the first ACCEPT reached the broker. That ACCEPT
// then applied to the new acquisition. The second, for the new delivery, named
// offsets already done, which the broker skips as Kafka does. A delivery fetched
// only after the first ACCEPT was confirmed cannot be so explained: the broker handed
// out a record it had been told was accepted.
func acceptedAgain(first, c shareConfirm, ds []shareDelivery) bool {
	i := slices.IndexFunc(ds, func(d shareDelivery) bool { return d.at == c.delivery && d.member == c.member })
	return i >= 0 && c.member == first.member && ds[i].fetched.Before(first.noted)
}

// holdGate holds the consumers, once armed, between getting records and acknowledging
// them, until released.
type holdGate struct {
	mu struct {
		sync.Mutex
		open    chan struct{} // nil unless armed
		holding int
	}
}

func (g *holdGate) arm() {
	g.mu.Lock()
	g.mu.open = make(chan struct{})
	g.mu.Unlock()
}

func (g *holdGate) holding() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.holding
}

func (g *holdGate) release() {
	g.mu.Lock()
	close(g.mu.open)
	g.mu.open, g.mu.holding = nil, 0
	g.mu.Unlock()
}

// wait blocks while the gate is armed (or until ctx ends).
func (g *holdGate) wait(ctx context.Context) {
	g.mu.Lock()
	open := g.mu.open
	if open != nil {
		g.mu.holding++
	}
	g.mu.Unlock()
	if open != nil {
		select {
		case <-open:
		case <-ctx.Done():
		}
	}
}

// shareConsumer is a franz-go share consumer that accepts every record it gets and
// flushes its acknowledgements after each poll — or, given a random source (the
// soak's shareMix), one poll in eight releases one or two of its records (only
// records delivered fewer than three times, so that releases alone never bring a
// record near the delivery count limit) and accepts the rest, and one in eight renews
// every record (FlushAcks: franz-go sends a RENEW in a ShareAcknowledge of its own,
// with IsRenewAck), then accepts them.
type shareConsumer struct {
	cancel context.CancelFunc
	done   chan struct{}
	cl     *kgo.Client
	once   sync.Once
}

// shareMix asks the consumers to mix RELEASE and RENEW into their acknowledgements.
type shareMix struct{ seed uint64 }

func startShareConsumer(t *testing.T, name string, seeds []string, groupID, topic string, led *shareLedger, gate *holdGate, rng *rand.Rand) *shareConsumer {
	t.Helper()
	cl, acks := newShareClient(t, name, seeds, groupID, topic, 50)
	ctx, cancel := context.WithCancel(context.Background())
	sc := &shareConsumer{cancel: cancel, done: make(chan struct{}), cl: cl}
	go func() {
		defer close(sc.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if fs.IsClientClosed() || ctx.Err() != nil {
				return
			}
			recs := fs.Records()
			if len(recs) == 0 {
				continue
			}
			delivery := led.delivered(name, recs)
			acks.logf("polled %s", pollSummary(recs))
			gate.wait(ctx)
			choice := 2 // accept all
			if rng != nil {
				choice = rng.IntN(8)
			}
			switch choice {
			case 0: // release one or two, accept the rest
				var release, rest []*kgo.Record
				n := 1 + rng.IntN(2)
				for _, i := range rng.Perm(len(recs)) {
					if len(release) < n && recs[i].DeliveryCount() < 3 {
						release = append(release, recs[i])
					} else {
						rest = append(rest, recs[i])
					}
				}
				led.releasing(release)
				// MarkAcks of no record would mark every record of the poll.
				confirmed := acks.flush(ctx, "RELEASE and ACCEPT", func() {
					if len(release) > 0 {
						cl.MarkAcks(kgo.AckRelease, release...)
					}
					if len(rest) > 0 {
						cl.MarkAcks(kgo.AckAccept, rest...)
					}
				})
				led.released(name, release, confirmed)
				led.accepted(name, delivery, rest, confirmed)
			case 1: // renew every record, then accept them
				confirmed := acks.flush(ctx, "RENEW", func() { cl.MarkAcks(kgo.AckRenew, recs...) })
				led.renewed(recs, confirmed)
				led.accepted(name, delivery, recs, acks.flush(ctx, "ACCEPT", func() { cl.MarkAcks(kgo.AckAccept, recs...) }))
			default:
				led.accepted(name, delivery, recs, acks.flush(ctx, "ACCEPT", func() { cl.MarkAcks(kgo.AckAccept, recs...) }))
			}
		}
	}()
	t.Cleanup(sc.stop)
	return sc
}

// pollSummary describes a poll's records for a client's log: per partition, the
// offsets and delivery counts of each run of consecutive offsets.
func pollSummary(recs []*kgo.Record) string {
	var b strings.Builder
	for i := 0; i < len(recs); {
		j := i + 1
		for j < len(recs) && recs[j].Partition == recs[i].Partition && recs[j].Offset == recs[j-1].Offset+1 &&
			recs[j].DeliveryCount() == recs[i].DeliveryCount() {
			j++
		}
		fmt.Fprintf(&b, " p%d:%d-%d(count %d)", recs[i].Partition, recs[i].Offset, recs[j-1].Offset, recs[i].DeliveryCount())
		i = j
	}
	return b.String()
}

// newShareClient is a franz-go share consumer of groupID taking up to maxRecords
// records a fetch, and what sends its acknowledgements. With testutil.LogDir, its
// debug log is kept if the test fails.
func newShareClient(t *testing.T, name string, seeds []string, groupID, topic string, maxRecords int32) (*kgo.Client, *shareAcker) {
	t.Helper()
	var clientLog *syncBuffer
	if testutil.LogDir != "" {
		clientLog = &syncBuffer{}
	}
	acks := &shareAcker{name: name, t: t, log: clientLog}
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds...), kgo.ShareGroup(groupID), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(200 * time.Millisecond), kgo.ShareMaxRecords(maxRecords),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.ShareAckCallback(acks.callback),
	}
	if clientLog != nil {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(clientLog, kgo.LogLevelDebug, func() string {
			return time.Now().Format("15:04:05.000 ")
		})))
		t.Cleanup(func() {
			if t.Failed() || testutil.KeepAlways {
				if path := testutil.KeepLog(t, name+".log", clientLog.String()); path != "" && t.Failed() {
					t.Logf("client log of %s kept in %s", name, path)
				}
			}
		})
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	acks.cl = cl
	return cl, acks
}

// renewPastDeadline starts a share consumer r0 of a group of its own, renewGroup,
// whose records are locked for renewLock only (so that the test waits little for a
// lock to end; the soak's group keeps long locks, which outlast its faults). r0
// takes the records of one poll, renews their acquisition locks halfway through, and
// accepts them once every one of those first locks ended: the ACCEPT goes through
// only if the RENEW restarted the locks. Run before any fault, when nothing else ends
// a lock early (under faults a failover or a lost session does, rightly). r0 stops
// fetching after its poll — were its locks to end, it must not acquire the records
// again itself (an acknowledgement names offsets, not an acquisition) — and leaves
// once it accepted. The returned func waits for r0 and fails t with what went wrong.
func renewPastDeadline(t *testing.T, c *testutil.Cluster, admin *nodeClient, topic string) (wait func()) {
	t.Helper()
	const name, renewGroup, renewLock = "r0", "renew-past-deadline", 5 * time.Second // margins of 2.5 s for the RENEW, 1.5 s for the ACCEPT
	setShareGroupConfig(t, c, admin, renewGroup, "share.record.lock.duration.ms", fmt.Sprint(renewLock.Milliseconds()))
	cl, acks := newShareClient(t, name, c.BrokerAddrs(), renewGroup, topic, 20)
	t.Cleanup(cl.Close)
	done, finished := make(chan string, 1), make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(func() { cancel(); <-finished }) // before cl.Close: no log after the test
	go func() {
		defer close(finished)
		defer cl.Close()
		var recs []*kgo.Record
		for len(recs) == 0 && ctx.Err() == nil {
			recs = cl.PollFetches(ctx).Records()
		}
		if len(recs) == 0 {
			done <- "r0 got no records"
			return
		}
		cl.PauseFetchTopics(topic)
		// Held: the records of the poll's first acquisitions (a poll may take the
		// records of several fetches, whose locks end at different times); the others
		// are accepted at once.
		first := slices.MinFunc(recs, func(a, b *kgo.Record) int { return a.AcquisitionDeadline().Compare(b.AcquisitionDeadline()) }).AcquisitionDeadline()
		var held, rest []*kgo.Record
		for _, r := range recs {
			if r.AcquisitionDeadline().Before(first.Add(renewLock / 10)) {
				held = append(held, r)
			} else {
				rest = append(rest, r)
			}
		}
		if len(rest) > 0 {
			acks.flush(ctx, "ACCEPT", func() { cl.MarkAcks(kgo.AckAccept, rest...) })
		}
		// The client's deadline is the response's arrival plus the lock duration: the
		// broker's came before it. What is waited for here is a moment, not a
		// condition: halfway through the locks, then past the end of every first one
		// (a fifth of the lock after it: the renewed ones end three tenths later).
		if !sleepUntil(ctx, first.Add(-renewLock/2)) {
			done <- "r0: " + ctx.Err().Error()
			return
		}
		renewAt := time.Now()
		confirmed := acks.flush(ctx, "RENEW", func() { cl.MarkAcks(kgo.AckRenew, held...) })
		if i := slices.IndexFunc(held, func(r *kgo.Record) bool { return !confirmed(r.Partition) }); i >= 0 {
			done <- fmt.Sprintf("r0: RENEW of %s-%d offset %d not confirmed", held[i].Topic, held[i].Partition, held[i].Offset)
			return
		}
		if !sleepUntil(ctx, first.Add(renewLock/5)) {
			done <- "r0: " + ctx.Err().Error()
			return
		}
		acceptAt := time.Now()
		confirmed = acks.flush(ctx, "ACCEPT", func() { cl.MarkAcks(kgo.AckAccept, held...) })
		if i := slices.IndexFunc(held, func(r *kgo.Record) bool { return !confirmed(r.Partition) }); i >= 0 {
			done <- fmt.Sprintf("r0: ACCEPT of renewed %s-%d offset %d, %v after its first lock ended, not confirmed",
				held[i].Topic, held[i].Partition, held[i].Offset, acceptAt.Sub(held[i].AcquisitionDeadline()).Round(time.Millisecond))
			return
		}
		t.Logf("r0: %d records (%s-%d offsets %d…, delivery count %d) renewed %v before their first lock's end, accepted %v after it",
			len(held), held[0].Topic, held[0].Partition, held[0].Offset, held[0].DeliveryCount(),
			first.Sub(renewAt).Round(time.Millisecond), acceptAt.Sub(first).Round(time.Millisecond))
		done <- ""
	}()
	return func() {
		t.Helper()
		if problem := <-done; problem != "" {
			t.Fatal(problem)
		}
	}
}

// sleepUntil waits until at, or until ctx ends (false).
func sleepUntil(ctx context.Context, at time.Time) bool {
	timer := time.NewTimer(time.Until(at))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// shareAcker sends a consumer's acknowledgements and tells which partitions' the
// broker confirmed.
type shareAcker struct {
	name   string
	t      *testing.T
	cl     *kgo.Client
	log    *syncBuffer // nil: not logged
	logged int         // failures logged (one consumer's goroutine)
	mu     struct {
		sync.Mutex
		results kgo.ShareAckResults
	}
}

func (a *shareAcker) callback(_ *kgo.Client, rs kgo.ShareAckResults) {
	a.mu.Lock()
	a.mu.results = append(a.mu.results, rs...)
	a.mu.Unlock()
	for _, r := range rs {
		a.logf("ack result: partition %d: %v", r.Partition, r.Err)
	}
}

func (a *shareAcker) logf(format string, args ...any) {
	if a.log != nil {
		fmt.Fprintf(a.log, "%s [TEST] %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
}

// flush marks acknowledgements (mark) and flushes them. It returns whether the
// broker confirmed a partition's: FlushAcks returned, and every result for that
// partition came back without error (a partition's acknowledgements are applied all
// or none; a partition with none confirmed nothing).
func (a *shareAcker) flush(ctx context.Context, what string, mark func()) (confirmed func(partition int32) bool) {
	a.mu.Lock()
	a.mu.results = nil
	a.mu.Unlock()
	mark()
	fctx, fcancel := context.WithTimeout(ctx, 90*time.Second)
	a.logf("FlushAcks of %s", what)
	flushErr := a.cl.FlushAcks(fctx)
	fcancel()
	a.logf("FlushAcks of %s returned %v", what, flushErr)
	a.mu.Lock()
	answered, failed := map[int32]bool{}, map[int32]error{}
	for _, r := range a.mu.results {
		answered[r.Partition] = true
		if r.Err != nil {
			failed[r.Partition] = r.Err
		}
	}
	a.mu.Unlock()
	if (flushErr != nil || len(failed) > 0) && a.logged < 20 {
		a.logged++
		a.t.Logf("%s: %s not confirmed: flush %v, partitions %v", a.name, what, flushErr, failed)
	}
	return func(p int32) bool { return flushErr == nil && answered[p] && failed[p] == nil }
}

// syncBuffer is a strings.Builder safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (sc *shareConsumer) stop() {
	sc.once.Do(func() {
		sc.cancel()
		<-sc.done
		sc.cl.Close()
	})
}

// shareProducer writes records "v-<n>" with acks=all into a history, 50 at a time,
// no more than 2000 ahead of what the consumers confirmed: enough that the consumers
// always have records in hand, so the kill finds acquisitions and acknowledgements in
// flight.
type shareProducer struct {
	h      *history
	cancel context.CancelFunc
	done   chan struct{}
}

func startShareProducer(t *testing.T, addrs []string, topic string, led *shareLedger) *shareProducer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(45*time.Second),
		kgo.MetadataMinAge(250*time.Millisecond), kgo.MetadataMaxAge(time.Second), // sees partitions added
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithCancel(context.Background())
	p := &shareProducer{h: newHistory(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for n := 0; ctx.Err() == nil; {
			for p.h.ackedCount()-led.confirmedCount() > 2000 && ctx.Err() == nil {
				select {
				case <-led.progress:
				case <-ctx.Done():
				case <-time.After(time.Second): // progress may have been taken by an earlier wait
				}
			}
			var wg sync.WaitGroup
			for range 50 {
				value := fmt.Sprintf("v-%07d", n)
				n++
				wg.Add(1)
				cl.Produce(context.Background(), &kgo.Record{Value: []byte(value)}, func(r *kgo.Record, err error) {
					defer wg.Done()
					p.h.record(value, r, err)
				})
			}
			wg.Wait()
		}
	}()
	return p
}

func (h *history) ackedCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.acked)
}

func (p *shareProducer) stop(t *testing.T) *history {
	t.Helper()
	p.cancel()
	select {
	case <-p.done:
	case <-time.After(90 * time.Second):
		t.Fatal("records still in flight 90 s after the producer stopped")
	}
	if errors.Is(p.h.lastErr, context.Canceled) {
		p.h.lastErr = nil
	}
	return p.h
}

// TestClusterShareNewPartitions: a topic gains partitions while three share consumers
// read it and a producer writes to every partition, on a three-node cluster whose
// share state is kept mostly away from the partitions' leaders. The group's reset is
// latest by then, yet the new partitions are read from offset 0: the group coordinator
// initializes their state through the share coordinators before it assigns them
// (Kafka 4.1). The check at the end: every record the producer had acknowledged is
// delivered and accepted, on the old partitions and the new.
func TestClusterShareNewPartitions(t *testing.T) {
	t.Parallel()
	c := testutil.StartCluster(t, testutil.ClusterOptions{Overrides: shareOverrides})
	inv := watchInvariants(t, c)
	const topic = "growing"
	admin := newNodeClient(t, c.Node(1).Addr)
	createTopic(t, admin, topic, 6, 3)
	groupID, layout := pickShareGroup(t, admin, topic, 6)
	t.Logf("group %s: topic leaders %v, share coordinators %v", groupID, layout.leaders, layout.coordinators)
	// The first partitions count from their start, so the producer's first records
	// are not left to the race between its writes and the consumers' first fetches.
	setShareGroupConfig(t, c, admin, groupID, "share.auto.offset.reset", "earliest")

	led := newShareLedger()
	addrs := c.BrokerAddrs()
	consumers := startShareConsumers(t, addrs, groupID, topic, led, &holdGate{}, nil)
	p := startShareProducer(t, addrs, topic, led)
	led.waitConfirmed(t, 500, 90*time.Second, "500 records accepted on the first six partitions")
	setShareGroupConfig(t, c, admin, groupID, "share.auto.offset.reset", "latest")

	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, 9
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 15_000
	r, err := admin.request(ctxT(t, 30*time.Second), req)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(r.(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode); err != nil {
		t.Fatalf("CreatePartitions %s to 9: %v", topic, err)
	}
	testutil.WaitFor(t, 60*time.Second, func() bool { return p.h.partitionsWritten() == 9 }, "the producer to write to the new partitions")
	grown := led.confirmedCount()
	led.waitConfirmed(t, grown+1500, 120*time.Second, "1500 more records accepted after the producer wrote to the new partitions")

	endShareTest(t, c, p, consumers, led, inv, addrs, groupID, topic, 9)
}

// partitionsWritten counts the partitions with an acknowledged record.
func (h *history) partitionsWritten() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.order)
}

// TestClusterShareGroupOffsets: kadm's share-group offset commands on a three-node
// cluster, for a topic of 30 partitions whose share state is spread over the share
// coordinators of several nodes. The node that serves a command reads, resets and
// deletes the state its peers keep with one share-coordinator request per peer
// (Kafka's persister batches them so too): every partition reset comes back as its
// asked start with its lag, a second reset moves them again, and once the topic's
// offsets are deleted the group has none.
func TestClusterShareGroupOffsets(t *testing.T) {
	t.Parallel()
	c := testutil.StartCluster(t, testutil.ClusterOptions{Overrides: shareOverrides})
	const topic, partitions, perPartition = "offsets", 30, 10
	admin := newNodeClient(t, c.Node(1).Addr)
	createTopic(t, admin, topic, partitions, 3)
	groupID, layout := pickShareGroup(t, admin, topic, partitions)
	nodes := map[int32]bool{}
	for _, n := range layout.coordinators {
		nodes[n] = true
	}
	if len(nodes) < 2 {
		t.Fatalf("the share state of %s is kept by nodes %v: want it spread", groupID, layout.coordinators)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BrokerAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for p := range int32(partitions) {
		for i := range perPartition {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%d-%d", p, i)})
		}
	}
	if err := cl.ProduceSync(ctxT(t, 60*time.Second), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The group exists once a share consumer joined; it must be empty to change offsets.
	member, err := kgo.NewClient(kgo.SeedBrokers(c.BrokerAddrs()...), kgo.ShareGroup(groupID), kgo.ConsumeTopics(topic))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	testutil.WaitFor(t, 60*time.Second, func() bool {
		groups, err := adm.DescribeShareGroups(ctxT(t, 10*time.Second), groupID)
		return err == nil && len(groups[groupID].Members) == 1
	}, "the share consumer to join "+groupID)
	member.Close()

	for round, startOf := range []func(p int32) int64{
		func(p int32) int64 { return int64(p % perPartition) },
		func(p int32) int64 { return int64((p + 3) % perPartition) },
	} {
		offsets := kadm.Offsets{}
		for p := range int32(partitions) {
			offsets.Add(kadm.Offset{Topic: topic, Partition: p, At: startOf(p), LeaderEpoch: -1})
		}
		// The member's leaving may take a moment to reach the group (NON_EMPTY_GROUP).
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			resp, err := adm.AlterShareGroupOffsets(ctxT(t, 30*time.Second), groupID, offsets)
			if err == nil {
				err = resp.Error()
			}
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: altering the offsets of %s: %v", round, groupID, err)
			}
		}
		described, err := adm.DescribeShareGroupOffsets(ctxT(t, 30*time.Second), groupID)
		if err != nil {
			t.Fatal(err)
		}
		got := described[groupID].Offsets[topic]
		for p := range int32(partitions) {
			o := got[p]
			if o.Err != nil || o.StartOffset != startOf(p) || o.Lag != perPartition-startOf(p) {
				t.Fatalf("round %d: partition %d (state on node %d) described as start %d, lag %d, err %v; want start %d, lag %d",
					round, p, layout.coordinators[p], o.StartOffset, o.Lag, o.Err, startOf(p), perPartition-startOf(p))
			}
		}
	}

	deleted, err := adm.DeleteShareGroupOffsets(ctxT(t, 30*time.Second), groupID, topic)
	if err == nil {
		err = deleted.Error()
	}
	if err != nil {
		t.Fatalf("deleting the offsets of %s: %v", topic, err)
	}
	described, err := adm.DescribeShareGroupOffsets(ctxT(t, 30*time.Second), groupID)
	if err != nil {
		t.Fatal(err)
	}
	if left := described[groupID].Offsets[topic]; len(left) != 0 {
		t.Fatalf("offsets of %d partitions left after deleting them", len(left))
	}
}
