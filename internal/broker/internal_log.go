package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/replica"
	"github.com/samsa-streaming/samsa/internal/storage"
)

// internalLog is a coordinator's access to the partitions of its internal topic
// (__consumer_offsets, __share_group_state, __transaction_state) that this node
// leads: appends are acks=all writes through the partition, loads read a partition
// from its start.
type internalLog struct {
	b     *Broker
	topic string
	// notCoordinator is wrapped into the error of a partition not led here, or whose
	// append failed in storage (the coordinator answers NOT_COORDINATOR).
	notCoordinator error
}

// txnProducer is the producer of a coordinator's transactional write.
type txnProducer struct {
	id    int64
	epoch int16
	guard uint64 // storage.AppendOptions.TxnGuard (0: none)
}

func (l internalLog) partition(p int32) (*replica.Partition, error) {
	part := l.b.replicas.Get(l.topic, p)
	if part == nil || !part.IsLeader() {
		return nil, fmt.Errorf("%s-%d is not led here: %w", l.topic, p, l.notCoordinator)
	}
	return part, nil
}

// append writes recs as one uncompressed batch — transactional, of producer, when it
// is set — and waits until the high watermark covers it.
func (l internalLog) append(ctx context.Context, p int32, recs []record.Record, producer *txnProducer) error {
	part, err := l.partition(p)
	if err != nil {
		return err
	}
	now := l.b.clock.Now()
	opts := record.DefaultBuildOptions()
	opts.BaseTimestamp = now.UnixMilli()
	if producer != nil {
		opts.ProducerID, opts.ProducerEpoch, opts.Transactional = producer.id, producer.epoch, true
	}
	batch, err := record.Build(opts, recs)
	if err != nil {
		return err
	}
	appendOpts := storage.AppendOptions{Coordinator: producer != nil}
	if producer != nil {
		appendOpts.TxnGuard = producer.guard
	}
	info, err := part.AppendAsLeaderTxn(batch, true, now, appendOpts)
	if err != nil {
		if errorCode(err) == kerr.KafkaStorageError.Code {
			// As Kafka's coordinators do (a KafkaStorageException of their log's append
			// answers NOT_COORDINATOR; too few replicas or a timeout,
			// COORDINATOR_NOT_AVAILABLE).
			return fmt.Errorf("appending to %s-%d: %w (%w)", l.topic, p, err, l.notCoordinator)
		}
		return err
	}
	return l.waitCommitted(ctx, part, info.LastOffset+1, info.LeaderEpoch)
}

// waitCommitted blocks until the partition's high watermark reaches target, as an
// acks=all produce does; a leadership moved meanwhile makes this node no longer the
// coordinator.
func (l internalLog) waitCommitted(ctx context.Context, p *replica.Partition, target int64, epoch int32) error {
	err := waitHighWatermark(ctx, p, target, epoch)
	if errors.Is(err, replica.ErrNotLeader) {
		return fmt.Errorf("%s-%d: leadership moved during the write: %w", p.Topic, p.Index, l.notCoordinator)
	}
	return err
}

// waitHighWatermark blocks until the partition's high watermark reaches target: the
// append counts only once every in-sync replica holds it and the ISR is at least
// min.insync.replicas. It returns replica.ErrNotLeader when the partition is no longer
// led here in epoch.
func waitHighWatermark(ctx context.Context, p *replica.Partition, target int64, epoch int32) error {
	wake := make(chan struct{}, 1)
	defer p.StopWaiting(wake)
	for {
		p.Wait(wake)
		err := p.AckState(epoch)
		if errors.Is(err, replica.ErrNotLeader) {
			return err
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

// load reads every record of the partition from the log start to the log end, as
// Kafka's coordinators do (a new leader's high watermark may not yet cover offsets the
// previous one acknowledged, while its log holds them all: it was in the ISR). fn gets
// each record with its batch's header, or a marker (r nil) for a transaction's control
// batch.
func (l internalLog) load(ctx context.Context, p int32, fn func(h *record.Header, r *record.Record, marker *record.ControlRecord) error) error {
	part, err := l.partition(p)
	if err != nil {
		return err
	}
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
			if err := loadBatch(raw, offset, fn); err != nil {
				return err
			}
			h, _ := record.ParseHeader(raw)
			offset = h.LastOffset() + 1
		}
	}
	return nil
}

// loadBatch hands the records of one batch at or after offset to fn.
func loadBatch(raw []byte, offset int64, fn func(h *record.Header, r *record.Record, marker *record.ControlRecord) error) error {
	it, err := record.NewIterator(raw)
	if err != nil {
		return err
	}
	h := it.Header()
	var r record.Record
	for it.Next(&r) {
		if h.BaseOffset+int64(r.OffsetDelta) < offset {
			continue
		}
		if h.IsControl() {
			if h.ProducerID < 0 {
				continue
			}
			m, err := record.ParseControlRecord(r.Key, r.Value)
			if err != nil || (m.Type != record.ControlCommit && m.Type != record.ControlAbort) {
				continue
			}
			if err := fn(&h, nil, &m); err != nil {
				return err
			}
			continue
		}
		if err := fn(&h, &r, nil); err != nil {
			return err
		}
	}
	return it.Err()
}
