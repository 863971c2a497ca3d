package integration

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// Producer epoch exhaustion (KIP-360, KIP-890): an epoch is an int16, MaxInt16 is kept
// for fencing, and a transactional id whose epoch is used up moves to a new producer
// id at epoch 0 — at InitProducerId, or (transactions v2) at the EndTxn that bumps the
// last epoch, whose markers go out under the old id at MaxInt16.

// TestTxnEpochExhaustionFranz: franz-go transactional producers keep committing and
// aborting across the move to a new producer id, on transactions v2 (EndTxn v5 bumps
// the epoch at every end) and on the first protocol (each new producer bumps it by
// InitProducerId); read_committed holds exactly the committed records, in order.
func TestTxnEpochExhaustionFranz(t *testing.T) {
	t.Parallel()
	v1 := kversion.Stable()
	v1.SetMaxKeyVersion(int16(kmsg.Produce), 11)
	v1.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
	v1.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 4)
	for _, tc := range []struct {
		name               string
		startEpoch         int16
		producers, perEach int
		opts               []kgo.Opt
	}{
		{"transactions v2", math.MaxInt16 - 7, 1, 16, nil},
		{"transactions v1", math.MaxInt16 - 4, 5, 3, []kgo.Opt{kgo.MaxVersions(v1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := testutil.StartBroker(t, "transaction.state.log.num.partitions=1")
			const topic, id = "txn-exhaustion", "txn-exhaustion"
			createTopic(t, newAdmin(t, b), topic, 1, nil)
			raw := newClient(t, b)
			ctx := ctxT(t, 3*time.Minute)
			first := bumpEpochTo(t, ctx, raw, id, tc.startEpoch)
			var want []string
			for i := range tc.producers {
				p := newClient(t, b, append([]kgo.Opt{kgo.TransactionalID(id), kgo.TransactionTimeout(30 * time.Second),
					kgo.DefaultProduceTopic(topic)}, tc.opts...)...)
				for j := range tc.perEach {
					commit := j%3 != 1
					v := fmt.Sprintf("producer-%d-txn-%02d", i, j)
					if err := runTxn(ctx, p, commit, v+"-a", v+"-b"); err != nil {
						st, _ := describeTxn(ctx, raw, id)
						t.Fatalf("%s (commit %v): %v; coordinator %s at %d/%d", v, commit, err, st.State, st.ProducerID, st.ProducerEpoch)
					}
					if commit {
						want = append(want, v+"-a", v+"-b")
					}
				}
				p.Close()
			}
			if st, err := describeTxn(ctx, raw, id); err != nil || st.ProducerID == first {
				t.Fatalf("the producer id did not change (started at %d/%d): %+v %v", first, tc.startEpoch, st, err)
			}
			if got := readAll(t, b, topic, true); !slices.Equal(got, want) {
				t.Fatalf("read_committed: %q, want %q", got, want)
			}
		})
	}
}

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

