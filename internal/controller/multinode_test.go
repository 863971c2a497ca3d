package controller

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/samsa-streaming/samsa/internal/clock"
)

// memNetwork is an in-process Transport between controllers: one inbox per node,
// drained by its own goroutine, and links that can be cut.
type memNetwork struct {
	mu struct {
		sync.Mutex
		nodes    map[uint64]*Controller
		inboxes  map[uint64][]*pb.Message
		isolated map[uint64]bool
	}
	wake map[uint64]chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup
}

func newMemNetwork(t *testing.T, ids ...int32) *memNetwork {
	n := &memNetwork{wake: map[uint64]chan struct{}{}, stop: make(chan struct{})}
	n.mu.nodes = map[uint64]*Controller{}
	n.mu.inboxes = map[uint64][]*pb.Message{}
	n.mu.isolated = map[uint64]bool{}
	for _, id := range ids {
		n.wake[RaftID(id)] = make(chan struct{}, 1)
	}
	for _, id := range ids {
		n.wg.Go(func() { n.pump(RaftID(id)) })
	}
	t.Cleanup(func() { close(n.stop); n.wg.Wait() })
	return n
}

// transport returns the Transport of one node.
func (n *memNetwork) transport() Transport { return memTransport{n} }

type memTransport struct{ n *memNetwork }

func (m memTransport) Send(msgs []*pb.Message) {
	n := m.n
	n.mu.Lock()
	for _, msg := range msgs {
		if n.mu.isolated[msg.GetFrom()] || n.mu.isolated[msg.GetTo()] {
			continue
		}
		n.mu.inboxes[msg.GetTo()] = append(n.mu.inboxes[msg.GetTo()], proto.Clone(msg).(*pb.Message))
	}
	n.mu.Unlock()
	for _, msg := range msgs {
		if ch, ok := n.wake[msg.GetTo()]; ok {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

func (n *memNetwork) attach(id int32, c *Controller) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.nodes[RaftID(id)] = c
}

func (n *memNetwork) isolate(id int32, cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.isolated[RaftID(id)] = cut
}

func (n *memNetwork) pump(rid uint64) {
	for {
		select {
		case <-n.stop:
			return
		case <-n.wake[rid]:
		}
		n.mu.Lock()
		msgs := n.mu.inboxes[rid]
		n.mu.inboxes[rid] = nil
		c := n.mu.nodes[rid]
		n.mu.Unlock()
		if c == nil {
			continue
		}
		for _, m := range msgs {
			if err := c.Step(context.Background(), m); err != nil {
				break // closed: the messages are lost, as on a network
			}
		}
	}
}

type cluster struct {
	t     *testing.T
	clock *clock.Fake
	net   *memNetwork
	opts  map[int32]Options
	nodes map[int32]*Controller
	// started lists the nodes whose Start returned (guarded by net.mu).
	started []int32
}

func newCluster(t *testing.T, snapshotEvery uint64, ids ...int32) *cluster {
	cl := &cluster{
		t: t, clock: clock.NewFake(time.Unix(1_700_000_000, 0)),
		net: newMemNetwork(t, ids...), opts: map[int32]Options{}, nodes: map[int32]*Controller{},
	}
	voters := map[int32]string{}
	for _, id := range ids {
		voters[id] = fmt.Sprintf("127.0.0.1:%d", 19000+id)
	}
	for _, id := range ids {
		o := testOptions(t, t.TempDir())
		o.NodeID = id
		o.Voters = voters
		o.Clock = cl.clock
		o.Transport = cl.net.transport()
		o.SnapshotEvery = snapshotEvery
		cl.opts[id] = o
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() { cl.start(id) })
	}
	cl.advanceUntil("all nodes started", func() bool {
		// start() blocks until caught up; nodes are added to cl.nodes when done.
		cl.net.mu.Lock()
		defer cl.net.mu.Unlock()
		return len(cl.started) == len(ids)
	})
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range cl.nodes {
			c.Close()
		}
	})
	return cl
}

