package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// rawBatch encodes a one-record v2 batch for an idempotent producer.
func rawBatch(pid int64, epoch int16, seq int32, val string) []byte {
	rec := kmsg.NewRecord()
	rec.Value = []byte(val)
	rec.Length = int32(len(rec.AppendTo(nil)) - 1) // the body after a one-byte zero length
	return encodeBatch(0, pid, epoch, seq, 1, rec.AppendTo(nil))
}

// encodeBatch encodes a v2 batch of attributes attrs, stating numRecords records
// whose encoding (compressed as attrs say) is records, timestamped now, with its
// length and CRC-32C filled in.
func encodeBatch(attrs int16, pid int64, epoch int16, seq, numRecords int32, records []byte) []byte {
	batch := kmsg.NewRecordBatch()
	batch.Magic = 2
	batch.Attributes = attrs
	batch.ProducerID, batch.ProducerEpoch, batch.FirstSequence = pid, epoch, seq
	batch.NumRecords, batch.LastOffsetDelta = numRecords, numRecords-1
	batch.FirstTimestamp = time.Now().UnixMilli()
	batch.MaxTimestamp = batch.FirstTimestamp
	batch.Records = records
	b := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func produceRaw(t *testing.T, c *kgo.Client, topic string, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	return produceRawAs(t, c, nil, topic, batch)
}

// produceRawAs is produceRaw in a request of transactional id txnID (nil: none).
func produceRawAs(t *testing.T, c *kgo.Client, txnID *string, topic string, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	return produceRawWithin(t, c, txnID, topic, batch, 10*time.Second)
}

// produceRawWithin is produceRawAs waiting up to d for the answer.
func produceRawWithin(t *testing.T, c *kgo.Client, txnID *string, topic string, batch []byte, d time.Duration) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	p, err := tryProduceRaw(ctxT(t, d), c, txnID, topic, topicID(t, c, topic), 0, batch)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tryProduceRaw sends batch to partition of topic (of id topicID) in a request of
// transactional id txnID (nil: none) with acks=all.
func tryProduceRaw(ctx context.Context, c *kgo.Client, txnID *string, topic string, topicID [16]byte, partition int32, batch []byte) (kmsg.ProduceResponseTopicPartition, error) {
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID = txnID
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID // by name up to v12, by id from v13
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c)
	if err != nil {
		return kmsg.ProduceResponseTopicPartition{}, err
	}
	return resp.Topics[0].Partitions[0], nil
}

// topicID asks the broker for a topic's id.
func topicID(t *testing.T, c *kgo.Client, topic string) [16]byte {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, mt)
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata of %s: %+v", topic, resp.Topics)
	}
	return resp.Topics[0].TopicID
}