// TestTxnNewProducerIDWhileMarkersAreWritten: transactions v2. The EndTxn v5 commit
// at the last epoch answers a new producer id as soon as the commit is prepared; the
// next transaction's first Produce (v12, whose leader adds the partition for it) with
// the new id may reach the coordinator while the old id's markers, to many partitions,
// are still being written. It must be answered with something a producer retries, not
// a fatal INVALID_PRODUCER_ID_MAPPING / INVALID_PRODUCER_EPOCH, and go through.
func TestTxnNewProducerIDWhileMarkersAreWritten(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t, "transaction.state.log.num.partitions=1")
	const topic, id, partitions = "txn-new-id", "txn-new-id", 200
	createTopic(t, newAdmin(t, b), topic, partitions, nil)
	c := pinnedClient(t, b, map[kmsg.Key]int16{kmsg.Produce: 12, kmsg.EndTxn: 5})
	ctx := ctxT(t, 3*time.Minute)
	tid := topicID(t, c, topic)
	pid := bumpEpochTo(t, ctx, c, id, math.MaxInt16-1)
	for p := range int32(partitions) {
		if code := produceTxnTo(ctx, c, id, topic, tid, p, txnBatch(pid, math.MaxInt16-1, 0, fmt.Sprint("old-", p))); code != 0 {
			t.Fatalf("produce to partition %d: %v", p, kerr.ErrorForCode(code))
		}
	}
	end, err := endTxnAt(ctx, c, id, pid, math.MaxInt16-1, true)
	if err != nil || end.ProducerID == pid || end.ProducerEpoch != 0 {
		t.Fatalf("the commit at the last epoch: %v %+v", err, end)
	}
	var code int16
	testutil.WaitFor(t, 30*time.Second, func() bool {
		code = produceTxnTo(ctx, c, id, topic, tid, 0, txnBatch(end.ProducerID, 0, 0, "new-0"))
		switch code {
		case kerr.InvalidProducerEpoch.Code, kerr.InvalidProducerIDMapping.Code, kerr.ProducerFenced.Code:
			t.Fatalf("the new producer id's first produce: %v, which ends the producer", kerr.ErrorForCode(code))
		}
		return code == 0
	}, "the new producer id's first produce")
	if end, err := endTxnAt(ctx, c, id, end.ProducerID, 0, true); err != nil || end.ProducerEpoch != 1 {
		t.Fatalf("the new producer id's commit: %v %+v", err, end)
	}
	got := readAll(t, b, topic, true)
	if len(got) != partitions+1 || !slices.Contains(got, "new-0") {
		t.Fatalf("read_committed: %d records (want %d), new-0 among them: %v", len(got), partitions+1, slices.Contains(got, "new-0"))
	}
}

// TestTxnNoProducerAtTheFencingEpoch: a transactions v1 transaction (its partition
// added by AddPartitionsToTxn v3, its batch a v11 Produce) timed out at the last epoch
// is fenced at MaxInt16, which no producer may then use: an AddPartitionsToTxn, a
// transactions v2 Produce and an EndTxn naming MaxInt16 are refused (had they been let
// in, the next fence would have wrapped the epoch to -32768 and left a transaction
// open in the partition for good). The next InitProducerId moves to a new producer id,
// which commits; read_committed and the last stable offset are not held up.
func TestTxnNoProducerAtTheFencingEpoch(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t, "transaction.state.log.num.partitions=1",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms=300")
	const topic, id = "txn-fencing-epoch", "txn-fencing-epoch"
	adm := newAdmin(t, b)
	createTopic(t, adm, topic, 1, nil)
	c := pinnedClient(t, b, map[kmsg.Key]int16{kmsg.Produce: 12, kmsg.EndTxn: 5, kmsg.AddPartitionsToTxn: 3})
	ctx := ctxT(t, 3*time.Minute)
	tid := topicID(t, c, topic)
	pid := bumpEpochTo(t, ctx, c, id, math.MaxInt16-2)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr(id), 1000 // times out
	init.ProducerID, init.ProducerEpoch = pid, math.MaxInt16-2
	if r, err := init.RequestWith(ctx, c); err != nil || r.ErrorCode != 0 || r.ProducerEpoch != math.MaxInt16-1 {
		t.Fatalf("InitProducerId to the last epoch: %v %+v", err, r)
	}
	v1 := pinnedClient(t, b, map[kmsg.Key]int16{kmsg.Produce: 11, kmsg.AddPartitionsToTxn: 3})
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, pid, math.MaxInt16-1
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = topic, []int32{0}
	add.Topics = append(add.Topics, at)
	if r, err := add.RequestWith(ctx, v1); err != nil || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn v3 at the last epoch: %v %+v", err, r)
	}
	if code := produceTxnTo(ctx, v1, id, topic, tid, 0, txnBatch(pid, math.MaxInt16-1, 0, "timed-out")); code != 0 {
		t.Fatalf("produce at the last epoch: %v", kerr.ErrorForCode(code))
	}
	testutil.WaitFor(t, 20*time.Second, func() bool {
		st, err := describeTxn(ctx, c, id)
		return err == nil && st.State == "CompleteAbort" && st.ProducerEpoch == math.MaxInt16
	}, "the timed-out transaction fenced at MaxInt16")

	add = kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, pid, math.MaxInt16
	add.Topics = append(add.Topics, at)
	if r, err := add.RequestWith(ctx, c); err != nil || r.Topics[0].Partitions[0].ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("AddPartitionsToTxn at MaxInt16: %v %+v, want PRODUCER_FENCED", err, r)
	}
	if code := produceTxnTo(ctx, c, id, topic, tid, 0, txnBatch(pid, math.MaxInt16, 0, "at-max")); code == 0 {
		t.Fatalf("a transactions v2 produce at MaxInt16 was accepted")
	}
	if _, err := endTxnAt(ctx, c, id, pid, math.MaxInt16, true); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("EndTxn v5 at MaxInt16: %v, want PRODUCER_FENCED", err)
	}

	r, err := initProducerID(ctx, c, id, -1, -1)
	if err != nil || r.ProducerID == pid || r.ProducerEpoch != 0 {
		t.Fatalf("InitProducerId after the fence at MaxInt16: %v %+v, want a new producer id at 0", err, r)
	}
	if code := produceTxnTo(ctx, c, id, topic, tid, 0, txnBatch(r.ProducerID, 0, 0, "committed")); code != 0 {
		t.Fatalf("the new producer id's produce: %v", kerr.ErrorForCode(code))
	}
	if _, err := endTxnAt(ctx, c, id, r.ProducerID, 0, true); err != nil {
		t.Fatalf("the new producer id's commit: %v", err)
	}
	if got := readAll(t, b, topic, true); !slices.Equal(got, []string{"committed"}) {
		t.Fatalf("read_committed: %q", got)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		lso, err1 := adm.ListCommittedOffsets(ctx, topic)
		hw, err2 := adm.ListEndOffsets(ctx, topic)
		l, _ := lso.Lookup(topic, 0)
		h, _ := hw.Lookup(topic, 0)
		return err1 == nil && err2 == nil && l.Offset == h.Offset
	}, "the last stable offset to reach the high watermark")
}

