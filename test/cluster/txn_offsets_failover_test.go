package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/coordkey"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// txnOffsetsRig drives one transactional producer whose transaction coordinator is on
// another node than its group's coordinator, and reads the group's offsets with
// OffsetFetch (RequireStable) straight from the group coordinator.
type txnOffsetsRig struct {
	t           *testing.T
	c           *testutil.Cluster
	group, id   string
	in, out     string
	prod        *kgo.Client
	adm         *kadm.Client
	acked       []string // values of the committed transactions, in order
	txnNode     int32
	inID        [16]byte // the input topic's id (OffsetFetch v10)
	produceNext int
}

func newTxnOffsetsRig(t *testing.T, c *testutil.Cluster, name string) *txnOffsetsRig {
	cl := newNodeClient(t, c.Node(1).Addr)
	r := &txnOffsetsRig{t: t, c: c, group: name + "-g", in: name + "-in", out: name + "-out"}
	createTopic(t, cl, r.in, 1, 3)
	createTopic(t, cl, r.out, 1, 3)
	base, err := kgo.NewClient(kgo.SeedBrokers(c.BrokerAddrs()...), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(base.Close)
	r.adm = kadm.NewClient(base)
	groupNode := groupCoordinator(t, r.adm, r.group)
	md, err := cl.metadata(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, mt := range md.Topics {
		if deref(mt.Topic) == r.in {
			r.inID = mt.TopicID
		}
	}
	// The preferred replica of the group's partition, where coordinatorOffTxnNode
	// brings the coordinator back.
	preferred := groupNode
	gp := coordkey.Partition(r.group, int32(len(partitionsOf(md, "__consumer_offsets"))))
	for _, mp := range partitionsOf(md, "__consumer_offsets") {
		if mp.Partition == gp && len(mp.Replicas) > 0 {
			preferred = mp.Replicas[0]
		}
	}
	// A transactional id whose coordinator is not the group's.
	testutil.WaitFor(t, 30*time.Second, func() bool {
		return r.adm.FindTxnCoordinators(ctxT(t, 5*time.Second), name+"-probe").Error() == nil
	}, "__transaction_state")
	for i := 0; r.id == ""; i++ {
		id := fmt.Sprintf("%s-tx-%d", name, i)
		if node := txnStateLeader(t, cl, id); node != groupNode && node != preferred {
			r.id, r.txnNode = id, node
		}
		if i > 200 {
			t.Fatal("no transactional id with a coordinator other than the group's")
		}
	}
	t.Logf("group %s on node %d, transactional id %s on node %d", r.group, groupNode, r.id, r.txnNode)
	r.prod, err = kgo.NewClient(kgo.SeedBrokers(c.BrokerAddrs()...), kgo.TransactionalID(r.id), kgo.DefaultProduceTopic(r.out),
		kgo.TransactionTimeout(60*time.Second), kgo.RecordDeliveryTimeout(60*time.Second), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RequestRetries(1000), kgo.RetryTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.prod.Close)
	return r
}

// begin opens a transaction, writes n records to the output and commits offset at
// into the group in it (AddOffsetsToTxn, TxnOffsetCommit). It returns the values.
func (r *txnOffsetsRig) begin(n int, at int64) []string {
	t := r.t
	ctx := ctxT(t, 90*time.Second)
	if err := r.prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var values []string
	for range n {
		v := fmt.Sprintf("v-%04d", r.produceNext)
		r.produceNext++
		if err := r.prod.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
		values = append(values, v)
	}
	pid, epoch, err := r.prod.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r.retry(ctx, "AddOffsetsToTxn", func() (int16, error) {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = r.id, pid, epoch, r.group
		resp, err := req.RequestWith(ctx, r.prod)
		if err != nil {
			return 0, err
		}
		return resp.ErrorCode, nil
	})
	r.retry(ctx, "TxnOffsetCommit", func() (int16, error) {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = r.id, r.group, pid, epoch
		req.Generation = -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = r.in, r.inID // by name up to v5, by id from v6
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = 0, at, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, r.prod)
		if err != nil {
			return 0, err
		}
		return resp.Topics[0].Partitions[0].ErrorCode, nil
	})
	return values
}

// end ends the open transaction; values are its records.
func (r *txnOffsetsRig) end(commit bool, values []string) {
	ctx := ctxT(r.t, 90*time.Second)
	if err := r.prod.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		r.t.Fatalf("EndTxn (commit %v): %v", commit, err)
	}
	if commit {
		r.acked = append(r.acked, values...)
	}
}

