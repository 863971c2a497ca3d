package storage

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"syscall"
	"time"
)

// DeleteRecordsBefore advances the log start offset to offset (DeleteRecords), persists
// it and deletes the segments entirely below it. It returns the new log start offset.
// An offset above the log end gives ErrOffsetOutOfRange.
func (l *Log) DeleteRecordsBefore(offset int64) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return 0, ErrLogClosed
	}
	if offset > l.logEnd.Load() || offset < 0 {
		return l.logStart.Load(), fmt.Errorf("%w: offset %d, log end %d", ErrOffsetOutOfRange, offset, l.logEnd.Load())
	}
	if offset <= l.logStart.Load() {
		return l.logStart.Load(), nil
	}
	if err := l.advanceLogStartLocked(offset); err != nil {
		return l.logStart.Load(), l.noSpace("moving the log start", err)
	}
	segs := l.segs()
	n := 0
	for n+1 < len(segs) && segs[n+1].base <= offset {
		n++
	}
	_, err := l.deleteOldestLocked(n, "log start offset")
	return l.logStart.Load(), err
}

// advanceLogStartLocked moves the log start offset forward and persists it, then
// drops the leader epochs below it: log-state first, so that a crash between the two
// leaves epochs below the log start (dropped at load), never an epoch cache that
// starts above it.
func (l *Log) advanceLogStartLocked(offset int64) error {
	if offset <= l.logStart.Load() {
		return nil
	}
	l.logStart.Store(offset)
	l.mu.stateDirty = true // written again by the next checkpoint when this write fails
	if err := l.writeStateLocked(); err != nil {
		return err
	}
	return l.epochs.truncateFromStart(offset)
}

// deleteOldestLocked removes the n oldest segments (never the active one): they leave
// the segment list at once, their files are renamed .deleted and closed and removed
// after file.delete.delay.ms so that ranges already handed to readers stay valid.
func (l *Log) deleteOldestLocked(n int, reason string) (int, error) {
	segs := l.segs()
	n = min(n, len(segs)-1)
	if n <= 0 {
		return 0, nil
	}
	gone := segs[:n]
	l.setSegments(append([]*segment(nil), segs[n:]...))
	if err := l.advanceLogStartLocked(segs[n].base); err != nil {
		return 0, err
	}
	delay := time.Duration(l.config().FileDeleteDelayMs) * time.Millisecond
	var firstErr error
	for _, s := range gone {
		l.size.Add(-s.size.Load())
		l.forgetAborted(s)
		if err := s.renameDeleted(); err != nil && firstErr == nil {
			firstErr = err
		}
		l.logger.Info("deleting segment", "topic", l.topic, "partition", l.partition, "offset", s.base, "reason", reason)
		l.scheduleRemoveLocked(s, delay)
	}
	return n, firstErr
}

func (l *Log) scheduleRemoveLocked(s *segment, delay time.Duration) {
	if delay <= 0 {
		if err := s.removeDeleted(); err != nil {
			l.logger.Warn("removing deleted segment", "topic", l.topic, "partition", l.partition, "offset", s.base, "err", err)
		}
		return
	}
	if l.mu.pendingDeletes == nil {
		l.mu.pendingDeletes = map[*segment]clockTimer{}
	}
	l.mu.pendingDeletes[s] = l.clock.AfterFunc(delay, func() {
		l.mu.Lock()
		_, pending := l.mu.pendingDeletes[s]
		delete(l.mu.pendingDeletes, s)
		l.mu.Unlock()
		if !pending {
			return // Close or Delete took care of it
		}
		if err := s.removeDeleted(); err != nil {
			l.logger.Warn("removing deleted segment", "topic", l.topic, "partition", l.partition, "offset", s.base, "err", err)
		}
	})
}

// RetainNothing in Config.RetentionMs or Config.RetentionBytes stands for Kafka's
// retention.ms=0 or retention.bytes=0, which keep nothing: the zero value of those
// fields means Kafka's default.
const RetainNothing = math.MinInt64

// retentionLimits returns retention.ms and retention.bytes as Kafka reads them: a
// negative value is unlimited, 0 keeps nothing.
func (c Config) retentionLimits() (ms, bytes int64) {
	ms, bytes = c.RetentionMs, c.RetentionBytes
	if ms == RetainNothing {
		ms = 0
	}
	if bytes == RetainNothing {
		bytes = 0
	}
	return ms, bytes
}

// EnforceRetention deletes the oldest segments that break retention.ms (their largest
// timestamp is older) or retention.bytes (while the log stays at or above it without
// them), only when cleanup.policy includes delete. An expired, non-empty active
// segment (or one retention.bytes deletes, which only 0 does) is rolled first so that
// it can go too. It returns how many segments were deleted.
func (l *Log) EnforceRetention(now time.Time) (int, error) {
	return l.EnforceRetentionBelow(now, math.MaxInt64)
}