// TestIdempotentSequences: a retried batch returns its original offset and is stored
// once; a gap is OUT_OF_ORDER_SEQUENCE_NUMBER; an old epoch is refused; the state
// survives a restart.
func TestIdempotentSequences(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, newAdmin(t, b), "idem", 1, nil)
	c := newClient(t, b)
	init := kmsg.NewPtrInitProducerIDRequest()
	initResp, err := init.RequestWith(ctxT(t, 10*time.Second), c)
	if err != nil || initResp.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %v", err, initResp)
	}
	pid, epoch := initResp.ProducerID, initResp.ProducerEpoch

	first := produceRaw(t, c, "idem", rawBatch(pid, epoch, 0, "a"))
	if first.ErrorCode != 0 || first.BaseOffset != 0 {
		t.Fatalf("first: %+v", first)
	}
	second := produceRaw(t, c, "idem", rawBatch(pid, epoch, 1, "b"))
	if second.ErrorCode != 0 || second.BaseOffset != 1 {
		t.Fatalf("second: %+v", second)
	}
	// Retry of the first batch: original offset, not stored again.
	dup := produceRaw(t, c, "idem", rawBatch(pid, epoch, 0, "a"))
	if dup.ErrorCode != 0 || dup.BaseOffset != 0 {
		t.Fatalf("duplicate: %+v", dup)
	}
	// A gap in sequence numbers.
	gap := produceRaw(t, c, "idem", rawBatch(pid, epoch, 5, "gap"))
	if gap.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap: error %d, want OUT_OF_ORDER_SEQUENCE_NUMBER", gap.ErrorCode)
	}

	b.Restart(t)
	c = newClient(t, b)
	dup = produceRaw(t, c, "idem", rawBatch(pid, epoch, 1, "b"))
	if dup.ErrorCode != 0 || dup.BaseOffset != 1 {
		t.Fatalf("duplicate after restart: %+v", dup)
	}
	next := produceRaw(t, c, "idem", rawBatch(pid, epoch, 2, "c"))
	if next.ErrorCode != 0 || next.BaseOffset != 2 {
		t.Fatalf("next after restart: %+v", next)
	}
	// A bumped epoch starts again at sequence 0; the old epoch is then fenced.
	bumped := produceRaw(t, c, "idem", rawBatch(pid, epoch+1, 0, "d"))
	if bumped.ErrorCode != 0 || bumped.BaseOffset != 3 {
		t.Fatalf("new epoch: %+v", bumped)
	}
	stale := produceRaw(t, c, "idem", rawBatch(pid, epoch, 3, "e"))
	if stale.ErrorCode == 0 {
		t.Fatalf("old epoch accepted: %+v", stale)
	}

	got := consumePartition(t, b, "idem", 0)
	want := []string{"a", "b", "c", "d"}
	if len(got) != len(want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("stored %v, want %v", got, want)
		}
	}

	// DescribeProducers reports the producer.
	dp := kmsg.NewPtrDescribeProducersRequest()
	dt := kmsg.NewDescribeProducersRequestTopic()
	dt.Topic = "idem"
	dt.Partitions = []int32{0}
	dp.Topics = append(dp.Topics, dt)
	dresp, err := dp.RequestWith(ctxT(t, 10*time.Second), c)
	if err != nil {
		t.Fatal(err)
	}
	ps := dresp.Topics[0].Partitions[0]
	if ps.ErrorCode != 0 || len(ps.ActiveProducers) != 1 || ps.ActiveProducers[0].ProducerID != pid || ps.ActiveProducers[0].LastSequence != 0 {
		t.Fatalf("describe producers: %+v", ps)
	}
}