func (r *txnOffsetsRig) retry(ctx context.Context, what string, send func() (int16, error)) {
	r.t.Helper()
	for {
		code, err := send()
		if err == nil && code == 0 {
			return
		}
		if err == nil {
			err = kerr.ErrorForCode(code)
		}
		if !kerr.IsRetriable(err) && code != kerr.ConcurrentTransactions.Code && code != 0 || ctx.Err() != nil {
			r.t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fetchStable asks the group's coordinator for the committed offset of the input
// partition with RequireStable: the offset, or the partition's error code.
func (r *txnOffsetsRig) fetchStable() (int64, int16, error) {
	node, err := tryGroupCoordinator(r.adm, r.group)
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrOffsetFetchRequest() // v8+: the groups carry the topics
	req.RequireStable = true
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = r.group
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic, rt.TopicID, rt.Partitions = r.in, r.inID, []int32{0}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, r.prod.Broker(int(node)))
	if err != nil {
		return 0, 0, err
	}
	if len(resp.Groups) != 1 {
		return 0, 0, fmt.Errorf("OffsetFetch answered %d groups (version %d)", len(resp.Groups), req.Version)
	}
	g := resp.Groups[0]
	if g.ErrorCode != 0 {
		return 0, g.ErrorCode, nil
	}
	if len(g.Topics) == 0 || len(g.Topics[0].Partitions) == 0 {
		return -1, 0, nil
	}
	p := g.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode, nil
}

// waitStable waits until the group's offset reads want with RequireStable.
func (r *txnOffsetsRig) waitStable(want int64, d time.Duration) {
	r.t.Helper()
	var last string
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		off, code, err := r.fetchStable()
		if err == nil && code == 0 && off == want {
			return
		}
		last = fmt.Sprintf("offset %d code %d (%v) err %v", off, code, kerr.ErrorForCode(code), err)
		time.Sleep(100 * time.Millisecond)
	}
	r.t.Fatalf("group %s: stable offset of %s-0 never %d; last: %s", r.group, r.in, want, last)
}

// waitUnstable waits until OffsetFetch(RequireStable) answers UNSTABLE_OFFSET_COMMIT:
// the coordinator knows the transaction's pending offset.
func (r *txnOffsetsRig) waitUnstable(d time.Duration) {
	r.t.Helper()
	var last string
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		off, code, err := r.fetchStable()
		if err == nil && code == kerr.UnstableOffsetCommit.Code {
			return
		}
		last = fmt.Sprintf("offset %d code %d err %v", off, code, err)
		time.Sleep(100 * time.Millisecond)
	}
	r.t.Fatalf("group %s: the pending offset is not seen (no UNSTABLE_OFFSET_COMMIT); last: %s", r.group, last)
}

// checkHistory: the output read_committed holds the committed transactions' records
// once each, in order, and nothing else.
func (r *txnOffsetsRig) checkHistory() {
	out := testutil.ReadAll(r.t, r.c.BrokerAddrs(), r.out, true, 60*time.Second)
	if !slices.Equal(out, r.acked) {
		r.t.Fatalf("output read_committed:\n got %v\nwant %v", out, r.acked)
	}
}

// restart starts node id again and waits until every partition the test writes has
// its replicas in the ISR again.
func (r *txnOffsetsRig) restart(id int32) {
	r.c.StartAgain(r.t, id)
	r.waitISR(id)
}

