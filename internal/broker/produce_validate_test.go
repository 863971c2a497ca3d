package broker

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/replica"
)

// TestProduceRefusesCompressedBatchClaimingPhantomRecords: a snappy batch holding one
// record whose header states 2^31-1 of them is refused with INVALID_RECORD and
// appends nothing (it had advanced the log end by 2^31 offsets); the same batch with
// an honest header is appended.
func TestProduceRefusesCompressedBatchClaimingPhantomRecords(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "phantom", 1)
	opts := record.DefaultBuildOptions()
	opts.Compression = record.CompressionSnappy
	honest, err := record.Build(opts, []record.Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	hostile := append([]byte(nil), honest...)
	binary.BigEndian.PutUint32(hostile[23:], math.MaxInt32-1) // lastOffsetDelta
	binary.BigEndian.PutUint32(hostile[57:], math.MaxInt32)   // record count
	binary.BigEndian.PutUint32(hostile[record.CRCOffset:], record.Checksum(hostile))

	produce := func(batch []byte) int16 { return produceBatch(t, b, "phantom", batch) }
	if code := produce(hostile); code != kerr.InvalidRecord.Code {
		t.Fatalf("hostile batch: %v, want INVALID_RECORD", kerr.ErrorForCode(code))
	}
	if end := b.logs.Get("phantom", 0).LogEndOffset(); end != 0 {
		t.Fatalf("log end offset %d after the refused batch, want 0", end)
	}
	if code := produce(honest); code != 0 {
		t.Fatalf("honest batch: %v", kerr.ErrorForCode(code))
	}
	if end := b.logs.Get("phantom", 0).LogEndOffset(); end != 1 {
		t.Fatalf("log end offset %d after the honest batch, want 1", end)
	}
}

// TestProduceInvalidRequiredAcks: acks other than -1, 0 and 1 are refused with
// INVALID_REQUIRED_ACKS for every partition and nothing is appended, as Kafka does;
// a partition of a topic that does not exist is still UNKNOWN_TOPIC_OR_PARTITION.
func TestProduceInvalidRequiredAcks(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "acks", 1)
	batch, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, acks := range []int16{2, -2, math.MaxInt16} {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(12)
		req.Acks, req.TimeoutMillis = acks, 1000
		for _, topic := range []string{"acks", "no-such-topic"} {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = batch
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		r := <-b.Handle(&protocol.Request{Key: req.Key(), Version: req.GetVersion(), Body: req})
		resp := r.Body.(*kmsg.ProduceResponse)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidRequiredAcks.Code {
			t.Errorf("acks=%d: %v, want INVALID_REQUIRED_ACKS", acks, kerr.ErrorForCode(code))
		}
		if code := resp.Topics[1].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("acks=%d, unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", acks, kerr.ErrorForCode(code))
		}
		if r.Written != nil {
			r.Written()
		}
	}
	if end := b.logs.Get("acks", 0).LogEndOffset(); end != 0 {
		t.Fatalf("log end offset %d after requests with invalid acks, want 0", end)
	}
}