// start creates and starts node id; it blocks until Start returns.
func (cl *cluster) start(id int32) {
	c, err := New(cl.opts[id])
	if err != nil {
		cl.t.Error(err)
		return
	}
	cl.net.attach(id, c)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		cl.t.Errorf("node %d Start: %v", id, err)
		return
	}
	cl.net.mu.Lock()
	cl.nodes[id] = c
	cl.started = append(cl.started, id)
	cl.net.mu.Unlock()
}

// advanceUntil ticks the shared clock until cond holds.
func (cl *cluster) advanceUntil(what string, cond func() bool) {
	cl.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			cl.t.Fatalf("timed out waiting for %s", what)
		}
		cl.clock.Advance(defaultTickInterval)
		time.Sleep(time.Millisecond)
	}
}

func (cl *cluster) node(id int32) *Controller {
	cl.net.mu.Lock()
	defer cl.net.mu.Unlock()
	return cl.nodes[id]
}

// leader waits for the nodes in ids to agree on a leader among them.
func (cl *cluster) leader(ids ...int32) *Controller {
	cl.t.Helper()
	var leader int32
	cl.advanceUntil("a leader", func() bool {
		leader = cl.node(ids[0]).Leader()
		if leader < 0 || !containsID(ids, leader) {
			return false
		}
		for _, id := range ids {
			if cl.node(id).Leader() != leader {
				return false
			}
		}
		return true
	})
	return cl.node(leader)
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// converge waits until every node in ids has an image equal to want's.
func (cl *cluster) converge(want *Controller, ids ...int32) {
	cl.t.Helper()
	cl.advanceUntil("images to converge", func() bool {
		w := want.Image().Records()
		for _, id := range ids {
			if !reflect.DeepEqual(cl.node(id).Image().Records(), w) {
				return false
			}
		}
		return true
	})
}

func TestThreeNodeQuorum(t *testing.T) {
	cl := newCluster(t, 0, 1, 2, 3)
	leader := cl.leader(1, 2, 3)
	for _, id := range []int32{1, 2, 3} {
		register(t, leader, id)
	}
	res := leader.CreateTopics(ctx(t), []CreateTopic{{Name: "replicated", NumPartitions: 3, ReplicationFactor: 3}}, false)
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	cl.converge(leader, 1, 2, 3)
	for _, id := range []int32{1, 2, 3} {
		tp, ok := cl.node(id).Image().Topic("replicated")
		if !ok || tp.ID != res[0].ID {
			t.Fatalf("node %d: topic = %+v", id, tp)
		}
		if cl.node(id).Image().ClusterID() != "test-cluster" {
			t.Fatalf("node %d: cluster id %q", id, cl.node(id).Image().ClusterID())
		}
	}
	for _, id := range []int32{1, 2, 3} {
		if c := cl.node(id); c != leader {
			r := c.CreateTopics(ctx(t), []CreateTopic{{Name: "x", NumPartitions: 1, ReplicationFactor: 1}}, false)
			if !errors.Is(r[0].Err, ErrNotController) {
				t.Fatalf("follower %d CreateTopics: %v", id, r[0].Err)
			}
		}
	}
}

func TestLeaderFailover(t *testing.T) {
	cl := newCluster(t, 0, 1, 2, 3)
	old := cl.leader(1, 2, 3)
	register(t, old, 1)
	first, err := old.AllocateProducerIDs(ctx(t), 100)
	if err != nil {
		t.Fatal(err)
	}
	cl.converge(old, 1, 2, 3)

	oldID := old.opts.NodeID
	cl.net.isolate(oldID, true)
	var rest []int32
	for _, id := range []int32{1, 2, 3} {
		if id != oldID {
			rest = append(rest, id)
		}
	}
	// Wait for the majority to elect a new leader (the old one may still think
	// it leads until its check-quorum timeout).
	var next *Controller
	cl.advanceUntil("a new leader", func() bool {
		l := cl.node(rest[0]).Leader()
		if l < 0 || l == oldID || cl.node(rest[1]).Leader() != l {
			return false
		}
		next = cl.node(l)
		return true
	})
	second, err := next.AllocateProducerIDs(ctx(t), 100)
	if err != nil {
		t.Fatal(err)
	}
	if second < first+100 {
		t.Fatalf("new leader handed out producer id %d again (first block %d..%d)", second, first, first+99)
	}
	if r := next.CreateTopics(ctx(t), []CreateTopic{{Name: "after", NumPartitions: 1, ReplicationFactor: 1}}, false); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}

	cl.net.isolate(oldID, false)
	cl.converge(next, 1, 2, 3)
	if _, ok := old.Image().Topic("after"); !ok {
		t.Fatal("old leader did not catch up")
	}
	if old.Leader() == oldID {
		t.Fatal("old leader still believes it leads")
	}
}

