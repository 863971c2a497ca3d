package txn

import (
	"encoding/binary"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record is one record of __transaction_state. A nil Value is a tombstone.
type Record struct {
	Key, Value []byte
}

// Record key and value versions written to __transaction_state (Kafka's schema: key
// version 0, value version 1 with the tagged fields of transactions v2). LastEpoch is
// not stored, as in Kafka: after a load it is -1, so a retried epoch bump that spans
// a coordinator move is fenced rather than taken for a zombie's request.
const (
	keyVersion   = 0
	valueVersion = 1
)

func millis(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}

func fromMillis(ms int64) time.Time {
	if ms < 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func recordKey(id string) []byte {
	k := kmsg.TxnMetadataKey{Version: keyVersion, TransactionalID: id}
	return k.AppendTo(nil)
}

// encodeRecord is the record that stores m (a tombstone for Dead).
func encodeRecord(m *Metadata) Record {
	if m.State == StateDead {
		return Record{Key: recordKey(m.TransactionalID)}
	}
	v := kmsg.NewTxnMetadataValue()
	v.Version = valueVersion
	v.ProducerID, v.ProducerEpoch = m.ProducerID, m.Epoch
	v.TimeoutMillis = int32(m.Timeout.Milliseconds())
	v.State = kmsg.TransactionState(m.State)
	v.LastUpdateTimestamp, v.StartTimestamp = millis(m.Updated), millis(m.Started)
	v.PreviousProducerID, v.NextProducerID = m.PrevProducerID, m.NextProducerID
	v.ClientTransactionVersion = m.ClientVersion
	for _, p := range m.Partitions {
		if n := len(v.Topics); n == 0 || v.Topics[n-1].Topic != p.Topic {
			t := kmsg.NewTxnMetadataValueTopic()
			t.Topic = p.Topic
			v.Topics = append(v.Topics, t)
		}
		t := &v.Topics[len(v.Topics)-1]
		t.Partitions = append(t.Partitions, p.Partition)
	}
	return Record{Key: recordKey(m.TransactionalID), Value: v.AppendTo(nil)}
}

// decodeRecord parses a record: the transactional id and its metadata (nil for a
// tombstone). Keys of versions other than 0 are not transaction records (Kafka writes
// none) and are skipped (ok false).
func decodeRecord(r Record) (id string, m *Metadata, ok bool, err error) {
	if len(r.Key) < 2 {
		return "", nil, false, fmt.Errorf("%w: key of %d bytes", ErrCorruptRecord, len(r.Key))
	}
	if v := int16(binary.BigEndian.Uint16(r.Key)); v != keyVersion {
		return "", nil, false, nil
	}
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(r.Key); err != nil {
		return "", nil, false, fmt.Errorf("%w: key: %v", ErrCorruptRecord, err)
	}
	if r.Value == nil {
		return k.TransactionalID, nil, true, nil
	}
	v := kmsg.NewTxnMetadataValue()
	if err := v.ReadFrom(r.Value); err != nil {
		return "", nil, false, fmt.Errorf("%w: value of %q: %v", ErrCorruptRecord, k.TransactionalID, err)
	}
	m = &Metadata{
		TransactionalID: k.TransactionalID,
		ProducerID:      v.ProducerID,
		PrevProducerID:  -1,
		NextProducerID:  -1,
		Epoch:           v.ProducerEpoch,
		LastEpoch:       -1,
		Timeout:         time.Duration(v.TimeoutMillis) * time.Millisecond,
		State:           State(v.State),
		Started:         fromMillis(v.StartTimestamp),
		Updated:         fromMillis(v.LastUpdateTimestamp),
	}
	if v.Version >= 1 {
		m.PrevProducerID, m.NextProducerID, m.ClientVersion = v.PreviousProducerID, v.NextProducerID, v.ClientTransactionVersion
	}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			m.Partitions = append(m.Partitions, TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	sort.Slice(m.Partitions, func(i, j int) bool { return comparePartitions(m.Partitions[i], m.Partitions[j]) < 0 })
	return k.TransactionalID, m, true, nil
}
