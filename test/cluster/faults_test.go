package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// ledBy returns the partitions of topic a node leads, as a broker serves the metadata.
func ledBy(t *testing.T, cl *nodeClient, topic string, node int32) []int32 {
	t.Helper()
	md, err := cl.metadata(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var out []int32
	for _, p := range partitionsOf(md, topic) {
		if p.Leader == node {
			out = append(out, p.Partition)
		}
	}
	slices.Sort(out)
	return out
}

// waitLeadersOtherThan waits until every partition of topic has a leader other than
// node.
func waitLeadersOtherThan(t *testing.T, cl *nodeClient, topic string, partitions, node int32) {
	t.Helper()
	for p := range partitions {
		waitPartition(t, cl, topic, p, 30*time.Second, fmt.Sprintf("a leader other than %d", node),
			func(m kmsg.MetadataResponseTopicPartition) bool { return m.Leader >= 0 && m.Leader != node })
	}
}

// outlastLostNode follows a cluster through the loss of node victim at fault (it
// stopped on a fault, or was killed): every partition of topic gets another leader
// and gone more records are acknowledged, the unavailability is logged; then the
// fault is repaired (repair, when set), the node starts again, every replica is
// back in sync and back more records are acknowledged.
func outlastLostNode(t *testing.T, c *testutil.Cluster, l *load, cl *nodeClient, topic string, partitions, victim int32,
	what string, fault time.Time, led []int32, gone, back int, repair func()) {
	t.Helper()
	waitLeadersOtherThan(t, cl, topic, partitions, victim)
	l.waitAcks(t, gone, "writes going on without node "+fmt.Sprint(victim))
	t.Logf("%s: writes went on %.1f s after it", what, time.Since(fault).Seconds())
	logUnavailability(t, l, what, fault, led)
	if repair != nil {
		repair()
	}
	c.StartAgain(t, victim)
	waitFullISR(t, cl, topic, partitions, 60*time.Second)
	l.waitAcks(t, back, "writes with node "+fmt.Sprint(victim)+" back")
}

// logUnavailability waits until every partition has acknowledged a record again,
// then logs how long acknowledgements stopped, after fault, in the partitions the
// fault hit (the longest of them) and in the others.
func logUnavailability(t *testing.T, l *load, what string, fault time.Time, hit []int32) {
	t.Helper()
	now := time.Now()
	testutil.WaitFor(t, 60*time.Second, func() bool { return l.everyPartitionAckedAfter(now) },
		"every partition acknowledging records again")
	gaps := l.unavailability(fault)
	var hitGaps, otherGaps = map[int32]time.Duration{}, map[int32]time.Duration{}
	for p, d := range gaps {
		if slices.Contains(hit, p) {
			hitGaps[p] = d
		} else {
			otherGaps[p] = d
		}
	}
	p, d := longest(hitGaps)
	op, od := longest(otherGaps)
	t.Logf("%s: acknowledgements stopped for %v in partition %d (the longest of the %d it hit), %v at most elsewhere (partition %d)",
		what, d.Round(time.Millisecond), p, len(hitGaps), od.Round(time.Millisecond), op)
}

// TestReplicationLinkCut cuts the links of a partition leader, two ways. First its
// followers cannot fetch from it (its replication listener is blackholed) while it
// stays in the quorum: it takes them out of the ISR itself and, with
// min.insync.replicas=2, refuses acks=all writes; when the link passes again they
// catch up and rejoin. Then it is cut off from the metadata quorum: the majority
// fences it and elects other leaders, writes go on there, and the cut-off leader —
// which still believes it leads — acknowledges none of the acks=all writes sent
// straight to it. Healed, it truncates the tail it wrote alone and rejoins the ISR.
// Its ISR metrics count what happened; every acknowledged record is there.
func TestReplicationLinkCut(t *testing.T) {
	t.Parallel()
	c := testutil.StartCluster(t, testutil.ClusterOptions{ProxyControllerLinks: true, ProxyReplication: true, Metrics: true,
		Overrides: append([]string{"min.insync.replicas=2"}, replicationOverrides...)})
	inv := watchInvariants(t, c)
	const topic, partitions = "cut-off", 3
	admin := newNodeClient(t, c.Node(1).Addr)
	createTopic(t, admin, topic, partitions, 3)
	waitFullISR(t, admin, topic, partitions, 30*time.Second)
	ctrl := activeController(t, admin)
	victim, led := int32(-1), int32(-1)
	for p := range int32(partitions) {
		if m, ok := partitionState(t, admin, topic, p); ok && m.Leader >= 0 && m.Leader != ctrl {
			victim, led = m.Leader, p
			break
		}
	}
	if victim < 0 {
		t.Fatalf("every partition of %s is led by the active controller %d", topic, ctrl)
	}
	node := c.Node(victim)
	direct := newNodeClient(t, node.Addr)
	survivor := clientExcept(t, c, victim)
	l := startLoad(t, c, topic)
	l.waitAcks(t, 1000, "acknowledged records before the cuts")

	// 1. Its followers cannot fetch from it: it shrinks the ISR and refuses writes.
	shrinks := metric(t, node, "samsa_isr_shrinks_total")
	node.ReplicationProxy.Blackhole()
	waitPartition(t, direct, topic, led, 30*time.Second, fmt.Sprintf("the ISR down to its leader %d", victim),
		func(m kmsg.MetadataResponseTopicPartition) bool { return m.Leader == victim && len(m.ISR) == 1 })
	if err := produceRawTo(t, direct, topic, led, "refused", 5*time.Second); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all write to %s-%d with its ISR down to the leader: %v, want NOT_ENOUGH_REPLICAS", topic, led, err)
	}
	waitMetric(t, node, "samsa_isr_shrinks_total", fmt.Sprintf("≥ %v + 2", shrinks), func(v float64) bool { return v >= shrinks+2 })
	waitMetric(t, node, "samsa_under_min_isr_partitions", "≥ 1", func(v float64) bool { return v >= 1 })
	waitMetric(t, node, "samsa_under_replicated_partitions", "≥ 1", func(v float64) bool { return v >= 1 })
	expands := metric(t, node, "samsa_isr_expands_total")
	node.ReplicationProxy.Pass()
	waitFullISR(t, survivor, topic, partitions, 60*time.Second)
	waitMetric(t, node, "samsa_isr_expands_total", fmt.Sprintf("≥ %v + 2", expands), func(v float64) bool { return v >= expands+2 })
	waitMetric(t, node, "samsa_under_replicated_partitions", "back to 0", func(v float64) bool { return v == 0 })
	l.waitAcks(t, 500, "writes with the ISR whole again")

	// 2. It is cut off from the quorum: replaced, it acknowledges nothing.
	cut := time.Now()
	c.Isolate(victim)
	waitLeadersOtherThan(t, survivor, topic, partitions, victim)
	t.Logf("leader %d cut off from the quorum: its partitions had other leaders %v later", victim, time.Since(cut).Round(time.Millisecond))
	for i := range 3 {
		err := produceRawTo(t, direct, topic, led, fmt.Sprintf("cut-%d", i), 2*time.Second)
		if err == nil {
			t.Fatalf("the cut-off leader %d acknowledged an acks=all write to %s-%d after it was replaced", victim, topic, led)
		}
		t.Logf("acks=all write straight to the cut-off leader: %v", err)
	}
	l.waitAcks(t, 1000, "writes going on on the majority's side")
	// A producer may keep waiting on the cut-off leader (its metadata refreshes can
	// land there, and it still says it leads): what it saw is logged once healed.
	healed := time.Now()
	c.Heal(victim)
	testutil.WaitFor(t, 60*time.Second, func() bool { return hasLine(node.Log(), "follower truncated a divergent tail") },
		"the healed leader to truncate the tail it wrote alone")
	waitFullISR(t, survivor, topic, partitions, 60*time.Second)
	logUnavailability(t, l, fmt.Sprintf("leader %d cut off from the quorum for %v", victim, healed.Sub(cut).Round(time.Millisecond)),
		cut, []int32{led})
	l.waitAcks(t, 500, "writes after the heal")
	h := l.stop(t)
	h.check(t, c, topic)
	inv.check()
}

