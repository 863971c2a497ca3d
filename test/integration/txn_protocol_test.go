package integration

import (
	"encoding/binary"
	"hash/crc32"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// txnBatch encodes a one-record transactional v2 batch.
func txnBatch(pid int64, epoch int16, seq int32, val string) []byte {
	b := rawBatch(pid, epoch, seq, val)
	binary.BigEndian.PutUint16(b[21:], binary.BigEndian.Uint16(b[21:])|0x10) // transactional
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// produceTxnRaw sends one transactional batch of transactional id id (at the newest
// Produce version c allows) and returns the partition's error code.
func produceTxnRaw(t *testing.T, c *kgo.Client, id, topic string, batch []byte) int16 {
	t.Helper()
	return produceRawAs(t, c, &id, topic, batch).ErrorCode
}

// initTxn finds the coordinator of id and initializes it; it returns the producer id
// and epoch.
func initTxn(t *testing.T, c *kgo.Client, id string) (int64, int16) {
	t.Helper()
	var resp *kmsg.InitProducerIDResponse
	testutil.WaitFor(t, 10*time.Second, func() bool {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.SetVersion(4)
		req.TransactionalID, req.TransactionTimeoutMillis = &id, 60000
		req.ProducerID, req.ProducerEpoch = -1, -1
		r, err := req.RequestWith(ctxT(t, 5*time.Second), c)
		if err != nil || r.ErrorCode != 0 {
			return false
		}
		resp = r
		return true
	}, "InitProducerId for "+id)
	return resp.ProducerID, resp.ProducerEpoch
}

// TestTransactionalProduceIsVerified: a partition leader verifies a transaction's first
// batch with its coordinator (KIP-890): a produce to a partition the producer did not
// add is refused with INVALID_TXN_STATE, and from Produce v12 (transactions v2; v13
// names the topic by id) the produce adds it itself. Clients cannot write markers.
func TestTransactionalProduceIsVerified(t *testing.T) {
	b := testutil.StartBroker(t)
	const topic = "txn-verify"
	createTopic(t, newAdmin(t, b), topic, 1, nil)
	c := newClient(t, b)
	v11 := kversion.Stable()
	v11.SetMaxKeyVersion(int16(kmsg.Produce), 11)
	c11 := newClient(t, b, kgo.MaxVersions(v11))
	pid, epoch := initTxn(t, c, "verify")
	if code := produceTxnRaw(t, c11, "verify", topic, txnBatch(pid, epoch, 0, "x")); code != kerr.InvalidTxnState.Code {
		t.Fatalf("v11 produce to a partition not in the transaction: %v", kerr.ErrorForCode(code))
	}
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.SetVersion(3)
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = "verify", pid, epoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = topic, []int32{0}
	add.Topics = append(add.Topics, at)
	ar, err := add.RequestWith(ctxT(t, 10*time.Second), c)
	if err != nil || ar.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn: %+v %v", ar, err)
	}
	if code := produceTxnRaw(t, c11, "verify", topic, txnBatch(pid, epoch, 0, "x")); code != 0 {
		t.Fatalf("v11 produce after AddPartitionsToTxn: %v", kerr.ErrorForCode(code))
	}

	// Transactions v2: Produce v12 (topics by name) and v13 (by id) add the partition.
	v12 := kversion.Stable()
	v12.SetMaxKeyVersion(int16(kmsg.Produce), 12)
	c12 := newClient(t, b, kgo.MaxVersions(v12))
	for _, tc := range []struct {
		id     string
		client *kgo.Client
	}{{"verify-v12", c12}, {"verify-v13", c}} {
		pid, epoch := initTxn(t, c, tc.id)
		if code := produceTxnRaw(t, tc.client, tc.id, topic, txnBatch(pid, epoch, 0, "y")); code != 0 {
			t.Fatalf("%s produce: %v", tc.id, kerr.ErrorForCode(code))
		}
		dt := kmsg.NewPtrDescribeTransactionsRequest()
		dt.TransactionalIDs = []string{tc.id}
		dr, err := dt.RequestWith(ctxT(t, 10*time.Second), c)
		if err != nil || len(dr.TransactionStates) != 1 || dr.TransactionStates[0].State != "Ongoing" ||
			len(dr.TransactionStates[0].Topics) != 1 || dr.TransactionStates[0].Topics[0].Topic != topic {
			t.Fatalf("DescribeTransactions after the %s produce: %+v %v", tc.id, dr, err)
		}
	}

	// A client's control batch is refused.
	marker := kmsg.NewRecordBatch()
	marker.Magic, marker.Attributes, marker.ProducerID, marker.ProducerEpoch, marker.NumRecords = 2, 0x30, pid, epoch, 1
	ctl := kmsg.ControlRecordKey{Type: kmsg.ControlRecordKeyTypeCommit}
	rec := kmsg.Record{Key: ctl.AppendTo(nil), Value: (&kmsg.EndTxnMarker{}).AppendTo(nil)}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1)
	marker.Records = rec.AppendTo(nil)
	mb := marker.AppendTo(nil)
	binary.BigEndian.PutUint32(mb[8:], uint32(len(mb)-12))
	binary.BigEndian.PutUint32(mb[17:], crc32.Checksum(mb[21:], crc32.MakeTable(crc32.Castagnoli)))
	if code := produceTxnRaw(t, c11, "verify", topic, mb); code != kerr.InvalidRecord.Code {
		t.Fatalf("a client's marker: %v", kerr.ErrorForCode(code))
	}
}

