package broker

import (
	"context"
	"time"

	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/group"
	"github.com/samsa-streaming/samsa/internal/record"
)

// offsetsTopic is Kafka's internal topic for committed offsets and group metadata.
const offsetsTopic = "__consumer_offsets"

// offsetsLog gives the group coordinator the __consumer_offsets partitions: appends go
// through the normal log as acks=all writes (a transactional offset commit in a
// transactional batch of its producer), loads read a partition from its start, the
// markers of transactions included.
type offsetsLog struct{ b *Broker }

var _ group.Log = offsetsLog{}

func (l offsetsLog) log() internalLog {
	return internalLog{b: l.b, topic: offsetsTopic, notCoordinator: group.ErrNotCoordinator}
}

// Append writes records as one uncompressed batch and waits until the high watermark
// covers it. The records of one call share their producer (group.Record.Txn).
func (l offsetsLog) Append(ctx context.Context, p int32, records []group.Record) error {
	recs := make([]record.Record, len(records))
	for i, r := range records {
		recs[i] = record.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
	}
	var producer *txnProducer
	if t := records[0].Txn; t != nil {
		producer = &txnProducer{id: t.ProducerID, epoch: t.ProducerEpoch, guard: t.Guard}
	}
	return l.log().append(ctx, p, recs, producer)
}

// Load reads every record of the partition from the log start to the log end.
func (l offsetsLog) Load(ctx context.Context, p int32, fn func(group.Record) error) error {
	return l.log().load(ctx, p, func(h *record.Header, r *record.Record, marker *record.ControlRecord) error {
		switch {
		case marker != nil:
			return fn(group.Record{Txn: &group.TxnInfo{ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, Marker: true,
				Commit: marker.Type == record.ControlCommit}})
		case h.IsTransactional():
			return fn(group.Record{Key: r.Key, Value: r.Value, Txn: &group.TxnInfo{ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch}})
		}
		return fn(group.Record{Key: r.Key, Value: r.Value})
	})
}

// groupConfig turns broker properties into the coordinator's settings.
func groupConfig(c *config.Broker) group.Config {
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	return group.Config{
		NumPartitions:                 c.OffsetsTopicNumPartitions,
		InitialRebalanceDelay:         ms(int64(c.GroupInitialRebalanceDelayMs)),
		MinSessionTimeout:             ms(int64(c.GroupMinSessionTimeoutMs)),
		MaxSessionTimeout:             ms(int64(c.GroupMaxSessionTimeoutMs)),
		MaxSize:                       c.GroupMaxSize,
		OffsetsRetention:              time.Duration(c.OffsetsRetentionMinutes) * time.Minute,
		OffsetsRetentionCheckInterval: ms(c.OffsetsRetentionCheckIntervalMs),
		OffsetCommitTimeout:           ms(int64(c.OffsetsCommitTimeoutMs)),
		MaxMetadataSize:               int(c.OffsetMetadataMaxBytes),
		ConsumerSessionTimeout:        ms(int64(c.GroupConsumerSessionTimeoutMs)),
		ConsumerHeartbeatInterval:     ms(int64(c.GroupConsumerHeartbeatIntervalMs)),
		ConsumerMaxSize:               c.GroupConsumerMaxSize,
		ConsumerAssignmentInterval:    ms(int64(c.GroupConsumerAssignmentIntervalMs)),
		ConsumerAssignors:             c.GroupConsumerAssignors,
		MigrationPolicy:               c.GroupConsumerMigrationPolicy,
		ShareSessionTimeout:           ms(int64(c.GroupShareSessionTimeoutMs)),
		ShareHeartbeatInterval:        ms(int64(c.GroupShareHeartbeatIntervalMs)),
		ShareMaxSize:                  c.GroupShareMaxSize,
		ShareAssignmentInterval:       ms(int64(c.GroupShareAssignmentIntervalMs)),
	}
}

// groupTimeouts are a group's session timeouts and heartbeat intervals as its GROUP
// configs set them (zero where it has none).
func (b *Broker) groupTimeouts(name string) group.Timeouts {
	overrides := b.image().GroupConfigs(name)
	if overrides == nil {
		return group.Timeouts{}
	}
	ms := func(name string) time.Duration {
		return time.Duration(config.GroupInt(b.cfg, overrides, name)) * time.Millisecond
	}
	consumerAssignment, shareAssignment := ms("consumer.assignment.interval.ms"), ms("share.assignment.interval.ms")
	return group.Timeouts{
		ConsumerSession: ms("consumer.session.timeout.ms"), ConsumerHeartbeat: ms("consumer.heartbeat.interval.ms"),
		ShareSession: ms("share.session.timeout.ms"), ShareHeartbeat: ms("share.heartbeat.interval.ms"),
		ConsumerAssignment: &consumerAssignment, ShareAssignment: &shareAssignment,
	}
}