// TestReplicationControlledShutdown: under an acks=all load, SIGTERM a broker that
// leads partitions — once one that is not the active controller, once the active
// controller: its leaderships move before it exits 0, writes go on (the time they
// stopped is logged), and when it starts again its replicas rejoin the ISR. Every
// acknowledged record is there.
func TestReplicationControlledShutdown(t *testing.T) {
	t.Parallel()
	const topic, partitions = "draining", 6
	c, inv, l := clusterUnderLoad(t, testutil.ClusterOptions{}, topic, partitions, 1000, "acknowledged records before the first shutdown")
	for round := range 2 {
		cl := newNodeClient(t, c.Node(1).Addr)
		ctrl := activeController(t, cl)
		victim := ctrl
		if round == 0 {
			for _, n := range c.Nodes() {
				if n.ID != ctrl && len(ledBy(t, cl, topic, n.ID)) > 0 {
					victim = n.ID
					break
				}
			}
		}
		survivor := clientExcept(t, c, victim)
		led := ledBy(t, survivor, topic, victim)
		stopping := time.Now()
		if err := c.Node(victim).Stop(); err != nil {
			t.Fatalf("SIGTERM of node %d: %v", victim, err)
		}
		t.Logf("round %d: controlled shutdown of node %d (active controller %d, leading partitions %v) took %v",
			round, victim, ctrl, led, time.Since(stopping).Round(time.Millisecond))
		if !hasLine(c.Node(victim).Log(), "controlled shutdown: the active controller moved every leadership away") {
			t.Fatalf("node %d exited before its leaderships moved", victim)
		}
		md, err := survivor.metadata(ctxT(t, 5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range partitionsOf(md, topic) {
			if p.Leader == victim || slices.Contains(p.ISR, victim) {
				t.Fatalf("%s-%d still led by or in sync on the stopped node %d: leader %d isr %v", topic, p.Partition, victim, p.Leader, p.ISR)
			}
		}
		l.waitAcks(t, 1000, "writes going on with the node stopped")
		logUnavailability(t, l, fmt.Sprintf("round %d: controlled shutdown of node %d", round, victim), stopping, led)
		c.StartAgain(t, victim)
		waitFullISR(t, survivor, topic, partitions, 60*time.Second)
		l.waitAcks(t, 500, "writes after the node came back")
	}
	h := l.stop(t)
	h.check(t, c, topic)
	inv.check()
}

// TestReplicationControllerFailoverAndFullRestart: under an acks=all load, the active
// controller is cut off from the other voters (a failover of the controller by the
// network, where TestReplicationKillLeadersUnderLoad crashes it): the majority elects
// another, writes go on, and healed it rejoins the ISRs. Then every node is stopped
// and started again at once with the load going on: writes resume, and every
// acknowledged record is there, once, in order.
func TestReplicationControllerFailoverAndFullRestart(t *testing.T) {
	t.Parallel()
	const topic, partitions = "through-it-all", 3
	c, inv, l := clusterUnderLoad(t, testutil.ClusterOptions{ProxyControllerLinks: true}, topic, partitions, 1000, "acknowledged records before the controller failover")

	old := activeController(t, newNodeClient(t, c.Node(1).Addr))
	survivor := clientExcept(t, c, old)
	led := ledBy(t, survivor, topic, old)
	cut := time.Now()
	c.Isolate(old)
	testutil.WaitFor(t, 30*time.Second, func() bool {
		p, err := survivor.quorum(ctxT(t, 2*time.Second))
		return err == nil && p.LeaderID >= 0 && p.LeaderID != old
	}, "the majority electing another controller")
	t.Logf("active controller %d cut off: another was elected %v later", old, time.Since(cut).Round(time.Millisecond))
	waitLeadersOtherThan(t, survivor, topic, partitions, old)
	l.waitAcks(t, 1000, "writes going on without the old controller")
	healed := time.Now()
	c.Heal(old)
	waitFullISR(t, survivor, topic, partitions, 60*time.Second)
	logUnavailability(t, l, fmt.Sprintf("active controller %d cut off for %v", old, healed.Sub(cut).Round(time.Millisecond)), cut, led)
	l.waitAcks(t, 500, "writes after the heal")

	restarting := time.Now()
	c.RestartAll(t)
	t.Logf("full restart of the three nodes took %v", time.Since(restarting).Round(time.Millisecond))
	l.waitAcks(t, 1000, "writes after the full restart")
	logUnavailability(t, l, "full restart", restarting, []int32{0, 1, 2})
	waitFullISR(t, newNodeClient(t, c.Node(1).Addr), topic, partitions, 60*time.Second)
	h := l.stop(t)
	h.check(t, c, topic)
	inv.check()
}

// failWrites makes files immutable (chattr +i), so that every write to them fails
// with EPERM as a dying disk's writes fail, and returns what undoes it (also run when
// the test ends). The test is skipped where the flag cannot be set.
func failWrites(t *testing.T, files ...string) (repair func()) {
	t.Helper()
	for _, f := range files {
		if out, err := exec.Command("chattr", "+i", f).CombinedOutput(); err != nil {
			t.Skipf("cannot make %s immutable to fail its writes (chattr needs root and a file system with the flag, e.g. ext4): %v %s", f, err, out)
		}
	}
	var once sync.Once
	repair = func() {
		once.Do(func() {
			for _, f := range files {
				if out, err := exec.Command("chattr", "-i", f).CombinedOutput(); err != nil {
					t.Errorf("chattr -i %s: %v %s", f, err, out)
				}
			}
		})
	}
	t.Cleanup(repair)
	return repair
}

// waitStopped waits until node's process has exited with an error after a fault,
// its log saying why (says), and returns how it exited.
func waitStopped(t *testing.T, c *testutil.Cluster, node int32, what, says string) error {
	t.Helper()
	var exitErr error
	testutil.WaitFor(t, 30*time.Second, func() bool {
		var exited bool
		exited, exitErr = c.Node(node).Exited()
		return exited
	}, fmt.Sprintf("node %d stopping after %s", node, what))
	if exitErr == nil || !hasLine(c.Node(node).Log(), says) {
		t.Fatalf("node %d exited (%v) without saying %q:\n%s", node, exitErr, says, c.Node(node).Log())
	}
	return exitErr
}

// downWay is a way a node goes down before a fault meets it at start-up.
type downWay struct {
	how  string
	stop func(n *testutil.Node)
}

// downWays: a crash (kill -9: the node recovers its logs at start) and a clean stop
// (it opens them from their saved state), the two states a node starts from.
func downWays(t *testing.T) []downWay {
	return []downWay{
		{"killed", func(n *testutil.Node) { n.Kill() }},
		{"stopped cleanly", func(n *testutil.Node) {
			if err := n.Stop(); err != nil {
				t.Fatalf("clean stop of node %d: %v", n.ID, err)
			}
		}},
	}
}

// TestDiskFailure: the only log directory of a node fails under an acks=all load —
// an active segment is made immutable (chattr +i), so that every write to it fails as
// a dying disk's writes do — first on a partition's leader, then on a follower. The
// node stops at once (exit code 1, naming the directory) instead of answering
// KAFKA_STORAGE_ERROR until someone restarts it; its session expires, in-sync
// replicas lead and writes go on. Repaired and started again, the node catches up and
// rejoins the ISR. Then at start-up: a leader is killed — and then another stopped
// cleanly — and a segment of its made immutable while it is down; started again, it
// cannot open that partition's log and stops before it is ready, saying every log
// directory failed (it used to start and serve, that partition's replica missing for
// good). Every acknowledged record is there once, in order, at its offset.
func TestDiskFailure(t *testing.T) {
	t.Parallel()
	const topic, partitions = "disk", 3
	c, inv, l := clusterUnderLoad(t, testutil.ClusterOptions{}, topic, partitions, 1000, "acknowledged records before the first disk fault")
	admin := newNodeClient(t, c.Node(1).Addr)

	for partition, role := range []string{"leader", "follower"} {
		p, _ := partitionState(t, admin, topic, int32(partition))
		victim := p.Leader
		if role == "follower" {
			victim = p.Replicas[0]
			if victim == p.Leader {
				victim = p.Replicas[1]
			}
		}
		led := ledBy(t, admin, topic, victim)
		repair := failWrites(t, filepath.Join(c.Node(victim).Dir, fmt.Sprintf("%s-%d", topic, partition), "00000000000000000000.log"))
		fault := time.Now()
		exitErr := waitStopped(t, c, victim, fmt.Sprintf("the writes of the %s of %s-%d to its only log directory failed", role, topic, partition),
			"every log directory has failed")
		t.Logf("%s %d of %s-%d stopped %v after its disk fault: %v", role, victim, topic, partition, time.Since(fault).Round(time.Millisecond), exitErr)
		admin = clientExcept(t, c, victim)
		outlastLostNode(t, c, l, admin, topic, partitions, victim, fmt.Sprintf("disk fault on %s %d", role, victim), fault, led, 1000, 500, repair)
	}

	for partition, down := range downWays(t) {
		p, _ := partitionState(t, admin, topic, int32(partition))
		victim := p.Leader
		led := ledBy(t, admin, topic, victim)
		down.stop(c.Node(victim))
		fault := time.Now()
		repair := failWrites(t, filepath.Join(c.Node(victim).Dir, fmt.Sprintf("%s-%d", topic, partition), "00000000000000000000.log"))
		admin = clientExcept(t, c, victim)
		err := c.TryStartAgain(victim)
		if says := "every log directory has failed"; err == nil || !strings.Contains(err.Error(), "exited before it was ready") || !hasLine(c.Node(victim).Log(), says) {
			t.Fatalf("node %d, %s, started on a failed disk: want it to exit saying %q, got %v", victim, down.how, says, err)
		}
		t.Logf("node %d gave up its start %v after it was %s", victim, time.Since(fault).Round(time.Millisecond), down.how)
		outlastLostNode(t, c, l, admin, topic, partitions, victim, fmt.Sprintf("disk fault on %d at start-up after it was %s", victim, down.how), fault, led, 1000, 500, repair)
	}
	h := l.stop(t)
	h.check(t, c, topic)
	inv.check()
}

// TestMetadataDiskFailure: a voter's metadata log stops on a failed write (its
// segments under log.dirs[0]/__cluster_metadata-0 made immutable, then a topic created
// so that it has entries to append), in two states of the node:
//
//   - running: the node stops at once, as Kafka halts, rather than serve partitions
//     with a view of the cluster that no longer moves;
//   - starting after a crash (kill -9, the disk failed while it was down), and after a
//     clean stop: the node gives up its start with the same message instead of
//     waiting, forever, for a metadata image that cannot move to hold its
//     registration.
//
// In both the other two voters go on, its leaderships move, writes go on; repaired
// and started again, it catches up, and every acknowledged record is there.
func TestMetadataDiskFailure(t *testing.T) {
	t.Parallel()
	const topic, partitions = "meta-disk", 3
	c, inv, l := clusterUnderLoad(t, testutil.ClusterOptions{}, topic, partitions, 1000, "acknowledged records before the metadata disk fault")
	admin := newNodeClient(t, c.Node(1).Addr)

	ctrl := activeController(t, admin)
	victim := others(c, ctrl)[0]
	repair := failMetadataWrites(t, c, victim)
	survivor := newNodeClient(t, c.Node(ctrl).Addr)
	fault := time.Now()
	createTopic(t, survivor, "poke", 1, 2) // entries every voter must append
	led := ledBy(t, survivor, topic, victim)
	exitErr := waitStopped(t, c, victim, "its metadata log failed", "the metadata log in")
	t.Logf("node %d stopped %v after its metadata log failed: %v", victim, time.Since(fault).Round(time.Millisecond), exitErr)
	outlastLostNode(t, c, l, survivor, topic, partitions, victim, fmt.Sprintf("metadata disk fault on node %d", victim), fault, led, 1000, 500, repair)

	for i, down := range downWays(t) {
		ctrl = activeController(t, survivor)
		victim = others(c, ctrl)[0]
		survivor = newNodeClient(t, c.Node(ctrl).Addr)
		led = ledBy(t, survivor, topic, victim)
		down.stop(c.Node(victim))
		fault = time.Now()
		repair = failMetadataWrites(t, c, victim)
		createTopic(t, survivor, fmt.Sprintf("poke-%d", i), 1, 2)
		err := c.TryStartAgain(victim)
		if says := "repair or free the disk of " + c.Node(victim).Dir; err == nil || !strings.Contains(err.Error(), "exited before it was ready") || !hasLine(c.Node(victim).Log(), says) {
			t.Fatalf("node %d, %s, started on a failed metadata disk: want it to exit saying %q, got %v", victim, down.how, says, err)
		}
		t.Logf("node %d gave up its start %v after it was %s", victim, time.Since(fault).Round(time.Millisecond), down.how)
		outlastLostNode(t, c, l, survivor, topic, partitions, victim, fmt.Sprintf("metadata disk fault on node %d at start-up after it was %s", victim, down.how), fault, led, 1000, 500, repair)
	}
	h := l.stop(t)
	h.check(t, c, topic)
	inv.check()
}

// failMetadataWrites makes node's metadata log segments immutable (failWrites).
func failMetadataWrites(t *testing.T, c *testutil.Cluster, node int32) (repair func()) {
	t.Helper()
	segments, err := filepath.Glob(filepath.Join(c.Node(node).Dir, "__cluster_metadata-0", "*.log"))
	if err != nil || len(segments) == 0 {
		t.Fatalf("node %d's metadata log segments: %v %v", node, segments, err)
	}
	return failWrites(t, segments...)
}

// TestObserverOfAnotherCluster: the only controller of a cluster loses its data and
// starts again empty, so it forms a new cluster with a new id. The broker-only node
// that followed its metadata log (an observer) is answered INCONSISTENT_CLUSTER_ID;
// it stops with a message naming both cluster ids instead of serving, forever, the
// last view of a cluster that no longer exists.
func TestObserverOfAnotherCluster(t *testing.T) {
	t.Parallel()
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 2, Roles: map[int32]string{1: "controller", 2: "broker"}})
	b2 := newNodeClient(t, c.Node(2).Addr)
	testutil.WaitFor(t, 10*time.Second, func() bool {
		md, err := b2.metadata(ctxT(t, 5*time.Second))
		return err == nil && slices.Equal(liveBrokers(md), []int32{2})
	}, "broker 2 registered and unfenced")
	before, err := c.MetaClusterID(2)
	if err != nil {
		t.Fatal(err)
	}

	c.Node(1).Kill()
	if err := os.RemoveAll(c.Node(1).Dir); err != nil {
		t.Fatal(err)
	}
	c.StartAgain(t, 1)
	after, err := c.MetaClusterID(1)
	if err != nil {
		t.Fatal(err)
	}
	if after == before {
		t.Fatalf("the emptied controller kept cluster id %s; the test needs it to form another cluster", before)
	}
	waitStopped(t, c, 2, "its controller came back as another cluster", "belongs to cluster "+after)
}

