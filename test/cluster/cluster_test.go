package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestClusterFailover: three combined nodes form one cluster; it survives kill -9 of
// its active controller, fences a paused broker and unfences it when it resumes,
// lets a broker (the active controller) shut down in a controlled way, and keeps
// every topic across a full restart.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	c := testutil.StartCluster(t, testutil.ClusterOptions{})
	inv := watchInvariants(t, c)
	clients := map[int32]*nodeClient{}
	for _, n := range c.Nodes() {
		clients[n.ID] = newNodeClient(t, n.Addr)
	}

	// One cluster id, in every meta.properties and in DescribeCluster.
	id1, err := c.MetaClusterID(1)
	if err != nil || id1 == "" {
		t.Fatalf("node 1 cluster id %q: %v", id1, err)
	}
	for _, n := range c.Nodes() {
		if id, err := c.MetaClusterID(n.ID); err != nil || id != id1 {
			t.Fatalf("node %d stored cluster id %q (%v), node 1 %q", n.ID, id, err, id1)
		}
		testutil.WaitFor(t, 10*time.Second, func() bool {
			md, err := clients[n.ID].metadata(ctxT(t, 5*time.Second))
			return err == nil && deref(md.ClusterID) == id1 && slices.Equal(liveBrokers(md), []int32{1, 2, 3})
		}, fmt.Sprintf("node %d listing every broker with cluster id %s", n.ID, id1))
	}

	// A topic created on one node, replicated three times, is seen by all.
	createTopic(t, clients[2], "orders", 6, 3)
	for _, n := range c.Nodes() {
		var md *kmsg.MetadataResponse
		testutil.WaitFor(t, 10*time.Second, func() bool {
			var err error
			md, err = clients[n.ID].metadata(ctxT(t, 5*time.Second))
			return err == nil && len(partitionsOf(md, "orders")) == 6
		}, fmt.Sprintf("node %d seeing the 6 partitions of orders", n.ID))
		parts := partitionsOf(md, "orders")
		leaders := map[int32]int{}
		for _, p := range parts {
			if len(p.Replicas) != 3 || len(p.ISR) != 3 {
				t.Fatalf("node %d: orders-%d replicas %v isr %v", n.ID, p.Partition, p.Replicas, p.ISR)
			}
			leaders[p.Leader]++
		}
		if len(leaders) != 3 {
			t.Fatalf("leaders not spread: %v", leaders)
		}
	}

	// kill -9 the active controller: another is elected within seconds and admin
	// requests keep working through every surviving node (forwarded to it).
	old := activeController(t, clients[1])
	var survivors []int32
	for _, n := range c.Nodes() {
		if n.ID != old {
			survivors = append(survivors, n.ID)
		}
	}
	killed := time.Now()
	c.Node(old).Kill()
	var next int32
	testutil.WaitFor(t, 20*time.Second, func() bool {
		p, err := clients[survivors[0]].quorum(ctxT(t, 2*time.Second))
		next = p.LeaderID
		return err == nil && next >= 0 && next != old
	}, "a new active controller")
	t.Logf("kill -9 of active controller %d: node %d is active after %v", old, next, time.Since(killed).Round(time.Millisecond))
	for _, id := range survivors {
		createTopic(t, clients[id], fmt.Sprintf("after-kill-via-%d", id), 2, 2)
	}
	// The killed node's session expires: it is fenced, its leaderships move and it
	// leaves the ISRs.
	testutil.WaitFor(t, 20*time.Second, func() bool {
		md, err := clients[next].metadata(ctxT(t, 2*time.Second))
		if err != nil || slices.Contains(liveBrokers(md), old) {
			return false
		}
		for _, p := range partitionsOf(md, "orders") {
			if p.Leader == old || slices.Contains(p.ISR, old) || p.Leader < 0 {
				return false
			}
		}
		return true
	}, "the killed node fenced and its partitions moved")
	t.Logf("killed node %d fenced and its leaderships moved %v after the kill", old, time.Since(killed).Round(time.Millisecond))
	// DescribeCluster v2 lists the fenced node only when asked to (KIP-1073).
	for _, include := range []bool{false, true} {
		brokers, err := clients[next].describeCluster(ctxT(t, 5*time.Second), include)
		if err != nil {
			t.Fatal(err)
		}
		fenced, listed := brokers[old]
		if listed != include || fenced != include || len(brokers) != map[bool]int{false: 2, true: 3}[include] {
			t.Fatalf("DescribeCluster v2 (IncludeFencedBrokers %t): brokers (id → fenced) %v; node %d killed", include, brokers, old)
		}
	}

	c.StartAgain(t, old)
	testutil.WaitFor(t, 20*time.Second, func() bool {
		md, err := clients[next].metadata(ctxT(t, 2*time.Second))
		return err == nil && slices.Contains(liveBrokers(md), old)
	}, "the restarted node unfenced")

	// SIGSTOP a broker that leads partitions: fenced after the session timeout, its
	// leaderships move and the ISRs shrink; SIGCONT: unfenced again.
	createTopic(t, clients[next], "paused", 6, 3)
	victim := int32(-1)
	for _, id := range []int32{1, 2, 3} {
		if id != next {
			victim = id
			break
		}
	}
	watcher := clients[next]
	md, _ := watcher.metadata(ctxT(t, 5*time.Second))
	ledBefore := 0
	for _, p := range partitionsOf(md, "paused") {
		if p.Leader == victim {
			ledBefore++
		}
	}
	paused := time.Now()
	c.Node(victim).Pause()
	testutil.WaitFor(t, 20*time.Second, func() bool {
		md, err := watcher.metadata(ctxT(t, 2*time.Second))
		if err != nil || slices.Contains(liveBrokers(md), victim) {
			return false
		}
		for _, p := range partitionsOf(md, "paused") {
			if p.Leader == victim || p.Leader < 0 || slices.Contains(p.ISR, victim) {
				return false
			}
		}
		return true
	}, "the paused broker fenced and its partitions moved")
	t.Logf("SIGSTOP of broker %d (leading %d of 6 partitions): fenced and leaderships moved after %v", victim, ledBefore, time.Since(paused).Round(time.Millisecond))
	c.Node(victim).Resume()
	testutil.WaitFor(t, 20*time.Second, func() bool {
		md, err := watcher.metadata(ctxT(t, 2*time.Second))
		return err == nil && slices.Contains(liveBrokers(md), victim)
	}, "the resumed broker unfenced")

	// Controlled shutdown of the active controller, which also leads partitions:
	// its leaderships move before it exits 0, and another node takes over the quorum.
	createTopic(t, clients[next], "shutdown", 6, 3)
	md, _ = clients[next].metadata(ctxT(t, 5*time.Second))
	led := 0
	for _, p := range partitionsOf(md, "shutdown") {
		if p.Leader == next {
			led++
		}
	}
	if led == 0 {
		t.Fatalf("node %d leads no partition of shutdown: %+v", next, partitionsOf(md, "shutdown"))
	}
	stopping := time.Now()
	if err := c.Node(next).Stop(); err != nil {
		t.Fatalf("SIGTERM of node %d: %v\n%s", next, err, c.Node(next).Log())
	}
	t.Logf("controlled shutdown of node %d (active controller, leading %d partitions) took %v", next, led, time.Since(stopping).Round(time.Millisecond))
	if log := c.Node(next).Log(); !strings.Contains(log, "controlled shutdown: the active controller moved every leadership away") {
		t.Fatalf("node %d exited without its leaderships moved:\n%s", next, log)
	}
	var other int32
	for _, id := range []int32{1, 2, 3} {
		if id != next {
			other = id
			break
		}
	}
	md, err = clients[other].metadata(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range partitionsOf(md, "shutdown") {
		if p.Leader == next || slices.Contains(p.ISR, next) {
			t.Fatalf("shutdown-%d still led by or in sync on the stopped node %d: leader %d isr %v", p.Partition, next, p.Leader, p.ISR)
		}
	}
	if l := activeController(t, clients[other]); l == next {
		t.Fatalf("node %d still leads the quorum after exiting", next)
	}
	c.StartAgain(t, next)

	// A full restart keeps every topic.
	want := []string{"orders", "paused", "shutdown", fmt.Sprintf("after-kill-via-%d", survivors[0]), fmt.Sprintf("after-kill-via-%d", survivors[1])}
	inv.check()
	c.RestartAll(t)
	for _, n := range c.Nodes() {
		cl := newNodeClient(t, n.Addr)
		testutil.WaitFor(t, 20*time.Second, func() bool {
			md, err := cl.metadata(ctxT(t, 2*time.Second))
			if err != nil {
				return false
			}
			for _, topic := range want {
				if len(partitionsOf(md, topic)) == 0 {
					return false
				}
			}
			return len(liveBrokers(md)) == 3
		}, fmt.Sprintf("node %d has every topic after the full restart", n.ID))
	}
}