// waitISR waits until the partitions the test writes have every replica in the ISR;
// id is a node not to ask.
func (r *txnOffsetsRig) waitISR(id int32) {
	cl := clientExcept(r.t, r.c, id)
	waitFullISR(r.t, cl, r.out, 1, 60*time.Second)
	for _, k := range []struct{ topic, key string }{{"__consumer_offsets", r.group}, {"__transaction_state", r.id}} {
		md, err := cl.metadata(ctxT(r.t, 5*time.Second))
		if err != nil {
			r.t.Fatal(err)
		}
		p := coordkey.Partition(k.key, int32(len(partitionsOf(md, k.topic))))
		waitPartition(r.t, cl, k.topic, p, 60*time.Second, "every replica back in the ISR", func(m kmsg.MetadataResponseTopicPartition) bool {
			return m.Leader >= 0 && len(m.ISR) == len(m.Replicas)
		})
	}
}

// coordinatorOffTxnNode returns the group's coordinator once it is on another node
// than the transaction's: a failover may have moved it there, and then the preferred
// replica of the group's __consumer_offsets partition (never the transaction's node,
// see newTxnOffsetsRig) is elected its leader again.
func (r *txnOffsetsRig) coordinatorOffTxnNode() int32 {
	cl := newNodeClient(r.t, r.c.Node(r.txnNode).Addr)
	md, err := cl.metadata(ctxT(r.t, 5*time.Second))
	if err != nil {
		r.t.Fatal(err)
	}
	p := coordkey.Partition(r.group, int32(len(partitionsOf(md, "__consumer_offsets"))))
	var node int32
	testutil.WaitFor(r.t, 60*time.Second, func() bool {
		n, err := tryGroupCoordinator(r.adm, r.group)
		if node = n; err == nil && n != r.txnNode {
			return true
		}
		req := kmsg.NewPtrElectLeadersRequest()
		req.SetVersion(2)
		req.TimeoutMillis = 5000
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = "__consumer_offsets", []int32{p}
		req.Topics = append(req.Topics, rt)
		_, _ = cl.request(ctxT(r.t, 10*time.Second), req)
		return false
	}, "the coordinator of "+r.group+" on another node than the transaction's")
	return node
}

// newCoordinator waits for the group's coordinator to be a node other than old.
func (r *txnOffsetsRig) newCoordinator(old int32) int32 {
	var node int32
	testutil.WaitFor(r.t, 60*time.Second, func() bool {
		n, err := tryGroupCoordinator(r.adm, r.group)
		node = n
		return err == nil && n != old
	}, "a new coordinator of "+r.group)
	return node
}