// killAt kills node (kill -9) the moment a file whose name ends in suffix appears in
// its replica's directory dir (events: unix.IN_CREATE, unix.IN_MOVED_TO for a rename),
// and returns the file's name and whether the operation that made it was still under
// way when the kill landed (unfinished reports it, given the directory after the kill).
func killAt(t *testing.T, n *testutil.Node, dir, suffix string, events uint32, unfinished func(name string) bool) (string, bool) {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatalf("inotify: %v", err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, dir, events); err != nil {
		t.Fatalf("watching %s: %v", dir, err)
	}
	buf := make([]byte, 64<<10)
	deadline := time.Now().Add(time.Minute)
	for {
		wait := time.Until(deadline)
		if wait <= 0 {
			t.Fatalf("no file ending in %s appeared in %s within a minute", suffix, dir)
		}
		if _, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(wait.Milliseconds())+1); err != nil && !errors.Is(err, unix.EINTR) {
			t.Fatalf("waiting for the inotify events of %s: %v", dir, err)
		}
		k, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatalf("reading the inotify events of %s: %v", dir, err)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= k; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00")
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if strings.HasSuffix(name, suffix) {
				n.Kill()
				return name, unfinished(name)
			}
		}
	}
}

// TestDiskFailureAtStartAfterCrashMidOperation: a partition's leader is killed in the
// middle of a multi-file operation under an acks=all load, and its disk fails while
// it is down. The topic is compacted, with unique keys (nothing is removed, so the
// history check holds) and 16 KiB segments, so rolls come every second or so and the
// cleaner rewrites segments every 100 ms. The kill lands the moment a file appears
// (inotify):
//   - a roll, at the new segment's creation: the old segment's index files and the
//     producer snapshot at the new base are not written yet;
//   - a compaction writing its cleaned segment (.log.cleaned: recovery deletes it),
//     one that had just committed it (renamed .log.swap: recovery finishes the swap,
//     removing the old segments and taking the .swap suffix off), and one that had
//     also set the old segments aside (.deleted: recovery renames the .swap files).
//
// Then the partition's directory stops taking new files, renames and removals (the
// restart's recovery has files to create, rename or delete in every one of these
// states), or the roll's new segment refuses writes. Started on the failed disk, the
// node must stop before it is ready, saying every log directory failed, instead of
// serving a log whose operation it could not settle; repaired, it recovers, catches up
// and rejoins the ISR. Every acknowledged record is there once, in order, at its
// offset.
func TestDiskFailureAtStartAfterCrashMidOperation(t *testing.T) {
	t.Parallel()
	const topic, partitions = "mid-op", 3
	c, inv, l := clusterUnderLoad(t, testutil.ClusterOptions{Overrides: []string{"log.segment.bytes=16384",
		"log.cleanup.policy=compact", "log.cleaner.backoff.ms=100", "log.cleaner.min.cleanable.ratio=0.01"}},
		topic, partitions, 1000, "acknowledged records before the first crash")
	admin := newNodeClient(t, c.Node(1).Addr)
	// Whether the operation that made file name in dir was still under way: a roll
	// writes the producer snapshot at the new base last; a swap's files keep their
	// .swap suffix until it is done.
	rollUnfinished := func(dir, name string) bool {
		_, err := os.Stat(filepath.Join(dir, strings.TrimSuffix(name, ".log")+".snapshot"))
		return errors.Is(err, os.ErrNotExist)
	}
	swapUnfinished := func(dir, name string) bool {
		_, err := os.Stat(filepath.Join(dir, name))
		return err == nil
	}
	swappedAside := func(dir, _ string) bool {
		swaps, _ := filepath.Glob(filepath.Join(dir, "*.log.swap"))
		return len(swaps) > 0
	}
	for i, cut := range []struct {
		op, suffix string
		events     uint32
		unfinished func(dir, name string) bool
		fault      string
	}{
		// A roll creates its segment; the cleaner renames its files into place.
		{"a roll", ".log", unix.IN_CREATE, rollUnfinished, "directory"},
		{"a roll", ".log", unix.IN_CREATE, rollUnfinished, "new segment"},
		{"a compaction writing its cleaned segment", ".log.cleaned", unix.IN_CREATE, swapUnfinished, "directory"},
		{"a compaction that had committed its cleaned segment", ".log.swap", unix.IN_MOVED_TO, swapUnfinished, "directory"},
		{"a compaction that had set the old segments aside", ".log.deleted", unix.IN_MOVED_TO, swappedAside, "directory"},
	} {
		partition := int32(i % partitions)
		var victim int32
		var dir, name string
		var led []int32
		// On a loaded machine the kill, sent once inotify reports the file, often
		// lands after the operation finished: a clean-clone `make test` saw five
		// misses in a row once.
		const attempts = 12
		for attempt := 0; ; attempt++ {
			if attempt == attempts {
				t.Fatalf("%d kills at %s of %s-%d all landed after it had finished", attempts, cut.op, topic, partition)
			}
			p, _ := partitionState(t, admin, topic, partition)
			victim = p.Leader
			admin = clientExcept(t, c, victim)
			led = ledBy(t, admin, topic, victim)
			dir = filepath.Join(c.Node(victim).Dir, fmt.Sprintf("%s-%d", topic, partition))
			var unfinished bool
			if name, unfinished = killAt(t, c.Node(victim), dir, cut.suffix, cut.events,
				func(name string) bool { return cut.unfinished(dir, name) }); unfinished {
				break
			}
			t.Logf("node %d was killed after %s (%s) had finished; again", victim, cut.op, name)
			c.StartAgain(t, victim)
			waitFullISR(t, admin, topic, partitions, 60*time.Second)
		}
		crash := time.Now()
		entries, _ := os.ReadDir(dir)
		var files []string
		for i, e := range entries {
			if i >= len(entries)-8 || strings.Contains(e.Name(), ".cleaned") || strings.Contains(e.Name(), ".swap") {
				files = append(files, e.Name())
			}
		}
		what := fmt.Sprintf("node %d killed in %s of %s-%d (%s), then its %s failed", victim, cut.op, topic, partition, name, cut.fault)
		t.Logf("%s; its files there (cleaner files and the last 8): %v", what, files)
		failed := dir
		if cut.fault == "new segment" {
			failed = filepath.Join(dir, name)
		}
		repair := failWrites(t, failed)
		err := c.TryStartAgain(victim)
		if says := "every log directory has failed"; err == nil || !strings.Contains(err.Error(), "exited before it was ready") || !hasLine(c.Node(victim).Log(), says) {
			t.Fatalf("%s: want its start to stop saying %q, got %v\n%s", what, says, err, c.Node(victim).Log())
		}
		t.Logf("%s: its start stopped %v after the crash: %s", what, time.Since(crash).Round(time.Millisecond), logLine(c.Node(victim).Log(), "ERROR"))
		outlastLostNode(t, c, l, admin, topic, partitions, victim, what, crash, led, 1000, 500, repair)
	}
	h := l.stop(t)
	h.check(t, c, topic)
	inv.check()
}