// TestIdempotentRacingSequences: four connections send batches of one producer id to
// one partition at once, each guessing the next sequence number (some a retry of one
// already written, some past a gap). Every sequence is written once, in order; a
// retry is answered with its first offset; a gap is OUT_OF_ORDER_SEQUENCE_NUMBER.
func TestIdempotentRacingSequences(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t)
	const topic = "idem-race"
	createTopic(t, newAdmin(t, b), topic, 1, nil)
	c0 := newClient(t, b)
	id := topicID(t, c0, topic)
	initResp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctxT(t, 10*time.Second), c0)
	if err != nil || initResp.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %v", err, initResp)
	}
	pid, epoch := initResp.ProducerID, initResp.ProducerEpoch

	// Sequence 0 first: a producer the partition does not know yet is accepted at any
	// sequence (as in Kafka), so a racing sequence 1 must not find it unknown.
	if p := produceRaw(t, c0, topic, rawBatch(pid, epoch, 0, "0/9")); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("sequence 0: %+v", p)
	}
	var mu sync.Mutex
	next := int32(1)                 // one past the highest sequence answered without error
	written := map[int32]int64{0: 1} // sequence -> the offset it was answered with, +1
	refused := 0
	deadline := time.Now().Add(8 * time.Second)
	var wg sync.WaitGroup
	for w := range 4 {
		c := newClient(t, b)
		wg.Go(func() {
			for time.Now().Before(deadline) {
				mu.Lock()
				seq := max(0, next+int32(rand.IntN(4))-2) // a retry, the next one or past a gap
				mu.Unlock()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				p, err := tryProduceRaw(ctx, c, nil, topic, id, 0, rawBatch(pid, epoch, seq, fmt.Sprintf("%d/%d", seq, w)))
				cancel()
				mu.Lock()
				switch {
				case err != nil:
					t.Errorf("sequence %d: %v", seq, err)
				case p.ErrorCode == kerr.OutOfOrderSequenceNumber.Code:
					refused++
				case p.ErrorCode != 0:
					t.Errorf("sequence %d: error %d", seq, p.ErrorCode)
				case written[seq] != 0 && written[seq] != p.BaseOffset+1:
					t.Errorf("sequence %d answered with offsets %d and %d", seq, written[seq]-1, p.BaseOffset)
				default:
					written[seq] = p.BaseOffset + 1 // +1: zero is "not written"
					next = max(next, seq+1)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	stored := consumePartition(t, b, topic, 0)
	if len(stored) != len(written) {
		t.Fatalf("%d records stored, %d sequences answered", len(stored), len(written))
	}
	for offset, v := range stored {
		var seq, w int
		if _, err := fmt.Sscanf(v, "%d/%d", &seq, &w); err != nil || seq != offset || written[int32(seq)] != int64(offset)+1 {
			t.Fatalf("offset %d holds %q, answered offset of its sequence %d", offset, v, written[int32(seq)]-1)
		}
	}
	t.Logf("%d sequences written once each, in order; %d batches refused past a gap", len(stored), refused)
}

// TestIdempotentProducerWithoutStateKeepsCounting: DeleteRecords removes every batch
// of a producer and the broker is killed before any producer snapshot was written,
// so the restarted broker rebuilds no state for it. As in Kafka (a producer without
// state is accepted at any sequence), the producer's next sequence is written, not
// refused with OUT_OF_ORDER_SEQUENCE_NUMBER; from then on its sequences are checked.
func TestIdempotentProducerWithoutStateKeepsCounting(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t)
	const topic = "idem-stateless"
	adm := newAdmin(t, b)
	createTopic(t, adm, topic, 1, nil)
	c := newClient(t, b)
	initResp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctxT(t, 10*time.Second), c)
	if err != nil || initResp.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %v", err, initResp)
	}
	pid, epoch := initResp.ProducerID, initResp.ProducerEpoch
	for seq := range int32(3) {
		if p := produceRaw(t, c, topic, rawBatch(pid, epoch, seq, fmt.Sprint(seq))); p.ErrorCode != 0 || p.BaseOffset != int64(seq) {
			t.Fatalf("sequence %d: %+v", seq, p)
		}
	}
	var at kadm.Offsets
	at.AddOffset(topic, 0, 3, -1)
	if res, err := adm.DeleteRecords(ctxT(t, 10*time.Second), at); err != nil || res.Error() != nil {
		t.Fatalf("DeleteRecords to 3: %v %v", err, res.Error())
	}
	b.Kill()
	b.StartAgain(t)
	c = newClient(t, b)
	if p := produceRaw(t, c, topic, rawBatch(pid, epoch, 3, "3")); p.ErrorCode != 0 || p.BaseOffset != 3 {
		t.Fatalf("the producer's next sequence after the restart: error %v, %+v", kerr.ErrorForCode(p.ErrorCode), p)
	}
	if p := produceRaw(t, c, topic, rawBatch(pid, epoch, 3, "3")); p.ErrorCode != 0 || p.BaseOffset != 3 {
		t.Fatalf("its retry: %+v, want a duplicate at offset 3", p)
	}
	if p := produceRaw(t, c, topic, rawBatch(pid, epoch, 5, "5")); p.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("a gap: error %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", kerr.ErrorForCode(p.ErrorCode))
	}
	if p := produceRaw(t, c, topic, rawBatch(pid, epoch, 4, "4")); p.ErrorCode != 0 || p.BaseOffset != 4 {
		t.Fatalf("sequence 4: %+v", p)
	}
	if got := consumePartition(t, b, topic, 0); len(got) != 2 || got[0] != "3" || got[1] != "4" {
		t.Fatalf("stored after the log start: %q, want [3 4]", got)
	}
}