// EnforceRetentionBelow is EnforceRetention deleting only the segments whose every
// offset is below highWatermark (the active segment only when highWatermark reaches
// the log end), as Kafka's UnifiedLog.deletableSegments: the log start offset never
// passes the high watermark, and records not yet replicated are not deleted.
func (l *Log) EnforceRetentionBelow(now time.Time, highWatermark int64) (int, error) {
	cfg := l.config()
	retentionMs, retentionBytes := cfg.retentionLimits()
	if !cfg.DeleteRetention || (retentionMs < 0 && retentionBytes < 0) {
		return 0, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return 0, ErrLogClosed
	}
	nowMs := now.UnixMilli()
	expired := func(s *segment) (bool, error) {
		if retentionMs < 0 {
			return false, nil
		}
		ts, _, err := s.maxTimestamp(cfg.IndexIntervalBytes)
		if err != nil {
			return false, err
		}
		if ts < 0 {
			// No timestamps: fall back on the segment's file age, as Kafka does.
			st, err := s.file.Stat()
			if err != nil {
				return false, err
			}
			ts = st.ModTime().UnixMilli()
		}
		return nowMs-ts > retentionMs, nil
	}
	// deletable: segment i ends at or below the high watermark.
	deletable := func(segs []*segment, i int) bool {
		end := l.logEnd.Load()
		if i+1 < len(segs) {
			end = segs[i+1].base
		}
		return end <= highWatermark
	}
	segs := l.segs()
	n := 0
	for n < len(segs) && deletable(segs, n) {
		ok, err := expired(segs[n])
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		n++
	}
	deleted, err := l.deleteOldestOrAllLocked(n, now, "retention.ms")
	if err != nil {
		return deleted, err
	}
	if retentionBytes >= 0 {
		segs = l.segs()
		excess := l.size.Load() - retentionBytes
		k := 0
		for k < len(segs) && deletable(segs, k) && excess-segs[k].size.Load() >= 0 {
			excess -= segs[k].size.Load()
			k++
		}
		more, err := l.deleteOldestOrAllLocked(k, now, "retention.bytes")
		deleted += more
		if err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// deleteOldestOrAllLocked deletes the n oldest segments; n may count the active
// segment, which is then rolled first when it holds anything (an empty one stays).
func (l *Log) deleteOldestOrAllLocked(n int, now time.Time, reason string) (int, error) {
	if segs := l.segs(); n == len(segs) {
		if segs[n-1].size.Load() > 0 {
			if err := l.rollLocked(now, l.logEnd.Load()); err != nil {
				return 0, err
			}
		} else {
			n--
		}
	}
	return l.deleteOldestLocked(n, reason)
}

// TruncateTo removes every batch at or after offset (a follower taking back a divergent
// tail). The log end becomes the base offset of the first removed batch. An offset
// below the log start empties the log and starts it at offset.
//
// An offset at or beyond the log end removes no batch, but it still removes the leader
// epochs that start at the log end: epochs this replica assigned as leader
// (AssignLeaderEpoch) without appending in them, which no other replica has. Kafka's
// UnifiedLog.truncateTo does the same. Kept, such an epoch would stay this log's
// latest, the one a follower's fetches name as their last fetched epoch; the leader,
// which never had it, would answer each fetch with a divergence ending where the
// follower's log already ends, and the follower would never fetch a record again.
func (l *Log) TruncateTo(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return ErrLogClosed
	}
	if end := l.logEnd.Load(); offset >= end {
		return l.noSpace("truncating the log", l.epochs.truncateFromEnd(end))
	}
	l.mu.truncations++
	cfg := l.config()
	if offset < l.logStart.Load() {
		return l.truncateFullyLocked(offset)
	}
	segs := l.segs()
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > offset }) - 1
	i = max(i, 0)
	s := segs[i]
	to := logPosition{offset: offset, segment: s.base, position: s.size.Load()}
	pos, h, found, err := s.find(offset, cfg.IndexIntervalBytes)
	if err != nil {
		return err
	}
	if found {
		to.offset, to.position = min(offset, h.BaseOffset), pos
	}
	// The checkpoints are lowered before anything is removed. A full disk fails the
	// truncation here with the log as it was; a crash from here on leaves a recovery
	// point below records still there (recovery reads them) and no epoch for records
	// about to go (loading rebuilds the epochs from the batch headers).
	if l.mu.recoveryPoint > to.offset {
		l.setRecoveryPointLocked(to)
		if err := l.writeStateLocked(); err != nil {
			return l.noSpace("truncating the log", err)
		}
	}
	if err := l.epochs.truncateFromEnd(to.offset); err != nil {
		return l.noSpace("truncating the log", err)
	}
	// Removals and cuts need no space: segments after the one holding offset go, and
	// that one is cut at the batch holding offset. It becomes the active segment,
	// whose index lives in memory.
	if err := l.dropSegmentsFrom(i + 1); err != nil {
		return err
	}
	if found {
		s.active = false
		if err := l.truncateSegmentAt(s, pos, cfg); err != nil {
			return err
		}
	}
	if err := s.activate(); err != nil {
		return err
	}
	if s.size.Load() == 0 {
		s.rollTimestamp = -1
	}
	return l.noSpace("truncating the log", l.afterTruncateLocked(to.offset))
}