// TestClusterControllerIsolated: cutting every link of the active controller makes
// it step down (check-quorum) while the majority elects another, which fences the
// isolated broker; healing the links brings it back. A node whose stored cluster id
// is another cluster's is then refused with both ids in the message.
func TestClusterControllerIsolated(t *testing.T) {
	t.Parallel()
	c := testutil.StartCluster(t, testutil.ClusterOptions{ProxyControllerLinks: true})
	inv := watchInvariants(t, c)
	clients := map[int32]*nodeClient{}
	for _, n := range c.Nodes() {
		clients[n.ID] = newNodeClient(t, n.Addr)
	}
	createTopic(t, clients[1], "cut", 6, 3)
	old := activeController(t, clients[1])
	var rest []int32
	for _, id := range []int32{1, 2, 3} {
		if id != old {
			rest = append(rest, id)
		}
	}

	cut := time.Now()
	c.Isolate(old)
	var next int32
	testutil.WaitFor(t, 20*time.Second, func() bool {
		p, err := clients[rest[0]].quorum(ctxT(t, 2*time.Second))
		next = p.LeaderID
		return err == nil && next >= 0 && next != old
	}, "the majority electing another controller")
	t.Logf("links of active controller %d cut: node %d is active after %v", old, next, time.Since(cut).Round(time.Millisecond))
	testutil.WaitFor(t, 20*time.Second, func() bool {
		_, err := controllerQuorum(ctxT(t, 2*time.Second), c.Node(old).ControllerAddr)
		return errors.Is(err, kerr.NotLeaderForPartition)
	}, "the isolated controller stepping down")
	t.Logf("isolated controller %d stepped down %v after the cut", old, time.Since(cut).Round(time.Millisecond))
	testutil.WaitFor(t, 20*time.Second, func() bool {
		md, err := clients[next].metadata(ctxT(t, 2*time.Second))
		if err != nil || slices.Contains(liveBrokers(md), old) {
			return false
		}
		for _, p := range partitionsOf(md, "cut") {
			if p.Leader == old || p.Leader < 0 {
				return false
			}
		}
		return true
	}, "the isolated broker fenced and its partitions moved")
	// Admin requests keep working on the majority side.
	createTopic(t, clients[rest[0]], "during-cut", 1, 2)

	c.Heal(old)
	testutil.WaitFor(t, 20*time.Second, func() bool {
		md, err := clients[next].metadata(ctxT(t, 2*time.Second))
		return err == nil && slices.Contains(liveBrokers(md), old) && len(partitionsOf(md, "during-cut")) == 1
	}, "the healed node back and unfenced")
	testutil.WaitFor(t, 20*time.Second, func() bool {
		md, err := clients[old].metadata(ctxT(t, 2*time.Second))
		return err == nil && len(partitionsOf(md, "during-cut")) == 1
	}, "the healed node caught up with the metadata")
	inv.check()

	// A node whose meta.properties names another cluster is refused, naming both.
	victim := rest[0]
	if victim == next {
		victim = rest[1]
	}
	agreed, err := c.MetaClusterID(victim)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Node(victim).Stop(); err != nil {
		t.Fatal(err)
	}
	meta := filepath.Join(c.Node(victim).Dir, "meta.properties")
	original, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	const foreign = "AAAAAAAAAAAAAAAAAAAAAA"
	if err := os.WriteFile(meta, []byte(strings.ReplaceAll(string(original), agreed, foreign)), 0o644); err != nil {
		t.Fatal(err)
	}
	err = c.Node(victim).TryStartAgain()
	if err == nil || !strings.Contains(err.Error(), foreign) || !strings.Contains(err.Error(), agreed) {
		t.Fatalf("node %d with another cluster's id: start = %v; want a refusal naming %s and %s", victim, err, foreign, agreed)
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if strings.Contains(line, foreign) && strings.Contains(line, agreed) {
			t.Logf("refused: %s", strings.TrimSpace(line))
			break
		}
	}
	if err := os.WriteFile(meta, original, 0o644); err != nil {
		t.Fatal(err)
	}
	c.StartAgain(t, victim)
}

