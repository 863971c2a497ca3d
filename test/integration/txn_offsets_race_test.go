package integration

import (
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestTxnOffsetCommitRacingEndTxnAbort: transactions v1 (TxnOffsetCommit v3, EndTxn v3):
// a TxnOffsetCommit and the EndTxn(abort) of the same transaction are sent at once
// from two connections. Whatever the order, once the abort completed no transaction
// of the producer may stay open in __consumer_offsets, and the offset must never
// become the group's committed offset.
func TestTxnOffsetCommitRacingEndTxnAbort(t *testing.T) { runTxnOffsetCommitRacingEnd(t, false) }

// TestTxnOffsetCommitRacingEndTxnCommit: as above with EndTxn(commit); the next
// transaction aborts. An offset whose TxnOffsetCommit and EndTxn(commit) both
// succeeded must be the group's offset.
func TestTxnOffsetCommitRacingEndTxnCommit(t *testing.T) { runTxnOffsetCommitRacingEnd(t, true) }

func runTxnOffsetCommitRacingEnd(t *testing.T, commitRace bool) {
	t.Parallel()
	b := testutil.StartBroker(t, "offsets.topic.num.partitions=1", "transaction.state.log.num.partitions=1",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms=500")
	const topic = "txo-race"
	const group = "txo-group"
	const id = "txo"
	createTopic(t, newAdmin(t, b), topic, 1, nil)
	pins := map[kmsg.Key]int16{kmsg.Produce: 11, kmsg.EndTxn: 3, kmsg.AddPartitionsToTxn: 3, kmsg.TxnOffsetCommit: 3, kmsg.AddOffsetsToTxn: 3}
	c1 := pinnedClient(t, b, pins)
	c2 := pinnedClient(t, b, pins)
	ctx := ctxT(t, 150*time.Second)

	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID = kmsg.StringPtr(id)
	init.TransactionTimeoutMillis = 3000
	init.ProducerID, init.ProducerEpoch = -1, -1
	var pid int64
	var epoch int16
	testutil.WaitFor(t, 20*time.Second, func() bool {
		r, err := init.RequestWith(ctx, c1)
		if err != nil || r.ErrorCode != 0 {
			return false
		}
		pid, epoch = r.ProducerID, r.ProducerEpoch
		return true
	}, "init")

	txnState := func() string {
		st, err := describeTxn(ctx, c1, id)
		if err != nil {
			return "?"
		}
		return st.State
	}
	openInOffsets := func() int64 {
		dp := kmsg.NewPtrDescribeProducersRequest()
		dt := kmsg.NewDescribeProducersRequestTopic()
		dt.Topic, dt.Partitions = "__consumer_offsets", []int32{0}
		dp.Topics = append(dp.Topics, dt)
		r, err := dp.RequestWith(ctx, c1)
		if err != nil || len(r.Topics) == 0 || len(r.Topics[0].Partitions) == 0 {
			t.Fatalf("DescribeProducers: %v %+v", err, r)
		}
		p := r.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("DescribeProducers code %d", p.ErrorCode)
		}
		for _, ap := range p.ActiveProducers {
			if ap.ProducerID == pid {
				return ap.CurrentTxnStartOffset
			}
		}
		return -1
	}

	var hung int
	var hungIter int64 = -1
	commitCodes := map[int16]int{}
	for i := int64(1); i <= 300 && hung == 0; i++ {
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = id, pid, epoch, group
		ar, err := add.RequestWith(ctx, c1)
		if err != nil || ar.ErrorCode != 0 {
			t.Fatalf("AddOffsetsToTxn #%d: %v %+v", i, err, ar)
		}
		var wg sync.WaitGroup
		var commitCode int16 = -1
		wg.Add(2)
		go func() {
			defer wg.Done()
			tc := kmsg.NewPtrTxnOffsetCommitRequest()
			tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch = id, group, pid, epoch
			tc.Generation, tc.MemberID = -1, ""
			tt := kmsg.NewTxnOffsetCommitRequestTopic()
			tt.Topic = topic
			tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			tp.Partition, tp.Offset = 0, i
			tt.Partitions = append(tt.Partitions, tp)
			tc.Topics = append(tc.Topics, tt)
			r, err := tc.RequestWith(ctx, c2)
			if err == nil {
				commitCode = r.Topics[0].Partitions[0].ErrorCode
			}
		}()
		var endCode int16 = -1
		go func() {
			defer wg.Done()
			end := kmsg.NewPtrEndTxnRequest()
			end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, pid, epoch, commitRace
			for {
				r, err := end.RequestWith(ctx, c1)
				if err != nil {
					return
				}
				if r.ErrorCode == kerr.ConcurrentTransactions.Code {
					continue
				}
				endCode = r.ErrorCode
				return
			}
		}()
		wg.Wait()
		commitCodes[commitCode]++
		if endCode != 0 {
			t.Fatalf("EndTxn abort #%d: code %d", i, endCode)
		}
		want := "CompleteAbort"
		if commitRace {
			want = "CompleteCommit"
		}
		testutil.WaitFor(t, 10*time.Second, func() bool { return txnState() == want }, "end to complete")
		if o := openInOffsets(); o >= 0 {
			hung++
			hungIter = i
			t.Errorf("iteration %d (TxnOffsetCommit answered %d): after %s, producer %d still has a transaction open in __consumer_offsets-0 from offset %d",
				i, commitCode, want, pid, o)
		}
	}
	t.Logf("TxnOffsetCommit codes: %v", commitCodes)
	if hung == 0 {
		return
	}
	time.Sleep(5 * time.Second)
	t.Logf("still open 5s later (transaction.timeout.ms 3000): start offset %d; coordinator state %s", openInOffsets(), txnState())
	adm := kadm.NewClient(c1)
	if lso, err := adm.ListCommittedOffsets(ctx, "__consumer_offsets"); err == nil {
		hwm, _ := adm.ListEndOffsets(ctx, "__consumer_offsets")
		l, _ := lso.Lookup("__consumer_offsets", 0)
		h, _ := hwm.Lookup("__consumer_offsets", 0)
		t.Logf("__consumer_offsets-0: last stable offset %d, high watermark %d", l.Offset, h.Offset)
	}
	// Consumer-visible consequences: the group's offset is unstable.
	of := kmsg.NewPtrOffsetFetchRequest()
	of.RequireStable = true
	ofg := kmsg.NewOffsetFetchRequestGroup()
	ofg.Group = group
	ofgt := kmsg.NewOffsetFetchRequestGroupTopic()
	ofgt.Topic, ofgt.Partitions = topic, []int32{0}
	ofg.Topics = append(ofg.Topics, ofgt)
	of.Groups = append(of.Groups, ofg)
	fetchOffset := func() (int64, int16) {
		r, err := of.RequestWith(ctx, c1)
		if err != nil {
			t.Fatal(err)
		}
		g := r.Groups[0]
		if g.ErrorCode != 0 {
			return -1, g.ErrorCode
		}
		p := g.Topics[0].Partitions[0]
		return p.Offset, p.ErrorCode
	}
	o, code := fetchOffset()
	t.Logf("OffsetFetch(require_stable) after the hang: offset %d code %d", o, code)
	// The next transaction of the producer commits without any offset commit of its
	// own: the offset of the aborted transaction must not become the group's.
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = id, pid, epoch, group
	if ar, err := add.RequestWith(ctx, c1); err != nil || ar.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v %+v", err, ar)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, pid, epoch, !commitRace
	if er, err := end.RequestWith(ctx, c1); err != nil || er.ErrorCode != 0 {
		t.Fatalf("EndTxn: %v %+v", err, er)
	}
	want := "CompleteCommit"
	if commitRace {
		want = "CompleteAbort"
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { return txnState() == want }, "end to complete")
	o, code = fetchOffset()
	if !commitRace {
		t.Logf("OffsetFetch after an empty commit: offset %d code %d (offset of the aborted transaction #%d)", o, code, hungIter)
		if o == hungIter {
			t.Errorf("the offset %d committed in an aborted transaction became the group's committed offset", o)
		}
	} else {
		t.Logf("OffsetFetch after an empty abort: offset %d code %d (offset of the committed transaction #%d)", o, code, hungIter)
		if o != hungIter {
			t.Errorf("the offset %d committed in transaction #%d (TxnOffsetCommit and EndTxn(commit) both succeeded) is not the group's: it has %d", hungIter, hungIter, o)
		}
	}
}

// pinnedClient is a client that sends at most the given versions of those APIs.
func pinnedClient(t testing.TB, b *testutil.Broker, pins map[kmsg.Key]int16) *kgo.Client {
	v := kversion.Stable()
	for k, m := range pins {
		v.SetMaxKeyVersion(int16(k), m)
	}
	return newClient(t, b, kgo.MaxVersions(v))
}
