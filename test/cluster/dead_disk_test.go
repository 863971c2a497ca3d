package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestDeadDiskInACluster: one node's second log directory is a real disk that dies
// under an acks=all load (every operation on it fails with EIO from then on, as for
// the processes that have files open there) while the node leads one partition on
// it, follows another, and leads a third on its first directory.
//
//   - Running: the node stays up and keeps leading the partition on its healthy
//     directory. It tells the controller which of its replicas are offline, and the
//     controller moves the dead disk's leadership to an in-sync follower and takes
//     the node out of both ISRs at once — before replica.lag.time.max.ms (60 s here)
//     would drop it from the followed one, where before nothing ever moved the
//     leadership — so writes to every partition go on. A partition whose only
//     replica is on the dead disk is shown without a leader and with that replica
//     offline by every node, not as led by it.
//   - Killed (kill -9), then stopped cleanly (SIGTERM), and started again each time
//     with the disk still dead: the node rejoins the ISR of its healthy partitions
//     and nothing on the dead disk.
//   - The disk repaired (mounted again) and the node restarted: it catches up, every replica is
//     back in the ISR, and the single-replica partitions are led again, with every
//     record acknowledged (and flushed) before the disk died.
//
// Every acknowledged record is there once, in order, at its offset.
func TestDeadDiskInACluster(t *testing.T) {
	t.Parallel()
	const topic, partitions = "deaddisk", 4
	const victim = int32(3)
	others := []int32{1, 2}
	disk := testutil.NewDyingDisk(t, 512)
	// The metadata log stays in log.dirs[0]; only partitions go to the dying disk.
	c, inv, l := clusterUnderLoad(t, testutil.ClusterOptions{
		Overrides:     []string{"replica.lag.time.max.ms=60000"},
		NodeOverrides: map[int32][]string{victim: {"log.dirs=" + t.TempDir() + "," + disk.Dir}},
	}, topic, partitions, 1000, "acknowledged records before the disk dies")
	admin := clientExcept(t, c, victim)
	var onDisk, healthy []int32
	for p := range int32(partitions) {
		if _, err := os.Stat(filepath.Join(disk.Dir, fmt.Sprintf("%s-%d", topic, p))); err == nil {
			onDisk = append(onDisk, p)
		} else {
			healthy = append(healthy, p)
		}
	}
	if len(onDisk) < 2 || len(healthy) < 1 {
		t.Fatalf("node %d placed %v of %s's %d partitions on its second log directory, want two of them (the one with fewer partitions takes the next)", victim, onDisk, topic, partitions)
	}
	led, followed, healthyLed := onDisk[0], onDisk[1], healthy[0]
	adm := kadm.NewClient(admin.cl)
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, led, []int32{victim, others[0], others[1]})
	req.Assign(topic, followed, []int32{others[0], victim, others[1]})
	req.Assign(topic, healthyLed, []int32{victim, others[1], others[0]})
	if res, err := adm.AlterPartitionAssignments(ctxT(t, 10*time.Second), req); err != nil || res.Error() != nil {
		t.Fatalf("reordering the replicas of %s-%d, %s-%d and %s-%d: %v %+v", topic, led, topic, followed, topic, healthyLed, err, res)
	}
	if res, err := adm.ElectLeaders(ctxT(t, 10*time.Second), kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {led: {}, followed: {}, healthyLed: {}}}); err != nil {
		t.Fatalf("preferred elections: %v %+v", err, res)
	}
	for p, leader := range map[int32]int32{led: victim, followed: others[0], healthyLed: victim} {
		waitPartition(t, admin, topic, p, 30*time.Second, fmt.Sprintf("led by %d", leader),
			func(m kmsg.MetadataResponseTopicPartition) bool { return m.Leader == leader })
	}
	l.waitAcks(t, 500, "writes with the new leaders")
	solo := startSolo(t, c, admin, victim, disk.Dir)

	disk.Fail(t)
	died := time.Now()
	t.Logf("node %d's disk holding %s-%d (it leads) and %s-%d (it follows) died", victim, topic, led, topic, followed)
	withoutVictim := func(m kmsg.MetadataResponseTopicPartition) bool {
		return m.Leader >= 0 && m.Leader != victim && !slices.Contains(m.ISR, victim)
	}
	for _, p := range []int32{led, followed} {
		m := waitPartition(t, admin, topic, p, 20*time.Second, fmt.Sprintf("led without node %d, which is out of the ISR", victim), withoutVictim)
		t.Logf("%s-%d: leader %d, ISR %v, %v after the disk died", topic, p, m.Leader, m.ISR, time.Since(died).Round(time.Millisecond))
	}
	moved := time.Now()
	for _, p := range []int32{led, followed, healthyLed} {
		testutil.WaitFor(t, 30*time.Second, func() bool { return l.lastAck(p).After(moved) },
			fmt.Sprintf("%s-%d acknowledging writes after node %d's disk died", topic, p, victim))
	}
	if m, _ := partitionState(t, admin, topic, healthyLed); m.Leader != victim {
		t.Fatalf("%s-%d, on node %d's healthy directory, moved to %d", topic, healthyLed, victim, m.Leader)
	}
	if exited, err := c.Node(victim).Exited(); exited {
		t.Fatalf("node %d exited when one of its two disks died: %v\n%s", victim, err, c.Node(victim).Log())
	}
	if !hasLine(c.Node(victim).Log(), "log directory offline after an I/O error") {
		t.Fatalf("node %d did not log its dead directory:\n%s", victim, c.Node(victim).Log())
	}
	checkDeadDir(t, adm, victim, disk.Dir)
	logUnavailability(t, l, fmt.Sprintf("node %d's dead disk", victim), died, []int32{led})
	solo.waitOffline(t, "after the disk died")

	// Killed, then stopped cleanly (SIGTERM: a controlled shutdown that cannot close
	// the dead disk's logs), and started each time with the disk still dead.
	for _, stop := range []string{"kill -9", "SIGTERM"} {
		if stop == "kill -9" {
			c.Node(victim).Kill()
		} else if err := c.Node(victim).Stop(); err != nil {
			t.Fatalf("node %d with a dead disk, stopped with SIGTERM: %v\n%s", victim, err, c.Node(victim).Log())
		}
		stopped := time.Now()
		c.StartAgain(t, victim)
		waitPartition(t, admin, topic, healthyLed, 60*time.Second, fmt.Sprintf("node %d back in the ISR", victim),
			func(m kmsg.MetadataResponseTopicPartition) bool { return slices.Contains(m.ISR, victim) })
		t.Logf("node %d restarted after a %s with its disk dead: back in the ISR of %s-%d %v later", victim, stop, topic, healthyLed, time.Since(stopped).Round(time.Millisecond))
		l.waitAcks(t, 500, fmt.Sprintf("writes after node %d restarted", victim))
		checkDeadDir(t, adm, victim, disk.Dir)
		for _, p := range []int32{led, followed} {
			if m, _ := partitionState(t, admin, topic, p); !withoutVictim(m) {
				t.Fatalf("after a %s: %s-%d has node %d, whose disk holding it is dead, as leader or in the ISR: leader %d, ISR %v", stop, topic, p, victim, m.Leader, m.ISR)
			}
			// The node itself says its replica is offline (Kafka's Metadata does).
			if m, _ := partitionState(t, newNodeClient(t, c.Node(victim).Addr), topic, p); !slices.Contains(m.OfflineReplicas, victim) {
				t.Fatalf("after a %s: %s-%d in node %d's metadata: offline replicas %v, want %d among them", stop, topic, p, victim, m.OfflineReplicas, victim)
			}
		}
	}
	solo.waitOffline(t, "after the restarts with the disk dead")

	// The disk repaired: mounted again, with what its journal had committed.
	c.Node(victim).Kill()
	disk.Repair(t)
	repaired := time.Now()
	c.StartAgain(t, victim)
	waitFullISR(t, admin, topic, partitions, 60*time.Second)
	t.Logf("the disk repaired: node %d in every ISR %v after the restart", victim, time.Since(repaired).Round(time.Millisecond))
	l.waitAcks(t, 500, "writes after the disk was repaired")
	solo.checkBack(t)
	h := l.stop(t)
	h.check(t, c, topic)
	inv.check()
}