// TestTxnOffsetsGroupCoordinatorKilled: a transaction has committed offsets into a
// group (AddOffsetsToTxn, TxnOffsetCommit) when the group's coordinator, on another
// node than the transaction's, is killed (kill -9). The new coordinator loads the
// pending offsets from __consumer_offsets (RequireStable answers
// UNSTABLE_OFFSET_COMMIT), and applies the commit marker when it arrives; in the next
// transaction, after another kill, the abort marker discards them. The coordinator
// killed while the transaction is open is paused (SIGSTOP) the third time. A plain
// OffsetCommit acknowledged just before a kill is there afterwards.
func TestTxnOffsetsGroupCoordinatorKilled(t *testing.T) {
	t.Parallel()
	c := testutil.StartCluster(t, testutil.ClusterOptions{Overrides: txnOverrides})
	inv := watchInvariants(t, c)
	r := newTxnOffsetsRig(t, c, "tofk")

	// A committed transaction before any fault.
	r.end(true, r.begin(3, 3))
	r.waitStable(3, 30*time.Second)

	// Commit across a kill -9 of the group's coordinator.
	values := r.begin(3, 6)
	r.waitUnstable(10 * time.Second)
	old := groupCoordinator(t, r.adm, r.group)
	if old == r.txnNode {
		t.Fatalf("the group's coordinator moved to the transaction's (%d)", old)
	}
	t.Logf("kill -9 node %d, coordinator of %s", old, r.group)
	c.Node(old).Kill()
	moved := r.newCoordinator(old)
	t.Logf("coordinator of %s now node %d", r.group, moved)
	r.waitUnstable(30 * time.Second)
	r.end(true, values)
	r.waitStable(6, 30*time.Second)
	r.restart(old)

	// Abort across a kill -9.
	old = r.coordinatorOffTxnNode()
	values = r.begin(2, 100)
	r.waitUnstable(10 * time.Second)
	t.Logf("kill -9 node %d, coordinator of %s", old, r.group)
	c.Node(old).Kill()
	r.newCoordinator(old)
	r.waitUnstable(30 * time.Second)
	r.end(false, values)
	r.waitStable(6, 30*time.Second)
	r.restart(old)

	// Commit across a SIGSTOP of the coordinator, resumed after the commit.
	old = r.coordinatorOffTxnNode()
	values = r.begin(2, 9)
	t.Logf("SIGSTOP node %d, coordinator of %s", old, r.group)
	c.Node(old).Pause()
	r.newCoordinator(old)
	r.waitUnstable(30 * time.Second)
	r.end(true, values)
	r.waitStable(9, 30*time.Second)
	c.Node(old).Resume()
	r.waitISR(old)

	// A plain commit acknowledged just before a kill.
	old = r.coordinatorOffTxnNode()
	offs := kadm.Offsets{}
	offs.AddOffset(r.in, 0, 42, -1)
	resp, err := r.adm.CommitOffsets(ctxT(t, 30*time.Second), r.group, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("OffsetCommit: %v", err)
	}
	t.Logf("kill -9 node %d, coordinator of %s", old, r.group)
	c.Node(old).Kill()
	r.newCoordinator(old)
	r.waitStable(42, 30*time.Second)
	r.restart(old)

	r.checkHistory()
	inv.check()
}

// TestExactlyOnceGroupCoordinatorFailover: the consume-transform-produce pipeline
// (GroupTransactSession, read_committed, RequireStable offset fetches) runs while the
// coordinator of its group — where each transaction commits its offsets — is killed
// with kill -9, brought back, then paused (SIGSTOP) and resumed: the group's committed
// offsets reach the input's end (no pending offset stays stuck) and the output
// read_committed holds every input record exactly once.
func TestExactlyOnceGroupCoordinatorFailover(t *testing.T) {
	t.Parallel()
	const n = 6000
	r := startEOSRun(t, testutil.ClusterOptions{Overrides: txnOverrides}, "eosg", n, "a", "b")
	c, p, adm := r.c, r.p, r.adm

	p.WaitProgress(n/4, 120*time.Second)
	coordinator := groupCoordinator(t, adm, p.Group)
	t.Logf("kill -9 node %d, coordinator of group %s (progress %d)", coordinator, p.Group, p.Progress())
	c.Node(coordinator).Kill()
	survivor := clientExcept(t, c, coordinator)
	p.WaitProgress(p.Progress()+n/10, 120*time.Second) // committed through the new coordinator
	c.StartAgain(t, coordinator)
	waitFullISR(t, survivor, p.In, 3, 60*time.Second)
	waitFullISR(t, survivor, p.Out, 3, 60*time.Second)

	p.WaitProgress(3*n/5, 120*time.Second)
	coordinator = groupCoordinator(t, adm, p.Group)
	t.Logf("SIGSTOP node %d, coordinator of group %s (progress %d)", coordinator, p.Group, p.Progress())
	c.Node(coordinator).Pause()
	p.WaitProgress(p.Progress()+n/10, 120*time.Second)
	c.Node(coordinator).Resume()
	t.Logf("SIGCONT node %d (progress %d)", coordinator, p.Progress())
	r.finish(t)
}