// TestHangingTransactionAbortedByMarkers: an open transaction shows in
// DescribeProducers (CurrentTxnStartOffset) and holds the last stable offset; a
// WriteTxnMarkers abort, as `samsa transactions abort` sends it, ends it.
func TestHangingTransactionAbortedByMarkers(t *testing.T) {
	b := testutil.StartBroker(t)
	const topic = "txn-hanging"
	adm := newAdmin(t, b)
	createTopic(t, adm, topic, 1, nil)
	p := newTxnProducer(t, b, "hanging")
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctxT(t, 10*time.Second), recordsTo(topic, 0, "h1", "h2")...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, b)
	ap := activeProducer(t, c, topic)
	if ap.CurrentTxnStartOffset != 0 {
		t.Fatalf("open transaction starts at %d, want 0", ap.CurrentTxnStartOffset)
	}
	wm := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Committed = ap.ProducerID, int16(ap.ProducerEpoch), ap.CoordinatorEpoch, false
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{0}
	m.Topics = append(m.Topics, mt)
	wm.Markers = append(wm.Markers, m)
	wr, err := wm.RequestWith(ctxT(t, 10*time.Second), c)
	if err != nil || wr.Markers[0].Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("WriteTxnMarkers: %+v %v", wr, err)
	}
	plain := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceSync(t, plain, recordsTo(topic, 0, "after")...)
	if got := readAll(t, b, topic, true); !slices.Equal(got, []string{"after"}) {
		t.Fatalf("read_committed after the abort: %q", got)
	}
}

// activeProducer returns the one producer DescribeProducers shows on partition 0 of
// topic.
func activeProducer(t *testing.T, c *kgo.Client, topic string) kmsg.DescribeProducersResponseTopicPartitionActiveProducer {
	t.Helper()
	ps := describeProducers(t, c, topic)
	if len(ps) != 1 {
		t.Fatalf("DescribeProducers of %s-0: %+v, want one producer", topic, ps)
	}
	return ps[0]
}

// writeMarker sends one WriteTxnMarkers v2 marker for partition 0 of topic and
// returns its error code.
func writeMarker(t *testing.T, c *kgo.Client, topic string, ap kmsg.DescribeProducersResponseTopicPartitionActiveProducer,
	epoch int16, commit bool, txnVersion int8) int16 {
	t.Helper()
	wm := kmsg.NewPtrWriteTxnMarkersRequest()
	wm.SetVersion(2)
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Committed = ap.ProducerID, epoch, ap.CoordinatorEpoch, commit
	m.TransactionVersion = txnVersion
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{0}
	m.Topics = append(m.Topics, mt)
	wm.Markers = append(wm.Markers, m)
	wr, err := wm.RequestWith(ctxT(t, 10*time.Second), c)
	if err != nil {
		t.Fatalf("WriteTxnMarkers v2: %v", err)
	}
	return wr.Markers[0].Topics[0].Partitions[0].ErrorCode
}

