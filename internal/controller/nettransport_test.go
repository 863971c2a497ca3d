package controller

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/server"
)

// netNode is a controller behind a real controller listener (internal/server) that
// hands Raft requests to it.
type netNode struct {
	id        int32
	dir       string
	srv       *server.Server
	ctrl      atomic.Pointer[Controller]
	transport *NetTransport
}

func (n *netNode) Handle(req *protocol.Request) <-chan protocol.Response {
	r, ok := req.Body.(*protocol.RaftRequest)
	c := n.ctrl.Load()
	if !ok || c == nil {
		return protocol.Ready(protocol.Response{Body: &protocol.RaftResponse{ErrorCode: 15}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return protocol.Ready(protocol.Response{Body: c.ReceiveRaft(ctx, r)})
}

func (n *netNode) listen(t *testing.T, addr string) {
	t.Helper()
	srv, err := server.New(server.Config{
		Listeners:  server.Listen(addr),
		Handler:    n,
		Versions:   func(key int16) (int16, int16, bool) { return 0, 0, key == protocol.RaftKey },
		NewRequest: func(key int16) kmsg.Request { return protocol.NewInternalRequest(key) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	n.srv = srv
	t.Cleanup(func() { srv.Close() })
}

type netCluster struct {
	t      *testing.T
	nodes  map[int32]*netNode
	voters map[int32]string
}

func newNetCluster(t *testing.T, ids ...int32) *netCluster {
	nc := &netCluster{t: t, nodes: map[int32]*netNode{}, voters: map[int32]string{}}
	for _, id := range ids {
		n := &netNode{id: id, dir: t.TempDir()}
		n.listen(t, "127.0.0.1:0")
		nc.nodes[id] = n
		nc.voters[id] = n.srv.Addrs()[0].String()
	}
	return nc
}

// start starts node id's controller (asynchronously: Start waits for a quorum).
func (nc *netCluster) start(id int32, clusterID string) <-chan error {
	n := nc.nodes[id]
	o := testOptions(nc.t, n.dir)
	o.NodeID, o.ClusterID, o.Voters = id, clusterID, nc.voters
	o.Clock = clock.Real{}
	o.TickInterval, o.ElectionTimeout = 20*time.Millisecond, 200*time.Millisecond
	o.SnapshotEvery = 5
	n.transport = NewNetTransport(NetTransportOptions{NodeID: id, Voters: nc.voters, Logger: testLogger(nc.t), RequestTimeout: 500 * time.Millisecond, RetryBackoff: 20 * time.Millisecond})
	o.Transport = n.transport
	c, err := New(o)
	if err != nil {
		nc.t.Fatal(err)
	}
	n.transport.Start(c)
	n.ctrl.Store(c)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done <- c.Start(ctx)
	}()
	nc.t.Cleanup(func() { nc.stop(id) })
	return done
}

// startAll starts every node as a new cluster and returns the active controller.
func (nc *netCluster) startAll() *Controller {
	nc.t.Helper()
	var starts []<-chan error
	for id := range nc.nodes {
		starts = append(starts, nc.start(id, ""))
	}
	for _, s := range starts {
		if err := <-s; err != nil {
			nc.t.Fatal(err)
		}
	}
	var ids []int32
	for id := range nc.nodes {
		ids = append(ids, id)
	}
	return nc.leader(ids...)
}

func (nc *netCluster) stop(id int32) {
	n := nc.nodes[id]
	if c := n.ctrl.Swap(nil); c != nil {
		c.Close()
		n.transport.Close()
	}
}

func (nc *netCluster) leader(ids ...int32) *Controller {
	nc.t.Helper()
	var l *Controller
	waitFor(nc.t, "an active controller", func() bool {
		for _, id := range ids {
			if c := nc.nodes[id].ctrl.Load(); c != nil && c.Active() {
				l = c
				return true
			}
		}
		return false
	})
	return l
}

func TestNetTransportQuorumFailoverAndSnapshot(t *testing.T) {
	nc := newNetCluster(t, 1, 2, 3)
	leader := nc.startAll()
	cluster := leader.Image().ClusterID()
	for _, id := range []int32{1, 2, 3} {
		register(t, leader, id)
	}
	if r := leader.CreateTopics(ctx(t), []CreateTopic{{Name: "a", NumPartitions: 1, ReplicationFactor: 3}}, false); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	waitFor(t, "every node has topic a and the cluster id", func() bool {
		for _, n := range nc.nodes {
			if _, ok := n.ctrl.Load().Image().Topic("a"); !ok || n.ctrl.Load().Image().ClusterID() != cluster {
				return false
			}
		}
		return true
	})

	// The leader stops: the other two elect one of them within seconds.
	old := leader.NodeID()
	nc.stop(old)
	var rest []int32
	for _, id := range []int32{1, 2, 3} {
		if id != old {
			rest = append(rest, id)
		}
	}
	began := time.Now()
	leader = nc.leader(rest...)
	t.Logf("new active controller %d after %v", leader.NodeID(), time.Since(began))
	// Enough entries for snapshots to compact the log past what the old leader has.
	for i := range 12 {
		if r := leader.CreateTopics(ctx(t), []CreateTopic{{Name: fmt.Sprintf("b%d", i), NumPartitions: 1, ReplicationFactor: 1}}, false); r[0].Err != nil {
			t.Fatal(r[0].Err)
		}
	}
	// The old leader comes back with its log and catches up from a snapshot.
	if err := <-nc.start(old, cluster); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the old leader caught up", func() bool {
		return reflect.DeepEqual(nc.nodes[old].ctrl.Load().Image().Records(), leader.Image().Records())
	})
}

func TestNodeOfAnotherClusterIsRefused(t *testing.T) {
	nc := newNetCluster(t, 1, 2, 3)
	leader := nc.startAll()
	var victim int32 = 3
	if leader.NodeID() == victim {
		victim = 2
	}
	nc.stop(victim)
	nc.nodes[victim].dir = t.TempDir() // empty log, but a stored id of another cluster
	err := <-nc.start(victim, "another-cluster")
	if !errors.Is(err, ErrInconsistentClusterID) {
		t.Fatalf("Start = %v, want ErrInconsistentClusterID", err)
	}
	t.Log(err)
}