// TestProduceEmptyTransactionalID: a Produce request whose transactional id is the
// empty string, as Kafka answers it: its plain batches are appended (the id is only
// looked at for transactional batches), and a transactional batch, verified with the
// coordinator, is INVALID_REQUEST (Kafka's coordinator refuses an empty id) rather
// than INVALID_RECORD; nothing of it is appended. InitProducerId with the empty id
// is INVALID_REQUEST too: Kafka does not take it for a null (idempotent) one.
func TestProduceEmptyTransactionalID(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "empty-txn-id", 1)
	plain, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	opts := record.DefaultBuildOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = 7, 0, 0, true
	transactional, err := record.Build(opts, []record.Record{{Value: []byte("t")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []int16{11, 12} {
		produce := func(batch []byte) int16 {
			req := kmsg.NewPtrProduceRequest()
			req.SetVersion(version)
			req.TransactionID, req.Acks, req.TimeoutMillis = kmsg.StringPtr(""), 1, 1000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = "empty-txn-id"
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = batch
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			r := <-b.Handle(&protocol.Request{Key: req.Key(), Version: req.GetVersion(), Body: req})
			if r.Written != nil {
				r.Written()
			}
			return r.Body.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
		}
		end := b.logs.Get("empty-txn-id", 0).LogEndOffset()
		if code := produce(transactional); code != kerr.InvalidRequest.Code {
			t.Errorf("v%d transactional batch: %v, want INVALID_REQUEST", version, kerr.ErrorForCode(code))
		}
		if got := b.logs.Get("empty-txn-id", 0).LogEndOffset(); got != end {
			t.Errorf("v%d: the refused transactional batch moved the log end from %d to %d", version, end, got)
		}
		if code := produce(plain); code != 0 {
			t.Errorf("v%d plain batch: %v", version, kerr.ErrorForCode(code))
		}
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(""), 60_000
	if r := call[*kmsg.InitProducerIDResponse](t, b, req); r.ErrorCode != kerr.InvalidRequest.Code || r.ProducerID != -1 {
		t.Errorf("InitProducerId with the empty transactional id: %v, producer id %d; want INVALID_REQUEST", kerr.ErrorForCode(r.ErrorCode), r.ProducerID)
	}
}

// TestProduceToAFollowerIsNotLeaderWhateverTheBatch: a replica that does not lead
// answers NOT_LEADER_OR_FOLLOWER to a batch over its max.message.bytes, as Kafka's
// Partition.appendRecordsToLeader checks leadership before the log validates the batch.
// It answered MESSAGE_TOO_LARGE, which a client whose metadata still named it the
// leader does not retry: the record was lost where the leader, on a larger limit of
// its own (a per-broker dynamic config), would have taken it.
func TestProduceToAFollowerIsNotLeaderWhateverTheBatch(t *testing.T) {
	b := startTestBrokerWith(t, nil, []string{"message.max.bytes=1000"}, t.TempDir())
	createTestTopic(t, b, "followed", 1)
	big, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Value: make([]byte, 2000)}})
	if err != nil {
		t.Fatal(err)
	}
	if code := produceBatch(t, b, "followed", big); code != kerr.MessageTooLarge.Code {
		t.Fatalf("2000 bytes to the leader: %v, want MESSAGE_TOO_LARGE", kerr.ErrorForCode(code))
	}
	p := b.replicas.Get("followed", 0)
	st := p.State()
	if _, err := p.Apply(replica.State{Leader: 2, LeaderEpoch: st.LeaderEpoch + 1, PartitionEpoch: st.PartitionEpoch + 1,
		Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if code := produceBatch(t, b, "followed", big); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("2000 bytes to a follower: %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(code))
	}
}

// TestProduceShortOfInSyncReplicasWhateverTheBatch: an acks=all batch over the topic's
// max.message.bytes, to a leader whose ISR is below min.insync.replicas, is
// NOT_ENOUGH_REPLICAS (retriable), as Kafka's Partition.appendRecordsToLeader checks
// the ISR before the log validates the batch; with acks=1 the ISR does not matter and
// the batch is MESSAGE_TOO_LARGE. It was MESSAGE_TOO_LARGE either way.
func TestProduceShortOfInSyncReplicasWhateverTheBatch(t *testing.T) {
	b := startTestBrokerWith(t, nil, []string{"message.max.bytes=1000", "min.insync.replicas=2"}, t.TempDir())
	createTestTopic(t, b, "short", 1) // replication factor 1: the ISR is 1
	big, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Value: make([]byte, 2000)}})
	if err != nil {
		t.Fatal(err)
	}
	if code := produceBatch(t, b, "short", big); code != kerr.NotEnoughReplicas.Code {
		t.Fatalf("2000 bytes with acks=all and an ISR of 1 < 2: %v, want NOT_ENOUGH_REPLICAS", kerr.ErrorForCode(code))
	}
	if code := produceBatchAcks(t, b, "short", big, 1); code != kerr.MessageTooLarge.Code {
		t.Fatalf("2000 bytes with acks=1: %v, want MESSAGE_TOO_LARGE", kerr.ErrorForCode(code))
	}
}