// soloPartitions is a topic whose partitions have one replica each, all on the node
// whose disk dies, some of them on that disk: where the node is the last (and only)
// in-sync replica.
type soloPartitions struct {
	c               *testutil.Cluster
	admin           *nodeClient
	node            int32
	onDisk, healthy []int32
	records         int
}

const soloTopic = "deaddisk-solo"

// startSolo creates the topic (4 partitions on node, flush.messages=1 so that what
// is acknowledged survives the dead disk's lost page cache) and writes 20 records to
// each partition.
func startSolo(t *testing.T, c *testutil.Cluster, admin *nodeClient, node int32, disk string) *soloPartitions {
	t.Helper()
	s := &soloPartitions{c: c, admin: admin, node: node, records: 20}
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = soloTopic, -1, -1
	for p := range int32(4) {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = p, []int32{node}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	for k, v := range map[string]string{"min.insync.replicas": "1", "flush.messages": "1"} {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cfg)
	}
	createTopicAs(t, admin, rt)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BrokerAddrs()...), kgo.DefaultProduceTopic(soloTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for p := range int32(4) {
		for i := range s.records {
			v := fmt.Sprintf("solo-%d-%d", p, i)
			if err := cl.ProduceSync(ctxT(t, 30*time.Second), &kgo.Record{Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("producing to %s-%d: %v", soloTopic, p, err)
			}
		}
		if _, err := os.Stat(filepath.Join(disk, fmt.Sprintf("%s-%d", soloTopic, p))); err == nil {
			s.onDisk = append(s.onDisk, p)
		} else {
			s.healthy = append(s.healthy, p)
		}
	}
	if len(s.onDisk) == 0 || len(s.healthy) == 0 {
		t.Fatalf("node %d placed %v of %s's 4 partitions on its second log directory, want some there and some not", node, s.onDisk, soloTopic)
	}
	return s
}

// waitOffline waits until every node shows the partitions on the dead disk without a
// leader and with the node's replica offline, and checks that those on its healthy
// directory are still led by it.
func (s *soloPartitions) waitOffline(t *testing.T, when string) {
	t.Helper()
	for _, n := range s.c.Nodes() {
		cl := newNodeClient(t, n.Addr)
		for _, p := range s.onDisk {
			waitPartition(t, cl, soloTopic, p, 30*time.Second, fmt.Sprintf("%s: without a leader and node %d's replica offline, in node %d's metadata", when, s.node, n.ID),
				func(m kmsg.MetadataResponseTopicPartition) bool {
					return m.Leader == -1 && slices.Equal(m.OfflineReplicas, []int32{s.node})
				})
		}
		for _, p := range s.healthy {
			waitPartition(t, cl, soloTopic, p, 30*time.Second, fmt.Sprintf("%s: led by node %d, in node %d's metadata", when, s.node, n.ID),
				func(m kmsg.MetadataResponseTopicPartition) bool { return m.Leader == s.node })
		}
	}
}

// checkBack waits until every partition is led by the node again and reads back the
// records written to each.
func (s *soloPartitions) checkBack(t *testing.T) {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	for p := range int32(4) {
		waitPartition(t, s.admin, soloTopic, p, 60*time.Second, fmt.Sprintf("led by node %d again", s.node),
			func(m kmsg.MetadataResponseTopicPartition) bool { return m.Leader == s.node })
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.c.BrokerAddrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{soloTopic: offsets}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[int32][]string{}
	ctx := ctxT(t, 60*time.Second)
	for n := 0; n < 4*s.records; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of the %d records of %s back: %v", n, 4*s.records, soloTopic, got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if want := fmt.Sprintf("solo-%d-%d", r.Partition, r.Offset); string(r.Value) != want {
				t.Fatalf("%s-%d offset %d holds %q, want %q", soloTopic, r.Partition, r.Offset, r.Value, want)
			}
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			n++
		})
	}
}

