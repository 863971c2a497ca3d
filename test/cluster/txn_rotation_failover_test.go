package cluster

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestTxnRotationAcrossCoordinatorFailover: producer-id rotation at the last epoch
// (KIP-360, KAFKA-20090) when the transaction coordinator moves. A transactional id
// is brought to the epoch before the last with InitProducerId; then the leader of
// its __transaction_state partition is killed (kill -9) and the new leader, which
// loaded the id from the log, must rotate it:
//
//   - at rest: the id reached the last epoch (MaxInt16-1, answered) when its
//     coordinator died; the new coordinator answers the producer's InitProducerId
//     (KIP-360, naming that last epoch) with a new producer id at epoch 0, as Kafka's
//     prepareInitProducerIdTransit does for an exhausted epoch (and its retry with
//     the same), and a franz-go producer with the id commits under it.
//   - open: a franz-go producer at the last epoch has written records in an open
//     transaction when its coordinator dies; the new coordinator aborts it on its
//     timeout under a new producer id at epoch 0, and a new producer commits.
//
// read_committed then holds every committed record once, in order, and none of the
// aborted ones.
func TestTxnRotationAcrossCoordinatorFailover(t *testing.T) {
	t.Parallel()
	c := testutil.StartCluster(t, testutil.ClusterOptions{Overrides: txnOverrides})
	inv := watchInvariants(t, c)
	cl := newNodeClient(t, c.Node(1).Addr)
	const topic = "txn-rotation-failover"
	createTopic(t, cl, topic, 1, 3)
	raw, err := kgo.NewClient(kgo.SeedBrokers(c.BrokerAddrs()...), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RetryTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	ctx := ctxT(t, 6*time.Minute) // the bumps below take minutes under -race
	testutil.WaitFor(t, 30*time.Second, func() bool {
		_, err := findTxnCoordinator(ctx, raw, "txn-rotation-probe")
		return err == nil
	}, "__transaction_state")

	// Both ids are brought to MaxInt16-2 at once: that is most of the test's time.
	const restID, openID = "txn-rotation-rest", "txn-rotation-open"
	pids := map[string]int64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for _, id := range []string{restID, openID} {
		own, err := kgo.NewClient(kgo.SeedBrokers(c.BrokerAddrs()...)) // a connection of its own
		if err != nil {
			t.Fatal(err)
		}
		defer own.Close()
		wg.Go(func() {
			pid, err := bumpEpochTo(ctx, own, id, math.MaxInt16-2)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			pids[id] = pid
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Logf("%s and %s at epoch %d after %v", restID, openID, math.MaxInt16-2, time.Since(start).Round(time.Second))
	if t.Failed() {
		t.FailNow()
	}
	var committed, aborted []string
	newProducer := func(id string, timeout time.Duration) *kgo.Client {
		p, err := kgo.NewClient(kgo.SeedBrokers(c.BrokerAddrs()...), kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic),
			kgo.TransactionTimeout(timeout), kgo.RecordDeliveryTimeout(60*time.Second), kgo.MetadataMinAge(100*time.Millisecond),
			kgo.RequestRetries(1000), kgo.RetryTimeout(60*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	commit := func(p *kgo.Client, prefix string, n int) {
		t.Helper()
		for i := range n {
			vals := []string{fmt.Sprintf("%s-%d-a", prefix, i), fmt.Sprintf("%s-%d-b", prefix, i)}
			if err := runTxn(ctx, p, true, vals...); err != nil {
				t.Fatalf("%s transaction %d: %v", prefix, i, err)
			}
			committed = append(committed, vals...)
		}
	}
	// killCoordinator kills the leader of id's __transaction_state partition, waits
	// for another leader and returns the killed node.
	killCoordinator := func(id string) int32 {
		t.Helper()
		old := txnStateLeader(t, cl, id)
		t.Logf("kill -9 node %d, transaction coordinator of %s", old, id)
		c.Node(old).Kill()
		survivor := clientExcept(t, c, old)
		testutil.WaitFor(t, 60*time.Second, func() bool {
			n, err := findTxnCoordinator(ctx, raw, id)
			return err == nil && n != old
		}, "a new transaction coordinator of "+id)
		t.Logf("transaction coordinator of %s now node %d", id, txnStateLeader(t, survivor, id))
		return old
	}
	restart := func(id int32) {
		t.Helper()
		c.StartAgain(t, id)
		survivor := clientExcept(t, c, id)
		waitFullISR(t, survivor, topic, 1, 60*time.Second)
		waitFullISR(t, survivor, "__transaction_state", int32(len(topicPartitions(t, survivor, "__transaction_state"))), 60*time.Second)
	}

	// At rest: the last epoch answered, then the coordinator dies.
	pid := pids[restID]
	if r, err := initProducerID(ctx, raw, restID, pid, math.MaxInt16-2); err != nil || r.ProducerID != pid || r.ProducerEpoch != math.MaxInt16-1 {
		t.Fatalf("InitProducerId to the last epoch: %v %+v", err, r)
	}
	old := killCoordinator(restID)
	r, err := initProducerID(ctx, raw, restID, pid, math.MaxInt16-1)
	if err != nil || r.ProducerID == pid || r.ProducerEpoch != 0 {
		t.Fatalf("InitProducerId at the last epoch %d/%d on the new coordinator: %v %+v, want a new producer id at epoch 0",
			pid, math.MaxInt16-1, err, r)
	}
	rotated := r.ProducerID
	// Its retry (the answer lost) gets the same answer, without a bump.
	if r, err := initProducerID(ctx, raw, restID, pid, math.MaxInt16-1); err != nil || r.ProducerID != rotated || r.ProducerEpoch != 0 {
		t.Fatalf("the retried InitProducerId at %d/%d: %v %+v, want %d at epoch 0", pid, math.MaxInt16-1, err, r, rotated)
	}
	p := newProducer(restID, 60*time.Second)
	commit(p, "rest", 3)
	if got, epoch, err := p.ProducerID(ctx); err != nil || got != rotated {
		t.Fatalf("the franz-go producer of %s: producer id %d epoch %d (%v), want %d", restID, got, epoch, err, rotated)
	}
	p.Close()
	restart(old)

	// Open: records written at the last epoch, then the coordinator dies.
	pid = pids[openID]
	p = newProducer(openID, 8*time.Second) // the new coordinator aborts it on this timeout
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		v := fmt.Sprintf("open-aborted-%d", i)
		if err := p.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
		aborted = append(aborted, v)
	}
	if got, epoch, err := p.ProducerID(ctx); err != nil || got != pid || epoch != math.MaxInt16-1 {
		t.Fatalf("the open transaction's producer: %d/%d (%v), want %d/%d", got, epoch, err, pid, math.MaxInt16-1)
	}
	if st, err := describeTxn(ctx, raw, openID); err != nil || st.State != "Ongoing" {
		t.Fatalf("the transaction of %s before its coordinator is killed: %s (%v), want Ongoing", openID, st.State, err)
	}
	old = killCoordinator(openID)
	var st kmsg.DescribeTransactionsResponseTransactionState
	deadline := time.Now().Add(60 * time.Second)
	for st, err = describeTxn(ctx, raw, openID); err != nil || st.State != "CompleteAbort"; st, err = describeTxn(ctx, raw, openID) {
		if time.Now().After(deadline) {
			t.Fatalf("the new coordinator did not abort the timed-out transaction of %s: %s at %d/%d (%v)", openID, st.State,
				st.ProducerID, st.ProducerEpoch, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st.ProducerID == pid || st.ProducerEpoch != 0 {
		t.Fatalf("after the timeout abort: producer id %d epoch %d, want a new producer id at 0 (old %d)", st.ProducerID, st.ProducerEpoch, pid)
	}
	p.Close()
	p = newProducer(openID, 60*time.Second)
	commit(p, "open", 3)
	if got, _, err := p.ProducerID(ctx); err != nil || got != st.ProducerID {
		t.Fatalf("the new producer of %s: producer id %d (%v), want %d", openID, got, err, st.ProducerID)
	}
	p.Close()
	restart(old)

	// The history: every committed record once, in order; no aborted one.
	got := testutil.ReadAll(t, c.BrokerAddrs(), topic, true, 60*time.Second)
	if !slices.Equal(got, committed) {
		t.Fatalf("read_committed:\n got %q\nwant %q (aborted: %q)", got, committed, aborted)
	}
	all := testutil.ReadAll(t, c.BrokerAddrs(), topic, false, 60*time.Second)
	for _, v := range aborted {
		if !slices.Contains(all, v) {
			t.Fatalf("aborted record %s is not in the log read_uncommitted: %q", v, all)
		}
	}
	inv.check()
}

// topicPartitions returns a topic's partitions as a node serves them.
func topicPartitions(t *testing.T, cl *nodeClient, topic string) []kmsg.MetadataResponseTopicPartition {
	t.Helper()
	md, err := cl.metadata(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return partitionsOf(md, topic)
}

// findTxnCoordinator asks for the transaction coordinator of id (FindCoordinator
// type 1): its node id.
func findTxnCoordinator(ctx context.Context, c *kgo.Client, id string) (int32, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType, req.CoordinatorKeys = 1, []string{id}
	r, err := req.RequestWith(ctx, c)
	if err != nil {
		return -1, err
	}
	if len(r.Coordinators) != 1 {
		return -1, fmt.Errorf("FindCoordinator %s answered %d coordinators", id, len(r.Coordinators))
	}
	co := r.Coordinators[0]
	return co.NodeID, kerr.ErrorForCode(co.ErrorCode)
}

// runTxn runs one transaction of p with a record per value and commits or aborts it.
func runTxn(ctx context.Context, p *kgo.Client, commit bool, vals ...string) error {
	if err := p.BeginTransaction(); err != nil {
		return err
	}
	var recs []*kgo.Record
	for _, v := range vals {
		recs = append(recs, kgo.StringRecord(v))
	}
	if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	return p.EndTransaction(ctx, kgo.TransactionEndTry(commit))
}

// initProducerID sends InitProducerId for id (with pid and epoch, KIP-360) until it
// is answered with no retriable error. The first attempt goes where c routes it; after
// a failed one, each goes to id's coordinator found anew: c's cached coordinator may be
// a killed node, which c would keep dialing.
func initProducerID(ctx context.Context, c *kgo.Client, id string, pid int64, epoch int16) (*kmsg.InitProducerIDResponse, error) {
	var to kmsg.Requestor = c
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(id), 60000
		req.ProducerID, req.ProducerEpoch = pid, epoch
		r, err := req.RequestWith(ctx, to)
		switch {
		case ctx.Err() != nil:
			return r, ctx.Err()
		case err != nil:
			// Not answered (the node died): try the coordinator found anew.
		default:
			code := r.ErrorCode
			if err := kerr.ErrorForCode(code); err == nil || !kerr.IsRetriable(err) && code != kerr.ConcurrentTransactions.Code {
				return r, err
			}
		}
		time.Sleep(20 * time.Millisecond)
		if node, err := findTxnCoordinator(ctx, c, id); err == nil {
			to = c.Broker(int(node))
		}
	}
}

// bumpEpochTo calls InitProducerId until transactional id id is at epoch target, one
// bump at a time under one producer id, which it returns.
func bumpEpochTo(ctx context.Context, c *kgo.Client, id string, target int16) (int64, error) {
	pid, epoch := int64(-1), int16(-1)
	for epoch != target {
		r, err := initProducerID(ctx, c, id, -1, -1)
		if err != nil {
			return -1, fmt.Errorf("%s: InitProducerId at epoch %d: %w", id, epoch, err)
		}
		if pid >= 0 && (r.ProducerID != pid || r.ProducerEpoch != epoch+1) {
			return -1, fmt.Errorf("%s: InitProducerId after %d/%d gave %d/%d", id, pid, epoch, r.ProducerID, r.ProducerEpoch)
		}
		pid, epoch = r.ProducerID, r.ProducerEpoch
	}
	return pid, nil
}

// describeTxn asks id's transaction coordinator, found anew each time (a client's
// cached coordinator may be a killed node), for id's state.
func describeTxn(ctx context.Context, c *kgo.Client, id string) (kmsg.DescribeTransactionsResponseTransactionState, error) {
	node, err := findTxnCoordinator(ctx, c, id)
	if err != nil {
		return kmsg.DescribeTransactionsResponseTransactionState{}, err
	}
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	r, err := req.RequestWith(ctx, c.Broker(int(node)))
	if err != nil {
		return kmsg.DescribeTransactionsResponseTransactionState{}, err
	}
	if len(r.TransactionStates) != 1 {
		return kmsg.DescribeTransactionsResponseTransactionState{}, fmt.Errorf("DescribeTransactions %s answered %d states", id, len(r.TransactionStates))
	}
	st := r.TransactionStates[0]
	return st, kerr.ErrorForCode(st.ErrorCode)
}