// TestTxnV2TimeoutAtTheLastEpochRotates: a transactions v2 transaction (its partition
// added by a v12 Produce) timed out at the last epoch is aborted under a new producer
// id, as Kafka does since KAFKA-20090: its markers are the old id's at MaxInt16, the
// transactional id moves to the new id at epoch 0, and the producer's late abort at
// its old epoch is answered with the new id, which then commits.
func TestTxnV2TimeoutAtTheLastEpochRotates(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t, "transaction.state.log.num.partitions=1",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms=300")
	const topic, id = "txn-v2-timeout-rotates", "txn-v2-timeout-rotates"
	adm := newAdmin(t, b)
	createTopic(t, adm, topic, 1, nil)
	c := pinnedClient(t, b, map[kmsg.Key]int16{kmsg.Produce: 12, kmsg.EndTxn: 5})
	ctx := ctxT(t, 3*time.Minute)
	tid := topicID(t, c, topic)
	pid := bumpEpochTo(t, ctx, c, id, math.MaxInt16-2)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr(id), 1000 // times out
	init.ProducerID, init.ProducerEpoch = pid, math.MaxInt16-2
	if r, err := init.RequestWith(ctx, c); err != nil || r.ErrorCode != 0 || r.ProducerEpoch != math.MaxInt16-1 {
		t.Fatalf("InitProducerId to the last epoch: %v %+v", err, r)
	}
	if code := produceTxnTo(ctx, c, id, topic, tid, 0, txnBatch(pid, math.MaxInt16-1, 0, "timed-out")); code != 0 {
		t.Fatalf("produce at the last epoch: %v", kerr.ErrorForCode(code))
	}
	var st kmsg.DescribeTransactionsResponseTransactionState
	testutil.WaitFor(t, 20*time.Second, func() bool {
		var err error
		st, err = describeTxn(ctx, c, id)
		return err == nil && st.State == "CompleteAbort"
	}, "the timed-out transaction aborted")
	if st.ProducerID == pid || st.ProducerEpoch != 0 {
		t.Fatalf("after the abort: producer id %d epoch %d, want a new producer id at 0 (old %d)", st.ProducerID, st.ProducerEpoch, pid)
	}
	r, err := endTxnAt(ctx, c, id, pid, math.MaxInt16-1, false)
	if err != nil || r.ProducerID != st.ProducerID || r.ProducerEpoch != 0 {
		t.Fatalf("the late abort at the old epoch: %v %+v, want producer id %d at 0", err, r, st.ProducerID)
	}
	if code := produceTxnTo(ctx, c, id, topic, tid, 0, txnBatch(st.ProducerID, 0, 0, "committed")); code != 0 {
		t.Fatalf("the new producer id's produce: %v", kerr.ErrorForCode(code))
	}
	if _, err := endTxnAt(ctx, c, id, st.ProducerID, 0, true); err != nil {
		t.Fatalf("the new producer id's commit: %v", err)
	}
	if got := readAll(t, b, topic, true); !slices.Equal(got, []string{"committed"}) {
		t.Fatalf("read_committed: %q", got)
	}
}