func TestFollowerCatchesUpFromSnapshot(t *testing.T) {
	cl := newCluster(t, 3, 1, 2, 3)
	leader := cl.leader(1, 2, 3)
	register(t, leader, 1)
	var lagging int32
	for _, id := range []int32{1, 2, 3} {
		if cl.node(id) != leader {
			lagging = id
			break
		}
	}
	cl.net.isolate(lagging, true)
	for i := range 12 {
		name := fmt.Sprintf("snap-%d", i)
		if r := leader.CreateTopics(ctx(t), []CreateTopic{{Name: name, NumPartitions: 1, ReplicationFactor: 1}}, false); r[0].Err != nil {
			t.Fatal(r[0].Err)
		}
	}
	cl.net.isolate(lagging, false)
	cl.converge(leader, 1, 2, 3)

	// The follower persisted the snapshot it received: it restarts into the same image.
	want := leader.Image().Records()
	c := cl.node(lagging)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cl.net.mu.Lock()
	delete(cl.nodes, lagging)
	cl.net.mu.Unlock()
	done := make(chan struct{})
	go func() { defer close(done); cl.start(lagging) }()
	cl.advanceUntil("restarted follower", func() bool { return cl.node(lagging) != nil })
	<-done
	if got := cl.node(lagging).Image().Records(); !reflect.DeepEqual(got, want) {
		t.Fatalf("restarted follower image differs")
	}
}

// TestAbandonedProposalHoldsTheNextCommand: a command whose caller gave up while
// its entry waited for the quorum does not let the next command compute changes
// from an image without that entry. Both entries would commit once the quorum is
// back, the second undoing or repeating part of the first; instead the second
// command runs after the first entry applied and sees its result.
func TestAbandonedProposalHoldsTheNextCommand(t *testing.T) {
	cl := newCluster(t, 0, 1, 2, 3)
	leader := cl.leader(1, 2, 3)
	register(t, leader, leader.opts.NodeID)
	var followers []int32
	for _, id := range []int32{1, 2, 3} {
		if id != leader.opts.NodeID {
			followers = append(followers, id)
			cl.net.isolate(id, true) // the clock stands still: the leader keeps leading
		}
	}
	topic := []CreateTopic{{Name: "once", NumPartitions: 1, ReplicationFactor: 1}}
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if r := leader.CreateTopics(short, topic, false); !errors.Is(r[0].Err, context.DeadlineExceeded) {
		t.Fatalf("CreateTopics without a quorum: %v, want the caller's deadline", r[0].Err)
	}
	second := make(chan error, 1)
	go func() { second <- leader.CreateTopics(ctx(t), topic, false)[0].Err }()

	for _, id := range followers {
		cl.net.isolate(id, false)
	}
	var err error
	cl.advanceUntil("the second CreateTopics", func() bool {
		select {
		case err = <-second:
			return true
		default:
			return false
		}
	})
	if !errors.Is(err, ErrTopicExists) {
		t.Errorf("the second CreateTopics of a topic the abandoned one created: %v, want %v", err, ErrTopicExists)
	}
	if tp, ok := leader.Image().Topic("once"); !ok || len(tp.Partitions) != 1 {
		t.Errorf("topic once: %+v, %v", tp, ok)
	}
}