// logLine returns the first line of log containing substr, "" when none does.
func logLine(log, substr string) string {
	for line := range strings.Lines(log) {
		if strings.Contains(line, substr) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// TestFullDiskInACluster: one node's second log directory is a small real disk (a
// tmpfs) holding a partition it leads and one it follows, and it fills up under an
// acks=all load. As on a single node, a full disk does not take the directory
// offline (docs/operations.md, "Disk full"): the follower cannot append what it
// fetches, so its leader takes it out of the ISR and writes go on with the other
// two; the leader refuses the partition's writes with KAFKA_STORAGE_ERROR and
// acknowledges nothing it could not write. The node stays up. Once space is freed,
// without a restart, the leader takes writes again and the follower catches up and
// rejoins the ISR. Every acknowledged record is there once, in order, at its offset.
func TestFullDiskInACluster(t *testing.T) {
	t.Parallel()
	const topic, partitions = "full", 4
	const victim = int32(3)
	// The metadata log stays in log.dirs[0]; only partitions go to the small disk.
	small := testutil.SmallDisk(t, "64m")
	c, inv, l := clusterUnderLoad(t, testutil.ClusterOptions{NodeOverrides: map[int32][]string{victim: {"log.dirs=" + t.TempDir() + "," + small}}},
		topic, partitions, 1000, "acknowledged records before the disk fills")
	admin := newNodeClient(t, c.Node(1).Addr)
	var onSmall []int32
	for p := range int32(partitions) {
		if _, err := os.Stat(filepath.Join(small, fmt.Sprintf("%s-%d", topic, p))); err == nil {
			onSmall = append(onSmall, p)
		}
	}
	if len(onSmall) < 2 {
		t.Fatalf("node %d placed %v of %s's %d partitions on its second log directory, want two (the one with fewer partitions takes the next)", victim, onSmall, topic, partitions)
	}
	// The node leads the first of them and follows the second.
	led, followed := onSmall[0], onSmall[1]
	adm := kadm.NewClient(admin.cl)
	var req kadm.AlterPartitionAssignmentsReq
	others := []int32{1, 2}
	req.Assign(topic, led, []int32{victim, others[0], others[1]})
	req.Assign(topic, followed, []int32{others[0], victim, others[1]})
	if res, err := adm.AlterPartitionAssignments(ctxT(t, 10*time.Second), req); err != nil || res[topic][led].Err != nil || res[topic][followed].Err != nil {
		t.Fatalf("reordering the replicas of %s-%d and %s-%d: %v %+v", topic, led, topic, followed, err, res)
	}
	if res, err := adm.ElectLeaders(ctxT(t, 10*time.Second), kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {led: {}, followed: {}}}); err != nil {
		t.Fatalf("preferred elections: %v %+v", err, res)
	}
	for p, leader := range map[int32]int32{led: victim, followed: others[0]} {
		waitPartition(t, admin, topic, p, 30*time.Second, fmt.Sprintf("led by %d", leader),
			func(m kmsg.MetadataResponseTopicPartition) bool { return m.Leader == leader })
	}

	ballast := testutil.FillDisk(t, small, 0)
	full := time.Now()
	t.Logf("node %d's disk holding %s-%d (it leads) and %s-%d (it follows) is full; it leads %v", victim, topic, led, topic, followed, ledBy(t, admin, topic, victim))
	waitPartition(t, admin, topic, followed, 30*time.Second, fmt.Sprintf("node %d out of the ISR", victim),
		func(m kmsg.MetadataResponseTopicPartition) bool {
			return m.Leader >= 0 && !slices.Contains(m.ISR, victim)
		})
	shrunk := time.Now()
	t.Logf("%s-%d: node %d left the ISR %v after its disk filled", topic, followed, victim, shrunk.Sub(full).Round(time.Millisecond))
	testutil.WaitFor(t, 30*time.Second, func() bool { return l.lastAck(followed).After(shrunk) },
		fmt.Sprintf("%s-%d acknowledging writes without node %d", topic, followed, victim))
	// A small write may still fit in the last page the segment has; 64 KiB needs more.
	if err := produceRawTo(t, newNodeClient(t, c.Node(victim).Addr), topic, led, strings.Repeat("x", 64<<10), 5*time.Second); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("a 64 KiB write to %s-%d on its leader's full disk: got %v, want KAFKA_STORAGE_ERROR", topic, led, err)
	}
	if exited, err := c.Node(victim).Exited(); exited {
		t.Fatalf("node %d exited on a full disk: %v\n%s", victim, err, c.Node(victim).Log())
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	testutil.WaitFor(t, 30*time.Second, func() bool { return l.lastAck(led).After(freed) },
		fmt.Sprintf("%s-%d acknowledging writes again once space was freed", topic, led))
	waitFullISR(t, admin, topic, partitions, 60*time.Second)
	t.Logf("space freed: %s-%d took writes again and node %d was back in the ISR of %s-%d %v later", topic, led, victim, topic, followed, time.Since(freed).Round(time.Millisecond))
	logUnavailability(t, l, fmt.Sprintf("node %d's full disk", victim), full, []int32{led})
	l.waitAcks(t, 500, "writes after the disk was freed")
	h := l.stop(t)
	h.check(t, c, topic)
	inv.check()
}
