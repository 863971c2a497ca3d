package replica

import (
	"fmt"

	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/storage"
)

// AppendAsFollower appends the batches a leader returned (records: whole batches, as
// a Fetch response carries them; a partial batch at the end, cut by the fetch size, is
// left for the next fetch), each checked (length, CRC-32C) and written byte for byte
// with the leader's offsets and epochs. It returns the number of batches appended.
// The partition must not be led here.
func (p *Partition) AppendAsFollower(records []byte) (int, error) {
	p.roleMu.RLock() // no change of role between the check below and the writes
	defer p.roleMu.RUnlock()
	if p.Offline() {
		return 0, ErrOffline
	}
	if p.IsLeader() {
		return 0, ErrNotLeader
	}
	n := 0
	for len(records) > 0 {
		size, err := record.NextBatchSize(records)
		if err != nil || size > len(records) {
			break // a partial batch at the end of the response
		}
		b := records[:size]
		records = records[size:]
		if _, err := record.Validate(b, record.ValidateOptions{Replica: true}); err != nil {
			return n, fmt.Errorf("batch from the leader: %w", err)
		}
		if _, err := p.Log.Append(b, storage.AppendOptions{Follower: true}); err != nil {
			return n, err
		}
		n++
	}
	if n > 0 {
		p.wakeEnd()
	}
	return n, nil
}

// SetFollowerHighWatermark moves a follower's high watermark to the leader's, never
// past its own log end.
func (p *Partition) SetFollowerHighWatermark(leaderHW int64) {
	p.raiseHighWatermark(min(leaderHW, p.Log.LogEndOffset()))
}

// TruncateTo removes the follower's records at and after offset (a divergent tail,
// or everything when offset is below the log start) and lowers the high watermark
// with them. It returns the number of offsets dropped. A truncation that failed part
// way (a full disk) may have dropped records: the high watermark follows the log end
// all the same.
func (p *Partition) TruncateTo(offset int64) (int64, error) {
	p.roleMu.RLock() // no change of role between the check below and the writes
	defer p.roleMu.RUnlock()
	if p.IsLeader() {
		return 0, ErrNotLeader
	}
	before := p.Log.LogEndOffset()
	err := p.Log.TruncateTo(offset)
	after := p.Log.LogEndOffset()
	for {
		cur := p.highWatermark.Load()
		if cur <= after || p.highWatermark.CompareAndSwap(cur, after) {
			break
		}
	}
	p.refreshLastStable()
	return max(before-after, 0), err
}

// MaybeIncrementLogStart moves a follower's log start up to the leader's (records the
// leader deleted with DeleteRecords or retention), no further than its high watermark.
func (p *Partition) MaybeIncrementLogStart(leaderLogStart int64) error {
	to := min(leaderLogStart, p.HighWatermark())
	if to <= p.Log.LogStartOffset() {
		return nil
	}
	_, err := p.Log.DeleteRecordsBefore(to)
	return err
}

// DivergingEnd returns where a follower's log must be cut when the leader reports
// that the follower's last fetched epoch diverged, with the leader's largest epoch at
// or below it and that epoch's end (KIP-320, Kafka's getOffsetTruncationState): where
// the two copies of that epoch both end when this log has the epoch; otherwise where
// this log's largest epoch below it ends (the next fetch compares again from there).
// Without an epoch from the leader it cuts at the leader's end offset, and without
// either at the high watermark, the last offset known committed.
func (p *Partition) DivergingEnd(epoch int32, endOffset int64) int64 {
	switch {
	case endOffset < 0:
		return p.HighWatermark()
	case epoch < 0:
		return min(endOffset, p.Log.LogEndOffset())
	}
	localEpoch, localEnd := p.Log.EndOffsetForEpoch(epoch)
	switch {
	case localEnd < 0:
		return min(endOffset, p.Log.LogEndOffset())
	case localEpoch == epoch:
		return min(endOffset, localEnd)
	}
	return localEnd
}

// StartOver empties a follower's log and starts it at offset (the leader's log start,
// beyond everything this log holds).
func (p *Partition) StartOver(offset int64) error {
	p.roleMu.RLock() // no change of role between the check below and the writes
	defer p.roleMu.RUnlock()
	if p.IsLeader() {
		return ErrNotLeader
	}
	if err := p.Log.TruncateFullyAndStartAt(offset); err != nil {
		return err
	}
	p.highWatermark.Store(offset)
	return nil
}