// checkDeadDir: DescribeLogDirs (kadm) reports node's directory dead with
// KAFKA_STORAGE_ERROR and its other directory with its partitions, as Kafka does.
func checkDeadDir(t *testing.T, adm *kadm.Client, node int32, dead string) {
	t.Helper()
	dirs, err := adm.DescribeBrokerLogDirs(ctxT(t, 10*time.Second), node, nil)
	if err != nil {
		t.Fatalf("DescribeLogDirs of node %d: %v", node, err)
	}
	if len(dirs) != 2 {
		t.Fatalf("DescribeLogDirs of node %d: %d directories, want 2", node, len(dirs))
	}
	for _, d := range dirs {
		switch {
		case d.Dir == filepath.Clean(dead) && (!errors.Is(d.Err, kerr.KafkaStorageError) || len(d.Topics) != 0):
			t.Fatalf("DescribeLogDirs of node %d's dead directory: %v with %d topics, want KAFKA_STORAGE_ERROR and none", node, d.Err, len(d.Topics))
		case d.Dir != filepath.Clean(dead) && (d.Err != nil || len(d.Topics) == 0):
			t.Fatalf("DescribeLogDirs of node %d's directory %s: %v with %d topics, want its partitions", node, d.Dir, d.Err, len(d.Topics))
		}
	}
}