// TestLateTxnV2MarkerRefused: with transactions v2 (franz-go's EndTxn v5) every end
// bumps the producer's epoch and the markers carry the bumped one, so the producer's
// next transaction runs at the epoch of the last marker. A late copy of that marker,
// sent as WriteTxnMarkers v2 with transaction version 2 (KIP-1228), is refused with
// INVALID_PRODUCER_EPOCH instead of committing the next transaction, which the
// producer then aborts: read_committed never sees it. A repeat of a marker while no
// transaction is open (a retry whose answer was lost) is written again.
func TestLateTxnV2MarkerRefused(t *testing.T) {
	b := testutil.StartBroker(t)
	const topic = "txn-late-marker"
	createTopic(t, newAdmin(t, b), topic, 1, nil)
	p := newTxnProducer(t, b, "late-marker")
	c := newClient(t, b)
	// ended waits until the transaction's marker is in the partition: EndTxn is
	// answered once the end is prepared, and the markers follow.
	ended := func(what string) kmsg.DescribeProducersResponseTopicPartitionActiveProducer {
		var ap kmsg.DescribeProducersResponseTopicPartitionActiveProducer
		testutil.WaitFor(t, 20*time.Second, func() bool {
			ap = activeProducer(t, c, topic)
			return ap.CurrentTxnStartOffset == -1
		}, what)
		return ap
	}
	inTxn(t, p, true, recordsTo(topic, 0, "first")...)
	done := ended("the commit marker") // its epoch is the commit marker's

	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctxT(t, 10*time.Second), recordsTo(topic, 0, "second")...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	open := activeProducer(t, c, topic)
	if open.ProducerEpoch != done.ProducerEpoch || open.CurrentTxnStartOffset != 2 {
		t.Fatalf("the next transaction is at epoch %d from offset %d, want epoch %d (the marker's, transactions v2) from offset 2",
			open.ProducerEpoch, open.CurrentTxnStartOffset, done.ProducerEpoch)
	}
	if code := writeMarker(t, c, topic, open, int16(open.ProducerEpoch), true, 2); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("late transactions v2 commit marker during the next transaction: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(code))
	}
	if ap := activeProducer(t, c, topic); ap.CurrentTxnStartOffset != 2 {
		t.Fatalf("the refused marker ended the transaction: %+v", ap)
	}
	if err := p.EndTransaction(ctxT(t, 20*time.Second), kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	aborted := ended("the abort marker")
	if aborted.ProducerEpoch != open.ProducerEpoch+1 {
		t.Fatalf("after the abort: %+v, want the epoch bumped past %d", aborted, open.ProducerEpoch)
	}
	if code := writeMarker(t, c, topic, aborted, int16(aborted.ProducerEpoch), false, 2); code != 0 {
		t.Fatalf("repeated abort marker with no transaction open: %v", kerr.ErrorForCode(code))
	}
	if got := readAll(t, b, topic, true); !slices.Equal(got, []string{"first"}) {
		t.Fatalf("read_committed: %q, want only the first transaction's record", got)
	}
}

// TestBrokerKilledMidTransaction: a broker killed with kill -9 while a transaction is
// open, and again right after a commit, comes back with the open transaction
// abortable (a new producer's InitProducerId aborts it) and the committed one visible;
// read_committed readers are never stuck.
func TestBrokerKilledMidTransaction(t *testing.T) {
	b := testutil.StartBroker(t)
	const topic = "txn-kill"
	createTopic(t, newAdmin(t, b), topic, 2, nil)
	p := newTxnProducer(t, b, "killed")
	inTxn(t, p, true, recordsTo(topic, 0, "c1", "c2")...)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctxT(t, 10*time.Second), append(recordsTo(topic, 0, "open1"), recordsTo(topic, 1, "open2")...)...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	b.Kill()
	b.StartAgain(t)
	p.Close()
	// The successor's InitProducerId aborts the transaction left open.
	next := newTxnProducer(t, b, "killed")
	inTxn(t, next, true, recordsTo(topic, 1, "c3")...)
	b.Kill()
	b.StartAgain(t)
	// EndTxn answered once the commit was prepared; the coordinator writes the markers
	// after that, and after a kill completes the prepared commit once it has loaded —
	// until then the last stable offset stays before c3.
	testutil.WaitFor(t, 30*time.Second, func() bool {
		return slices.Equal(readAll(t, b, topic, true), []string{"c1", "c2", "c3"})
	}, "read_committed after two kills to show exactly c1, c2 and c3 (the last commit completed after the restart)")
	if got := readAll(t, b, topic, false); len(got) != 5 {
		t.Fatalf("read_uncommitted after two kills: %q", got)
	}
}

// TestTransactionalProduceWithoutTransactionalID: a Produce carrying a transactional
// batch but no transactional id is TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every
// partition of the request, a plain batch after it included, as Kafka's
// handleProduceRequest answers before it looks at any partition; nothing is written.
func TestTransactionalProduceWithoutTransactionalID(t *testing.T) {
	b := testutil.StartBroker(t)
	const topic = "txn-no-id"
	createTopic(t, newAdmin(t, b), topic, 3, nil)
	c := newClient(t, b)
	pid, epoch := initTxn(t, c, "no-id")
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID(t, c, topic)
	for i, batch := range [][]byte{txnBatch(pid, epoch, 0, "t0"), txnBatch(pid, epoch, 0, "t1"), rawBatch(-1, -1, -1, "plain")} {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = int32(i), batch
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 {
		t.Fatalf("response: %+v", resp)
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
			t.Errorf("partition %d: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", p.Partition, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	if got := readAll(t, b, topic, false); len(got) != 0 {
		t.Fatalf("records written by the refused request: %q", got)
	}
}
