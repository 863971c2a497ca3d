package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/group"
	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/replica"
)

// offsetsTopic is Kafka's internal topic for committed offsets and group metadata.
const offsetsTopic = "__consumer_offsets"

// offsetsLog gives the group coordinator the __consumer_offsets partitions: appends go
// through the normal log as acks=all writes, loads read a partition from its start.
type offsetsLog struct{ b *Broker }

var _ group.Log = offsetsLog{}

func (l offsetsLog) partition(p int32) (*replica.Partition, error) {
	part := l.b.replicas.Get(offsetsTopic, p)
	if part == nil || !part.IsLeader() {
		return nil, fmt.Errorf("%s-%d is not led here: %w", offsetsTopic, p, group.ErrNotCoordinator)
	}
	return part, nil
}

// Append writes records as one uncompressed batch and waits until the high watermark
// covers it.
func (l offsetsLog) Append(ctx context.Context, p int32, records []group.Record) error {
	part, err := l.partition(p)
	if err != nil {
		return err
	}
	return appendInternal(ctx, l.b, part, records)
}

// appendInternal writes records to a partition of an internal topic this node leads as
// one uncompressed batch and waits until the high watermark covers it.
func appendInternal(ctx context.Context, b *Broker, part *replica.Partition, records []group.Record) error {
	now := b.clock.Now()
	opts := record.DefaultBuildOptions()
	opts.BaseTimestamp = now.UnixMilli()
	recs := make([]record.Record, len(records))
	for i, r := range records {
		recs[i] = record.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
	}
	batch, err := record.Build(opts, recs)
	if err != nil {
		return err
	}
	info, err := part.AppendAsLeader(batch, true, now)
	if err != nil {
		return err
	}
	return waitHighWatermark(ctx, part, info.LastOffset+1, info.LeaderEpoch)
}

// waitHighWatermark blocks until the partition's high watermark reaches target, as an
// acks=all produce does: the append counts only once every in-sync replica holds it and
// the ISR is at least min.insync.replicas; a leadership moved meanwhile makes this node
// no longer the coordinator.
func waitHighWatermark(ctx context.Context, p *replica.Partition, target int64, epoch int32) error {
	wake := make(chan struct{}, 1)
	for {
		p.Wait(wake)
		err := p.AckState(epoch)
		if errors.Is(err, replica.ErrNotLeader) {
			return fmt.Errorf("%s-%d: leadership moved during the write: %w", p.Topic, p.Index, group.ErrNotCoordinator)
		}
		if p.HighWatermark() >= target {
			return err
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Load reads every record of the partition from the log start to the log end, as
// Kafka's coordinator does: a new leader's high watermark may not yet cover offsets
// the previous one acknowledged, while its log holds them all (it was in the ISR).
func (l offsetsLog) Load(ctx context.Context, p int32, fn func(group.Record) error) error {
	part, err := l.partition(p)
	if err != nil {
		return err
	}
	return l.loadPartition(ctx, part, fn)
}

// loadPartition reads every record of an internal topic partition from its log start
// to its log end (see Load: a new leader holds everything acknowledged before).
func (offsetsLog) loadPartition(ctx context.Context, part *replica.Partition, fn func(group.Record) error) error {
	end := part.Log.LogEndOffset()
	offset := part.Log.LogStartOffset()
	for offset < end {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, err := part.Log.ReadBytes(offset, 4<<20, end)
		if err != nil {
			return err
		}
		batches, err := record.Split(data)
		if err != nil {
			return err
		}
		if len(batches) == 0 {
			break
		}
		for _, raw := range batches {
			it, err := record.NewIterator(raw)
			if err != nil {
				return err
			}
			h := it.Header()
			var r record.Record
			for it.Next(&r) {
				if h.IsControl() || h.BaseOffset+int64(r.OffsetDelta) < offset {
					continue
				}
				if err := fn(group.Record{Key: r.Key, Value: r.Value}); err != nil {
					return err
				}
			}
			if err := it.Err(); err != nil {
				return err
			}
			offset = h.LastOffset() + 1
		}
	}
	return nil
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
		ConsumerSessionTimeout:        ms(int64(c.GroupConsumerSessionTimeoutMs)),
		ConsumerHeartbeatInterval:     ms(int64(c.GroupConsumerHeartbeatIntervalMs)),
		ConsumerMaxSize:               c.GroupConsumerMaxSize,
		ConsumerAssignors:             c.GroupConsumerAssignors,
		MigrationPolicy:               c.GroupConsumerMigrationPolicy,
		ShareSessionTimeout:           ms(int64(c.GroupShareSessionTimeoutMs)),
		ShareHeartbeatInterval:        ms(int64(c.GroupShareHeartbeatIntervalMs)),
		ShareMaxSize:                  c.GroupShareMaxSize,
	}
}