// noSpace marks a full disk met by an operation (doing: what it was doing) that leaves
// the log consistent when a write fails as ErrNoSpace: the directory stays online,
// and the operation is retried (a follower fetches again and is told again to
// truncate, or to move its log start).
func (l *Log) noSpace(doing string, err error) error {
	if err != nil && errors.Is(err, syscall.ENOSPC) && !errors.Is(err, ErrNoSpace) {
		return fmt.Errorf("%w: %s in %s: %w", ErrNoSpace, doing, l.dir, err)
	}
	return err
}

// TruncateFullyAndStartAt deletes every segment and starts an empty log at offset (a
// follower whose log ends before the leader's log start).
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return ErrLogClosed
	}
	return l.truncateFullyLocked(offset)
}

// truncateFullyLocked deletes every segment and starts an empty log at offset. The
// log always keeps a segment: the new one is created before the old ones go (a full
// disk refusing it leaves the log as it was), or, when the first segment already
// starts at offset, that one is emptied and kept. Once the old segments are gone the
// log is the new one in memory whatever fails next; a full disk failing a checkpoint
// write then (unlikely, the removals freed space) is ErrNoSpace, and the next
// checkpoint writes it.
//
// The producer state goes with the segments (Kafka's ProducerStateManager.
// truncateFullyAndStartAt): the snapshots are removed first, so that neither the
// state reloaded below nor, after a crash, the loader finds a snapshot of the old log
// for the new one (a crash before the segments go replays them instead).
func (l *Log) truncateFullyLocked(offset int64) error {
	if err := pruneSnapshots(l.fs, l.dir, 0); err != nil {
		return fmt.Errorf("removing the producer snapshots of %s: %w", l.dir, err)
	}
	l.mu.snapshotAt = -1
	var s *segment
	if first := l.segs()[0]; first.base == offset {
		if err := l.dropSegmentsFrom(1); err != nil {
			return err
		}
		s = first
		s.active = false
		if err := l.truncateSegmentAt(s, 0, l.config()); err != nil {
			return err
		}
	} else {
		var err error
		if s, err = l.createSegment(offset, l.clock.Now()); err != nil {
			return l.noSpace("starting the log over", err)
		}
		s.idx.loaded = true
		err = l.dropSegmentsFrom(0)
		l.setSegments([]*segment{s})
		if err != nil {
			return err
		}
	}
	if err := s.activate(); err != nil {
		return err
	}
	l.logStart.Store(offset)
	l.mu.stateDirty = true
	epochErr := l.epochs.truncateFromStart(offset)
	if epochErr != nil && !errors.Is(epochErr, syscall.ENOSPC) {
		return epochErr
	}
	if err := l.afterTruncateLocked(offset); err != nil {
		return l.noSpace("starting the log over", err)
	}
	return l.noSpace("starting the log over", epochErr)
}

// afterTruncateLocked resets the state derived from the tail of the log. A write that
// a full disk fails does not stop it: the log is right in memory, and the file is
// written later (log-state by the next checkpoint, the epochs by the next flush).
func (l *Log) afterTruncateLocked(newEnd int64) error {
	l.logEnd.Store(newEnd)
	if l.mu.recoveryPoint > newEnd {
		l.setRecoveryPointLocked(l.endLocked())
	}
	var full []error
	later := func(err error) error {
		if err != nil && errors.Is(err, syscall.ENOSPC) {
			full = append(full, err)
			return nil
		}
		return err
	}
	if err := later(l.epochs.forgetFromEnd(newEnd)); err != nil {
		return err
	}
	if l.currentStateLocked() != l.mu.writtenState {
		if err := later(l.writeStateLocked()); err != nil {
			return err
		}
	}
	ents, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return err
	}
	if err := later(l.loadProducerState(ents, newEnd)); err != nil {
		return err
	}
	return errors.Join(full...)
}