// TestClusterDedicatedRoles: a controller-only node and two broker-only nodes,
// which follow the metadata log as observers and forward admin requests to the
// controller over the network.
func TestClusterDedicatedRoles(t *testing.T) {
	t.Parallel()
	c := testutil.StartCluster(t, testutil.ClusterOptions{Roles: map[int32]string{1: "controller", 2: "broker", 3: "broker"},
		ProxyReplication: true})
	inv := watchInvariants(t, c)
	b2, b3 := newNodeClient(t, c.Node(2).Addr), newNodeClient(t, c.Node(3).Addr)
	var md *kmsg.MetadataResponse
	testutil.WaitFor(t, 10*time.Second, func() bool {
		var err error
		md, err = b2.metadata(ctxT(t, 5*time.Second))
		return err == nil && slices.Equal(liveBrokers(md), []int32{2, 3})
	}, "brokers 2 and 3 registered and unfenced")
	if md.ControllerID != 2 && md.ControllerID != 3 {
		t.Fatalf("controller id %d: clients must be given a broker, which forwards", md.ControllerID)
	}
	createTopic(t, b3, "observed", 4, 2)
	testutil.WaitFor(t, 10*time.Second, func() bool {
		md, err := b2.metadata(ctxT(t, 2*time.Second))
		return err == nil && len(partitionsOf(md, "observed")) == 4
	}, "the other observer seeing the topic")
	p, err := b2.quorum(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var observers []int32
	for _, o := range p.Observers {
		observers = append(observers, o.ReplicaID)
	}
	slices.Sort(observers)
	if p.LeaderID != 1 || len(p.CurrentVoters) != 1 || !slices.Equal(observers, []int32{2, 3}) {
		t.Fatalf("quorum: leader %d voters %+v observers %v", p.LeaderID, p.CurrentVoters, observers)
	}
	// The controller answers on its controller listener.
	if _, err := controllerQuorum(ctxT(t, 5*time.Second), c.Node(1).ControllerAddr); err != nil {
		t.Fatalf("controller listener: %v", err)
	}

	// Reassignments and preferred elections through kadm, forwarded by a broker: a
	// reordering completes at once and a preferred election then moves the
	// leadership; a move to another broker stays in progress while the new replica
	// cannot fetch from the old one (its replication listener is blackholed), until
	// it is cancelled.
	adm := kadm.NewClient(b2.cl)
	md, _ = b2.metadata(ctxT(t, 5*time.Second))
	p0 := partitionsOf(md, "observed")[0]
	reversed := []int32{p0.Replicas[1], p0.Replicas[0]}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("observed", 0, reversed)
	if res, err := adm.AlterPartitionAssignments(ctxT(t, 10*time.Second), req); err != nil || res["observed"][0].Err != nil {
		t.Fatalf("reorder: %v %+v", err, res)
	}
	elected, err := adm.ElectLeaders(ctxT(t, 10*time.Second), kadm.ElectPreferredReplica, kadm.TopicsSet{"observed": {0: {}}})
	if err != nil || elected["observed"][0].Err != nil {
		t.Fatalf("preferred election: %v %+v", err, elected)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		md, err := b3.metadata(ctxT(t, 2*time.Second))
		return err == nil && partitionsOf(md, "observed")[0].Leader == reversed[0]
	}, fmt.Sprintf("observed-0 led by its new preferred replica %d", reversed[0]))

	createTopic(t, b2, "moving", 1, 1)
	md, _ = b2.metadata(ctxT(t, 5*time.Second))
	from := partitionsOf(md, "moving")[0].Replicas[0]
	to := int32(5) - from // the other of brokers 2 and 3
	c.Node(from).ReplicationProxy.Blackhole()
	req = nil
	req.Assign("moving", 0, []int32{to})
	if res, err := adm.AlterPartitionAssignments(ctxT(t, 10*time.Second), req); err != nil || res["moving"][0].Err != nil {
		t.Fatalf("move: %v %+v", err, res)
	}
	listed, err := adm.ListPartitionReassignments(ctxT(t, 10*time.Second), kadm.TopicsSet{"moving": {0: {}}})
	if r := listed["moving"][0]; err != nil || !slices.Equal(r.AddingReplicas, []int32{to}) || !slices.Equal(r.RemovingReplicas, []int32{from}) {
		t.Fatalf("listed: %v %+v", err, listed)
	}
	req = nil
	req.CancelAssign("moving", 0)
	if res, err := adm.AlterPartitionAssignments(ctxT(t, 10*time.Second), req); err != nil || res["moving"][0].Err != nil {
		t.Fatalf("cancel: %v %+v", err, res)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		md, err := b3.metadata(ctxT(t, 2*time.Second))
		return err == nil && slices.Equal(partitionsOf(md, "moving")[0].Replicas, []int32{from})
	}, "the cancelled move reverted")
	c.Node(from).ReplicationProxy.Pass()
	inv.check()
}
