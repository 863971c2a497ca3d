package cluster

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/coordkey"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// txnOverrides: ISR changes in seconds, the pipeline's 2 s group session timeout, and
// a transaction a killed worker left open aborted within a second of its timeout.
var txnOverrides = append([]string{"min.insync.replicas=2", "group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000",
	"transaction.abort.timed.out.transaction.cleanup.interval.ms=1000"},
	replicationOverrides...)

// eosRun is the exactly-once pipeline a transaction cell runs on a cluster of its
// own: input and output topics of 3 partitions and 3 replicas, the named workers
// started, and n input records being fed (over 20 s at least).
type eosRun struct {
	c       *testutil.Cluster
	inv     *invariants
	cl      *nodeClient // to node 1
	p       *testutil.EOSPipeline
	in      *kgo.Client // the input's producer
	adm     *kadm.Client
	n       int
	workers []string
	fed     <-chan error
}

func startEOSRun(t *testing.T, o testutil.ClusterOptions, name string, n int, workers ...string) *eosRun {
	t.Helper()
	r := &eosRun{c: testutil.StartCluster(t, o), n: n, workers: workers}
	r.inv = watchInvariants(t, r.c)
	r.cl = newNodeClient(t, r.c.Node(1).Addr)
	r.p = testutil.NewEOSPipeline(t, r.c.BrokerAddrs(), name)
	createTopic(t, r.cl, r.p.In, 3, 3)
	createTopic(t, r.cl, r.p.Out, 3, 3)
	for _, w := range workers {
		r.p.Start(w)
	}
	in, err := kgo.NewClient(kgo.SeedBrokers(r.c.BrokerAddrs()...), kgo.RecordDeliveryTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	r.in, r.adm = in, kadm.NewClient(in)
	r.fed = r.p.Feed(in, n, time.Second, 60*time.Second)
	return r
}

// finish waits until the input is written and consumed, stops the workers, and
// checks that the output, read_committed, holds every input record once and that
// the metadata invariants held.
func (r *eosRun) finish(t *testing.T) {
	t.Helper()
	if err := <-r.fed; err != nil {
		r.p.Fatalf("producing the input: %v", err)
	}
	r.p.WaitCaughtUp(r.adm, 120*time.Second)
	r.p.StopAll()
	r.p.WaitSettled(r.adm, 60*time.Second)
	out := testutil.ReadAll(t, r.c.BrokerAddrs(), r.p.Out, true, 60*time.Second)
	if len(out) != r.n {
		ids := make([]string, len(r.workers))
		for i, w := range r.workers {
			ids[i] = "eos-" + w // EOSPipeline.Start's transactional ids
		}
		logTxnState(t, r.adm, ids...)
	}
	testutil.CheckExactlyOnce(t, out, r.n)
	r.inv.check()
}

// TestExactlyOnceAcrossFailover: the consume-transform-produce pipeline (three
// GroupTransactSession processes) runs on a three-node cluster while the leader of a
// worker's __transaction_state partition (its transaction coordinator, which moves
// with the leadership and completes what its predecessor prepared) and then the
// leader of an input partition are killed with kill -9 and brought back, and a worker
// is killed too: the output read_committed holds every input record exactly once.
func TestExactlyOnceAcrossFailover(t *testing.T) {
	t.Parallel()
	const n = 20000
	r := startEOSRun(t, testutil.ClusterOptions{Overrides: txnOverrides, Metrics: true}, "eos", n, "a", "b", "c")
	c, p := r.c, r.p
	start := time.Now()
	phase := func(what string) { t.Logf("%5.1fs %s (progress %d)", time.Since(start).Seconds(), what, p.Progress()) }

	// The coordinator of worker a's transactional id.
	p.WaitProgress(n/5, 120*time.Second)
	phase("a fifth committed")
	coordinator := txnStateLeader(t, r.cl, "eos-a")
	t.Logf("kill -9 node %d, transaction coordinator of eos-a", coordinator)
	c.Node(coordinator).Kill()
	survivor := clientExcept(t, c, coordinator)
	p.WaitProgress(3*n/10, 120*time.Second)
	phase("three tenths committed")
	c.StartAgain(t, coordinator)
	waitFullISR(t, survivor, p.In, 3, 60*time.Second)
	phase("the coordinator's node is back in the ISR")

	// An input partition's leader.
	p.WaitProgress(n/2, 120*time.Second)
	pt, _ := partitionState(t, survivor, p.In, 0)
	t.Logf("kill -9 node %d, leader of %s-0", pt.Leader, p.In)
	c.Node(pt.Leader).Kill()
	p.Restart("b")
	p.WaitProgress(4*n/5, 120*time.Second)
	phase("four fifths committed")
	c.StartAgain(t, pt.Leader)
	r.finish(t)
	// The coordinators wrote their markers to the other nodes' partitions as
	// WriteTxnMarkers v2 (KIP-1228), naming the transactions' version.
	v2 := 0.0
	for _, node := range c.Nodes() {
		v2 += max(metricWith(t, node, "samsa_requests_total", map[string]string{"api": "WriteTxnMarkers", "version": "2"}), 0)
	}
	if v2 == 0 {
		t.Error("no node took a WriteTxnMarkers v2 request: samsa_requests_total{api=WriteTxnMarkers,version=2} is 0 on every node")
	}
}

// logTxnState logs, for a failure's diagnosis, the state of each transactional id
// (WaitSettled has already checked that no transaction holds an output partition's
// last stable offset back).
func logTxnState(t *testing.T, adm *kadm.Client, txnIDs ...string) {
	t.Helper()
	txns, err := adm.DescribeTransactions(ctxT(t, 10*time.Second), txnIDs...)
	if err != nil {
		t.Logf("describing the transactions: %v", err)
		return
	}
	for _, d := range txns.Sorted() {
		t.Logf("transaction %s: %s, producer %d epoch %d, coordinator %d, partitions %v", d.TxnID, d.State, d.ProducerID, d.ProducerEpoch,
			d.Coordinator, d.Topics)
	}
}

// txnStateLeader returns the leader of the __transaction_state partition of a
// transactional id, once the topic exists.
func txnStateLeader(t *testing.T, cl *nodeClient, id string) int32 {
	t.Helper()
	var leader int32 = -1
	testutil.WaitFor(t, 30*time.Second, func() bool {
		md, err := cl.metadata(ctxT(t, 5*time.Second))
		if err != nil {
			return false
		}
		parts := partitionsOf(md, "__transaction_state")
		p := coordkey.Partition(id, int32(len(parts)))
		for _, mp := range parts {
			if mp.Partition == p && mp.Leader >= 0 {
				leader = mp.Leader
				return true
			}
		}
		return false
	}, fmt.Sprintf("the coordinator of %s", id))
	return leader
}

// logShortOutput says where the values missing from a read_committed output are: each
// partition's last stable offset and high watermark, the producers with a
// transaction open there, and, read_uncommitted, the partition, offset and producer
// of the first missing values (absent: never written; present: hidden by an abort
// or by a last stable offset held back).
func logShortOutput(t *testing.T, adm *kadm.Client, brokers []string, topic string, committed []string, n int) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	lso, err1 := adm.ListCommittedOffsets(ctx, topic)
	hw, err2 := adm.ListEndOffsets(ctx, topic)
	if err := errors.Join(err1, err2); err != nil {
		t.Logf("listing the offsets of %s: %v", topic, err)
		return
	}
	for p := range int32(len(hw[topic])) {
		t.Logf("%s/%d: last stable offset %d, high watermark %d", topic, p, lso[topic][p].Offset, hw[topic][p].Offset)
	}
	if ps, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: nil}); err == nil {
		for _, p := range ps.SortedProducers() {
			if p.CurrentTxnStartOffset >= 0 {
				t.Logf("%s/%d: producer %d epoch %d has a transaction open since offset %d (coordinator epoch %d)",
					topic, p.Partition, p.ProducerID, p.ProducerEpoch, p.CurrentTxnStartOffset, p.CoordinatorEpoch)
			}
		}
	}
	seen := map[string]bool{}
	for _, v := range committed {
		seen[v] = true
	}
	missing := map[string]bool{}
	for i := range n {
		if v := testutil.EOSValue(i); !seen[v] && len(missing) < 5 {
			missing[v] = true
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.KeepControlRecords())
	if err != nil {
		t.Logf("locating the missing values: %v", err)
		return
	}
	defer cl.Close()
	pos := map[int32]int64{}
	for {
		done := true
		for p, o := range hw[topic] {
			done = done && pos[p] >= o.Offset
		}
		if done {
			return
		}
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Logf("stopped locating the missing values at %v", pos)
			return
		}
		fs.EachRecord(func(r *kgo.Record) {
			pos[r.Partition] = r.Offset + 1
			if missing[string(r.Value)] && !r.Attrs.IsControl() {
				t.Logf("missing value %s is at %s/%d offset %d, producer %d epoch %d", r.Value, topic, r.Partition, r.Offset, r.ProducerID, r.ProducerEpoch)
			}
		})
	}
}
