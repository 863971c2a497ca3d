// Package cluster runs several real `samsa serve` processes as one cluster
// (internal/testutil's Cluster) and drives them with franz-go: the cluster forms and
// agrees on its id, survives the loss of its active controller (kill -9) and of a
// link (a fault-injecting proxy), fences a paused broker and moves its leaderships,
// lets a broker shut down in a controlled way, and keeps every topic across a full
// restart. Every test ends with the invariants of the metadata the nodes served.
package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/peer"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// nodeClient is a franz-go client that talks to one node only (its seed broker).
type nodeClient struct {
	cl *kgo.Client
}

func newNodeClient(t testing.TB, addr string) *nodeClient {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &nodeClient{cl: cl}
}

// request sends req to the node itself, not to whichever broker kgo would pick. A
// request to one broker is not retried by kgo, so a connection that broke while the
// node was paused or restarted is retried here until ctx ends.
func (c *nodeClient) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	for {
		resp, err := c.cl.SeedBrokers()[0].Request(ctx, req)
		if err == nil || ctx.Err() != nil {
			return resp, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *nodeClient) metadata(ctx context.Context) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	r, err := c.request(ctx, req)
	if err != nil {
		return nil, err
	}
	return r.(*kmsg.MetadataResponse), nil
}

// describeCluster asks the node for DescribeCluster v2 and returns its brokers, each
// with whether it is fenced.
func (c *nodeClient) describeCluster(ctx context.Context, includeFenced bool) (map[int32]bool, error) {
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeFencedBrokers = includeFenced
	r, err := c.request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := r.(*kmsg.DescribeClusterResponse)
	if resp.Version < 2 || resp.ErrorCode != 0 {
		return nil, fmt.Errorf("DescribeCluster answered in v%d with error %d", resp.Version, resp.ErrorCode)
	}
	brokers := map[int32]bool{}
	for _, b := range resp.Brokers {
		brokers[b.NodeID] = b.IsFenced
	}
	return brokers, nil
}

// quorum asks the node (which forwards to the active controller) for DescribeQuorum.
func (c *nodeClient) quorum(ctx context.Context) (kmsg.DescribeQuorumResponseTopicPartition, error) {
	r, err := c.request(ctx, describeQuorumRequest())
	if err != nil {
		return kmsg.DescribeQuorumResponseTopicPartition{}, err
	}
	return quorumPartition(r.(*kmsg.DescribeQuorumResponse))
}

func describeQuorumRequest() *kmsg.DescribeQuorumRequest {
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.SetVersion(2)
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func quorumPartition(resp *kmsg.DescribeQuorumResponse) (kmsg.DescribeQuorumResponseTopicPartition, error) {
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return kmsg.DescribeQuorumResponseTopicPartition{}, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return kmsg.DescribeQuorumResponseTopicPartition{}, fmt.Errorf("DescribeQuorum answered %+v", resp)
	}
	p := resp.Topics[0].Partitions[0]
	return p, kerr.ErrorForCode(p.ErrorCode)
}

// controllerQuorum asks a controller's own controller listener (bypassing proxies)
// whether it leads: NOT_LEADER_OR_FOLLOWER when it does not.
func controllerQuorum(ctx context.Context, addr string) (kmsg.DescribeQuorumResponseTopicPartition, error) {
	c := peer.New(addr, peer.Options{ClientID: "cluster-test"})
	defer c.Close()
	r, err := c.Request(ctx, describeQuorumRequest())
	if err != nil {
		return kmsg.DescribeQuorumResponseTopicPartition{}, err
	}
	return quorumPartition(r.(*kmsg.DescribeQuorumResponse))
}

// createTopic sends CreateTopics to one node (which forwards it to the active
// controller) and fails the test unless the topic was created. REQUEST_TIMED_OUT is
// retried, as clients do (a slow quorum answers it); TOPIC_ALREADY_EXISTS after it
// means the timed-out attempt went through.
func createTopic(t testing.TB, c *nodeClient, name string, partitions int32, rf int16) {
	t.Helper()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	createTopicAs(t, c, rt)
}