// initProducerID sends InitProducerId for transactional id id (KIP-360: with the
// producer id and epoch the producer had, or -1, -1).
func initProducerID(ctx context.Context, c *kgo.Client, id string, pid int64, epoch int16) (*kmsg.InitProducerIDResponse, error) {
	return untilSettled(ctx, func() (*kmsg.InitProducerIDResponse, int16, error) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(id), 60000
		req.ProducerID, req.ProducerEpoch = pid, epoch
		r, err := req.RequestWith(ctx, c)
		if err != nil {
			return nil, 0, err
		}
		return r, r.ErrorCode, nil
	})
}

// untilSettled sends a transaction coordinator request until its answer is neither
// retriable nor CONCURRENT_TRANSACTIONS: the answer, with its error.
func untilSettled[R any](ctx context.Context, send func() (R, int16, error)) (R, error) {
	for {
		r, code, err := send()
		if err != nil {
			return r, err
		}
		if err := kerr.ErrorForCode(code); err == nil || !kerr.IsRetriable(err) && code != kerr.ConcurrentTransactions.Code || ctx.Err() != nil {
			return r, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// bumpEpochTo calls InitProducerId until transactional id id is at epoch target, one
// bump at a time under one producer id, which it returns.
func bumpEpochTo(t *testing.T, ctx context.Context, c *kgo.Client, id string, target int16) int64 {
	t.Helper()
	pid, epoch := int64(-1), int16(-1)
	for epoch != target {
		r, err := initProducerID(ctx, c, id, -1, -1)
		if err != nil {
			t.Fatalf("InitProducerId at epoch %d: %v", epoch, err)
		}
		if pid >= 0 && (r.ProducerID != pid || r.ProducerEpoch != epoch+1) {
			t.Fatalf("InitProducerId after %d/%d gave %d/%d", pid, epoch, r.ProducerID, r.ProducerEpoch)
		}
		pid, epoch = r.ProducerID, r.ProducerEpoch
	}
	return pid
}

// endTxnAt sends EndTxn at the client's version until it settles (untilSettled).
func endTxnAt(ctx context.Context, c *kgo.Client, id string, pid int64, epoch int16, commit bool) (*kmsg.EndTxnResponse, error) {
	return untilSettled(ctx, func() (*kmsg.EndTxnResponse, int16, error) {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
		r, err := req.RequestWith(ctx, c)
		if err != nil {
			return nil, 0, err
		}
		return r, r.ErrorCode, nil
	})
}

func describeTxn(ctx context.Context, c *kgo.Client, id string) (kmsg.DescribeTransactionsResponseTransactionState, error) {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	r, err := req.RequestWith(ctx, c)
	if err != nil {
		return kmsg.DescribeTransactionsResponseTransactionState{}, err
	}
	st := r.TransactionStates[0]
	return st, kerr.ErrorForCode(st.ErrorCode)
}

// produceTxnTo sends one transactional batch of id to partition p and returns the
// partition's error code, after retrying NOT_ENOUGH_REPLICAS (a partition not ready).
func produceTxnTo(ctx context.Context, c *kgo.Client, id, topic string, tid [16]byte, p int32, batch []byte) int16 {
	for {
		r, err := tryProduceRaw(ctx, c, &id, topic, tid, p, batch)
		if err != nil {
			return -1
		}
		if r.ErrorCode != kerr.NotEnoughReplicas.Code || ctx.Err() != nil {
			return r.ErrorCode
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTxnEndRetriedAfterKill: a transactions v2 commit of 200 partitions is answered
// (the epoch bumped, or at the last epoch the producer id moved) and the broker is
// killed (kill -9) before its markers are all written. The producer, which never saw
// the answer, retries the EndTxn at its old epoch on the restarted broker: it gets
// the answer the commit had (after CONCURRENT_TRANSACTIONS while the markers are
// written), every record is read_committed once, and the old epoch is fenced.
func TestTxnEndRetriedAfterKill(t *testing.T) {
	t.Parallel()
	for _, rotate := range []bool{false, true} {
		t.Run(fmt.Sprintf("rotate %v", rotate), func(t *testing.T) {
			t.Parallel()
			b := testutil.StartBroker(t, "transaction.state.log.num.partitions=1")
			const topic, id, partitions = "txn-end-retry", "txn-end-retry", 200
			adm := newAdmin(t, b)
			createTopic(t, adm, topic, partitions, nil)
			c := pinnedClient(t, b, map[kmsg.Key]int16{kmsg.Produce: 12, kmsg.EndTxn: 5})
			ctx := ctxT(t, 3*time.Minute)
			tid := topicID(t, c, topic)
			target := int16(0)
			if rotate {
				target = math.MaxInt16 - 1
			}
			pid := bumpEpochTo(t, ctx, c, id, target)
			for p := range int32(partitions) {
				if code := produceTxnTo(ctx, c, id, topic, tid, p, txnBatch(pid, target, 0, fmt.Sprint("v-", p))); code != 0 {
					t.Fatalf("produce to partition %d: %v", p, kerr.ErrorForCode(code))
				}
			}
			end, err := endTxnAt(ctx, c, id, pid, target, true)
			if err != nil {
				t.Fatalf("the commit: %v", err)
			}
			b.Kill()
			b.StartAgain(t)
			retried, err := endTxnAt(ctx, c, id, pid, target, true)
			if err != nil || retried.ProducerID != end.ProducerID || retried.ProducerEpoch != end.ProducerEpoch {
				t.Fatalf("the retried commit after kill -9: %v %+v, want %d/%d", err, retried, end.ProducerID, end.ProducerEpoch)
			}
			if got := readAll(t, b, topic, true); len(got) != partitions {
				t.Fatalf("read_committed: %d records, want %d", len(got), partitions)
			}
			if code := produceTxnTo(ctx, c, id, topic, tid, 0, txnBatch(pid, target, 1, "zombie")); code == 0 {
				t.Fatalf("a produce at the old epoch %d was accepted", target)
			}
		})
	}
}

// TestTxnInitAfterRotatingEnd: a transactions v2 commit at the last epoch moves the
// transactional id to a new producer id; a KIP-360 InitProducerId naming the old id
// at that last epoch (a producer that never saw the commit's answer) is a retry, as
// in Kafka: it gets the new id at epoch 0, with no bump. An older epoch is fenced.
func TestTxnInitAfterRotatingEnd(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t, "transaction.state.log.num.partitions=1")
	const topic, id = "txn-init-rotated", "txn-init-rotated"
	createTopic(t, newAdmin(t, b), topic, 1, nil)
	c := pinnedClient(t, b, map[kmsg.Key]int16{kmsg.Produce: 12, kmsg.EndTxn: 5})
	ctx := ctxT(t, 3*time.Minute)
	const last = math.MaxInt16 - 1
	pid := bumpEpochTo(t, ctx, c, id, last)
	if code := produceTxnTo(ctx, c, id, topic, topicID(t, c, topic), 0, txnBatch(pid, last, 0, "v")); code != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(code))
	}
	end, err := endTxnAt(ctx, c, id, pid, last, true)
	if err != nil || end.ProducerID == pid || end.ProducerEpoch != 0 {
		t.Fatalf("the commit at the last epoch: %v %+v", err, end)
	}
	testutil.WaitFor(t, 30*time.Second, func() bool {
		st, err := describeTxn(ctx, c, id)
		return err == nil && st.State == "CompleteCommit"
	}, "the commit to complete")
	r, err := initProducerID(ctx, c, id, pid, last)
	if err != nil || r.ProducerID != end.ProducerID || r.ProducerEpoch != 0 {
		t.Fatalf("InitProducerId of the old id at its last epoch: %v %+v, want %d/0", err, r, end.ProducerID)
	}
	if _, err := initProducerID(ctx, c, id, pid, last-1); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("InitProducerId of the old id at an older epoch: %v, want PRODUCER_FENCED", err)
	}
}