// describeProducers returns the active producers of partition 0 of topic.
func describeProducers(t *testing.T, c *kgo.Client, topic string) []kmsg.DescribeProducersResponseTopicPartitionActiveProducer {
	t.Helper()
	dp := kmsg.NewPtrDescribeProducersRequest()
	dt := kmsg.NewDescribeProducersRequestTopic()
	dt.Topic, dt.Partitions = topic, []int32{0}
	dp.Topics = append(dp.Topics, dt)
	resp, err := dp.RequestWith(ctxT(t, 10*time.Second), c)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("DescribeProducers: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	return p.ActiveProducers
}

// TestIdempotentProducerExpiration: producer.id.expiration.ms is a broker property, as
// in Kafka. A producer idle for longer is forgotten by the partition; when it comes
// back, its next sequence is accepted (it has no state there to be out of order with).
func TestIdempotentProducerExpiration(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t, "producer.id.expiration.ms=2000", "log.retention.check.interval.ms=200")
	const topic = "idem-expiry"
	createTopic(t, newAdmin(t, b), topic, 1, nil)
	c := newClient(t, b)
	initResp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctxT(t, 10*time.Second), c)
	if err != nil || initResp.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %v", err, initResp)
	}
	pid, epoch := initResp.ProducerID, initResp.ProducerEpoch
	for seq := range int32(2) {
		if p := produceRaw(t, c, topic, rawBatch(pid, epoch, seq, fmt.Sprint(seq))); p.ErrorCode != 0 || p.BaseOffset != int64(seq) {
			t.Fatalf("sequence %d: %+v", seq, p)
		}
	}
	if ps := describeProducers(t, c, topic); len(ps) != 1 || ps[0].ProducerID != pid || ps[0].LastSequence != 1 {
		t.Fatalf("producers before expiry: %+v", ps)
	}
	testutil.WaitFor(t, 20*time.Second, func() bool { return len(describeProducers(t, c, topic)) == 0 },
		"the idle producer to expire")
	if p := produceRaw(t, c, topic, rawBatch(pid, epoch, 2, "2")); p.ErrorCode != 0 || p.BaseOffset != 2 {
		t.Fatalf("the producer back after expiry: error %v, %+v", kerr.ErrorForCode(p.ErrorCode), p)
	}
	if p := produceRaw(t, c, topic, rawBatch(pid, epoch, 4, "4")); p.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("a gap after it came back: error %v", kerr.ErrorForCode(p.ErrorCode))
	}
	if got := consumePartition(t, b, topic, 0); !slices.Equal(got, []string{"0", "1", "2"}) {
		t.Fatalf("stored %q", got)
	}
}

// TestIdempotentProducerAfterDeleteRecordsAndKill: DeleteRecords moves the log start
// into the segment after the newest producer snapshot, past every batch of the
// producer, and the broker is killed (-9). Restarted, it still knows the producer
// where its last batch left it: a retry of that batch is a duplicate at its offset
// and the next sequence is written, not refused as out of order.
func TestIdempotentProducerAfterDeleteRecordsAndKill(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t)
	const topic = "idem-deleted"
	adm := newAdmin(t, b)
	c := newClient(t, b)
	initResp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctxT(t, 10*time.Second), c)
	if err != nil || initResp.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %v", err, initResp)
	}
	pid, epoch := initResp.ProducerID, initResp.ProducerEpoch
	// Three batches a segment: a roll (and a producer snapshot) at offset 3.
	segment := fmt.Sprint(3 * len(rawBatch(pid, epoch, 0, "0")))
	createTopic(t, adm, topic, 1, map[string]*string{"segment.bytes": &segment})
	for seq := range int32(6) {
		if p := produceRaw(t, c, topic, rawBatch(pid, epoch, seq, fmt.Sprint(seq))); p.ErrorCode != 0 || p.BaseOffset != int64(seq) {
			t.Fatalf("sequence %d: %+v", seq, p)
		}
	}
	var at kadm.Offsets
	at.AddOffset(topic, 0, 6, -1)
	if res, err := adm.DeleteRecords(ctxT(t, 10*time.Second), at); err != nil || res.Error() != nil {
		t.Fatalf("DeleteRecords to 6: %v %v", err, res.Error())
	}
	b.Kill()
	b.StartAgain(t)
	c = newClient(t, b)
	if p := produceRaw(t, c, topic, rawBatch(pid, epoch, 5, "5")); p.ErrorCode != 0 || p.BaseOffset != 5 {
		t.Fatalf("retry of sequence 5 after the restart: error %v, %+v, want a duplicate at offset 5", kerr.ErrorForCode(p.ErrorCode), p)
	}
	if p := produceRaw(t, c, topic, rawBatch(pid, epoch, 6, "6")); p.ErrorCode != 0 || p.BaseOffset != 6 {
		t.Fatalf("sequence 6 after the restart: error %v, %+v", kerr.ErrorForCode(p.ErrorCode), p)
	}
	if p := produceRaw(t, c, topic, rawBatch(pid, epoch, 8, "8")); p.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("a gap: error %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", kerr.ErrorForCode(p.ErrorCode))
	}
	if got := consumePartition(t, b, topic, 0); !slices.Equal(got, []string{"6"}) {
		t.Fatalf("stored after the log start: %q, want [6]", got)
	}
}