// createTopicAs is createTopic for a topic spelled out in full (replica assignment,
// configs).
func createTopicAs(t testing.TB, c *nodeClient, rt kmsg.CreateTopicsRequestTopic) {
	t.Helper()
	name := rt.Topic
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	req.TimeoutMillis = 15_000
	req.Topics = append(req.Topics, rt)
	ctx := ctxT(t, 60*time.Second)
	for attempt := 0; ; attempt++ {
		r, err := c.request(ctx, req)
		if err != nil {
			t.Fatalf("CreateTopics %s: %v", name, err)
		}
		st := r.(*kmsg.CreateTopicsResponse).Topics[0]
		switch {
		case st.ErrorCode == 0, attempt > 0 && st.ErrorCode == kerr.TopicAlreadyExists.Code:
			return
		case st.ErrorCode == kerr.RequestTimedOut.Code && ctx.Err() == nil:
			t.Logf("CreateTopics %s: %v %v (retrying)", name, kerr.ErrorForCode(st.ErrorCode), deref(st.ErrorMessage))
			continue
		}
		t.Fatalf("CreateTopics %s: %v %v", name, kerr.ErrorForCode(st.ErrorCode), deref(st.ErrorMessage))
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// activeController returns the node id the quorum's leader has, as node asks it.
func activeController(t testing.TB, c *nodeClient) int32 {
	t.Helper()
	var leader int32
	testutil.WaitFor(t, 30*time.Second, func() bool {
		p, err := c.quorum(ctxT(t, 5*time.Second))
		leader = p.LeaderID
		return err == nil && leader >= 0
	}, "an active controller")
	return leader
}

// notTheActiveController returns a node of c that is not the active controller.
func notTheActiveController(t testing.TB, c *testutil.Cluster) *testutil.Node {
	t.Helper()
	leader := activeController(t, newNodeClient(t, c.Nodes()[0].Addr))
	for _, n := range c.Nodes() {
		if n.ID != leader {
			return n
		}
	}
	t.Fatalf("every node is the active controller %d", leader)
	return nil
}

// liveBrokers returns the broker ids in a Metadata answer (the unfenced ones).
func liveBrokers(md *kmsg.MetadataResponse) []int32 {
	var out []int32
	for _, b := range md.Brokers {
		out = append(out, b.NodeID)
	}
	slices.Sort(out)
	return out
}

// partitionsOf returns topic's partitions in a Metadata answer.
func partitionsOf(md *kmsg.MetadataResponse, topic string) []kmsg.MetadataResponseTopicPartition {
	for _, t := range md.Topics {
		if t.Topic != nil && *t.Topic == topic {
			return t.Partitions
		}
	}
	return nil
}

// invariants watches the metadata every broker node serves while a test runs and
// checks what must hold whatever the faults: at most one leader per partition and
// leader epoch, leader epochs that never go back on a node, ISRs within the replica
// sets, and no partition led by a broker that is not live (fenced brokers are not
// listed).
type invariants struct {
	t     *testing.T
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	seen  map[epochKey]int32          // leader per topic, partition and epoch
	last  map[int32]map[partKey]int32 // node → partition → last leader epoch
	bad   []string
	polls int
}

type partKey struct {
	topic     [16]byte
	partition int32
}

type epochKey struct {
	partKey
	epoch int32
}

func watchInvariants(t *testing.T, c *testutil.Cluster) *invariants {
	inv := &invariants{t: t, stop: make(chan struct{}), done: make(chan struct{}),
		seen: map[epochKey]int32{}, last: map[int32]map[partKey]int32{}}
	clients := map[int32]*nodeClient{}
	for _, n := range c.Nodes() {
		if n.IsBroker() {
			clients[n.ID] = newNodeClient(t, n.Addr)
		}
	}
	go func() {
		defer close(inv.done)
		for {
			for id, cl := range clients {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				md, err := cl.metadata(ctx)
				cancel()
				if err == nil {
					inv.observe(id, md)
				}
			}
			select {
			case <-inv.stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return inv
}

func (inv *invariants) observe(node int32, md *kmsg.MetadataResponse) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.polls++
	live := liveBrokers(md)
	if inv.last[node] == nil {
		inv.last[node] = map[partKey]int32{}
	}
	for _, t := range md.Topics {
		for _, p := range t.Partitions {
			pk := partKey{t.TopicID, p.Partition}
			name := fmt.Sprintf("%s-%d", deref(t.Topic), p.Partition)
			// One leader per epoch. A node whose replica is offline (its log directory
			// failed) answers -1 for it until the controller moves the leadership: that
			// is no leader, not a second one.
			ek := epochKey{pk, p.LeaderEpoch}
			l, ok := inv.seen[ek]
			if ok && l != p.Leader && l >= 0 && p.Leader >= 0 {
				inv.bad = append(inv.bad, fmt.Sprintf("%s epoch %d led by both %d and %d", name, p.LeaderEpoch, l, p.Leader))
			}
			if !ok || l < 0 {
				inv.seen[ek] = p.Leader
			}
			if prev, ok := inv.last[node][pk]; ok && p.LeaderEpoch < prev {
				inv.bad = append(inv.bad, fmt.Sprintf("node %d: %s leader epoch went back from %d to %d", node, name, prev, p.LeaderEpoch))
			}
			inv.last[node][pk] = p.LeaderEpoch
			for _, r := range p.ISR {
				if !slices.Contains(p.Replicas, r) {
					inv.bad = append(inv.bad, fmt.Sprintf("node %d: %s ISR %v outside replicas %v", node, name, p.ISR, p.Replicas))
				}
			}
			if p.Leader >= 0 && !slices.Contains(live, p.Leader) {
				inv.bad = append(inv.bad, fmt.Sprintf("node %d: %s led by %d, which is not a live broker %v", node, name, p.Leader, live))
			}
			if p.Leader >= 0 && !slices.Contains(p.ISR, p.Leader) {
				inv.bad = append(inv.bad, fmt.Sprintf("node %d: %s leader %d outside the ISR %v", node, name, p.Leader, p.ISR))
			}
		}
	}
}

// check stops watching and fails the test on any violation.
func (inv *invariants) check() {
	close(inv.stop)
	<-inv.done
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.polls == 0 {
		inv.t.Error("invariants: no metadata was observed")
	}
	for _, b := range inv.bad {
		inv.t.Error("invariant violated: " + b)
	}
	inv.t.Logf("invariants: %d metadata answers checked, %d partition epochs seen", inv.polls, len(inv.seen))
}

// scrape reads a node's metrics.listener.
func scrape(n *testutil.Node) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	families, err := testutil.ScrapeMetrics(ctx, n.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("node %d: %w", n.ID, err)
	}
	return families, nil
}

// metric scrapes a node's metrics.listener and returns the value of an unlabelled
// counter or gauge (-1 when it is not exported, or the scrape failed).
func metric(t *testing.T, n *testutil.Node, name string) float64 {
	t.Helper()
	return metricWith(t, n, name, nil)
}

// metricWith is metric for the series of name whose labels include labels.
func metricWith(t *testing.T, n *testutil.Node, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := scrape(n)
	if err != nil {
		return -1
	}
	return testutil.MetricValue(families, name, labels)
}

// waitMetric waits until a node's metric satisfies cond and returns its value.
func waitMetric(t *testing.T, n *testutil.Node, name string, what string, cond func(float64) bool) float64 {
	t.Helper()
	var v float64
	testutil.WaitFor(t, 30*time.Second, func() bool {
		v = metric(t, n, name)
		return cond(v)
	}, fmt.Sprintf("node %d: %s %s", n.ID, name, what))
	return v
}
