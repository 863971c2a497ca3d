package storage

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/record"
)

// snapshotsKept is how many producer snapshots stay on disk.
const snapshotsKept = 3

// Options opens one partition log.
type Options struct {
	// Dir is the log directory (one entry of log.dirs); the partition lives in
	// Dir/<topic>-<partition>.
	Dir       string
	Topic     string
	Partition int32
	// TopicID is written to partition.metadata; zero keeps what is on disk. A non-zero id
	// different from the one on disk is refused (ErrTopicIDMismatch, wraps ErrCorrupt).
	TopicID [16]byte
	Config  Config
	Clock   clock.Clock
	Logger  *slog.Logger
	// FS opens segment and index files; nil means OSFS.
	FS FS
	// CleanShutdown says the files were closed cleanly (the Manager's marker was
	// present): nothing is scanned at open. Otherwise every segment from the recovery
	// point on is checked batch by batch and a torn tail is cut.
	CleanShutdown bool
}

// AppendOptions qualifies one append.
type AppendOptions struct {
	// LeaderEpoch is stamped into the batch (leader appends).
	LeaderEpoch int32
	// Now is the append time (LogAppendTime, segment age); zero means the log's clock.
	Now time.Time
	// Follower appends a batch replicated from the leader: its base offset and leader
	// epoch are kept as they are (the base offset must be ≥ the log end offset), no
	// producer checks are made, producer state is only updated.
	Follower bool
	// Coordinator marks a coordinator's write (transaction markers, transactional
	// offset commits): batches without sequence numbers, whose producer epoch and
	// coordinator epoch are checked but not their sequences.
	Coordinator bool
	// TxnVersion is the transaction version of a marker (WriteTxnMarkers v2,
	// KIP-1228). From 2, every transaction ends with the producer's epoch bumped, so
	// a marker must carry an epoch above the producer's: one at its epoch is a late
	// copy of the last transaction's marker, refused (ErrInvalidProducerEpoch) while
	// a transaction is open there and written again otherwise (a retry whose answer
	// was lost). Below 2 a marker may carry the producer's epoch.
	TxnVersion int8
	// TxnGuard, when not zero, is the guard TxnVerification returned for the
	// producer of this transactional batch: the append fails with ErrInvalidTxnState
	// if a marker ended the producer's transaction since.
	TxnGuard uint64
}

// AppendInfo describes an append.
type AppendInfo struct {
	BaseOffset, LastOffset int64
	// LeaderEpoch is the epoch the batch was appended in (AppendOptions.LeaderEpoch;
	// the batch's own for a follower).
	LeaderEpoch    int32
	LogAppendTime  int64 // -1 if CreateTime
	LogStartOffset int64
	// Duplicate: the batch was already in the log (idempotent retry); BaseOffset and
	// LastOffset are those of the original append and nothing was written.
	Duplicate bool
}

// Log is one partition's log. It is safe for concurrent use: appends, truncation,
// retention and flushes are serialized by mu; readers work from an atomically published
// segment list and never take mu. Lock order: flushMu → mu → epochs.mu → segment.idx.
type Log struct {
	dir       string
	topic     string
	partition int32
	topicID   atomic.Pointer[[16]byte] // zero until known; set once (Open, AdoptTopicID)
	clock     clock.Clock
	logger    *slog.Logger
	fs        FS

	segments atomic.Pointer[[]*segment] // ascending base offset; last is active
	logStart atomic.Int64
	logEnd   atomic.Int64
	size     atomic.Int64
	closed   atomic.Bool
	cfg      atomic.Pointer[Config]

	epochs *epochCache

	// unstableTxns counts the open transactions and those whose marker may be above
	// the high watermark (FirstUnstableOffset's lock-free answer when zero);
	// abortedCount the entries of the segments' transaction indexes; nextGuard numbers
	// transaction verifications (TxnVerification).
	unstableTxns atomic.Int64
	abortedCount atomic.Int64
	nextGuard    atomic.Uint64

	flushMu sync.Mutex // serializes Flush; taken before mu
	// background counts the goroutines flushing rolled segments; Close and Abandon wait
	// for them.
	background sync.WaitGroup

	mu struct {
		sync.Mutex
		producers         *producerState
		recoveryPoint     int64
		unflushedMessages int64
		firstUnflushedAt  time.Time // zero when everything is flushed
		stateDirty        bool      // recovery point moved since log-state was written
		writtenState      logState  // what log-state on disk holds
		snapshotAt        int64     // offset of a snapshot holding the current producer state, -1 if none
		pendingDeletes    map[*segment]clockTimer
		flushQueued       bool  // a background Flush has started but not yet taken flushMu
		syncErr           error // the first failed fsync of segment data; appends fail from then on

		// recoverySegment and recoveryPosition say where the recovery point lies: the
		// segment with that base offset is on disk below that position (segment -1:
		// not known).
		recoverySegment  int64
		recoveryPosition int64
		// dirDirty: a segment file was created or removed since the directory was last
		// fsynced; a flush fsyncs it before the recovery point moves (a segment's data
		// is not durable while its name is not).
		dirDirty bool
		// parentDirty: the partition's directory was created and its name in the log
		// directory is not known to be on disk; the first flush fsyncs the log
		// directory too (creating a partition costs no fsync).
		parentDirty bool
		// truncations counts TruncateTo calls: a Flush that saw one happen during its
		// fsync does not move the recovery point (the offsets it synced were taken back).
		truncations int64
	}
}

func (l *Log) config() Config { return *l.cfg.Load() }

func (l *Log) segs() []*segment {
	if p := l.segments.Load(); p != nil {
		return *p
	}
	return nil
}

func (l *Log) active() *segment {
	s := l.segs()
	return s[len(s)-1]
}

func (l *Log) setSegments(s []*segment) { l.segments.Store(&s) }

// Dir is the partition's directory.
func (l *Log) Dir() string { return l.dir }

// LogStartOffset is the first offset that may be read.
func (l *Log) LogStartOffset() int64 { return l.logStart.Load() }

// LogEndOffset is the offset the next appended record gets.
func (l *Log) LogEndOffset() int64 { return l.logEnd.Load() }

// Size is the total size in bytes of the segments.
func (l *Log) Size() int64 { return l.size.Load() }

// LatestEpoch is the newest leader epoch in the leader epoch cache, -1 if none.
func (l *Log) LatestEpoch() int32 { return l.epochs.latest() }

// EndOffsetForEpoch answers OffsetForLeaderEpoch: the largest epoch ≤ epoch known to the
// log and the offset where the next epoch starts (the log end offset for the latest
// epoch); (-1, -1) when epoch is newer than every known epoch or nothing is known.
func (l *Log) EndOffsetForEpoch(epoch int32) (foundEpoch int32, endOffset int64) {
	return l.epochs.endOffsetFor(epoch, l.logEnd.Load())
}

// AssignLeaderEpoch records that epoch starts at the log end offset, as a replica that
// becomes leader does before its first append (Kafka's maybeAssignEpochStartOffset), so
// that a follower that diverged in an older epoch is told where that epoch ended even
// before the new leader has appended anything. Like an append's, the entry is written
// with the next flush, not now: a broker becoming leader of a thousand partitions
// would otherwise wait for a thousand fsyncs. After a crash before that flush an epoch
// without batches is forgotten, and a follower asking about the epoch before it is cut
// back to the high watermark instead (see replica.DivergingEnd).
func (l *Log) AssignLeaderEpoch(epoch int32) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return ErrLogClosed
	}
	l.epochs.assign(epoch, l.logEnd.Load())
	return nil
}

// EpochAt is the leader epoch the record at offset was appended in, from the leader
// epoch cache: the epoch of the latest entry starting at or before offset, -1 when
// none does.
func (l *Log) EpochAt(offset int64) int32 { return l.epochs.epochAt(offset) }

// EpochEntries returns a copy of the leader epoch cache.
func (l *Log) EpochEntries() []EpochEntry { return l.epochs.all() }

// Producers lists the idempotent/transactional producers known to the partition.
func (l *Log) Producers() []ProducerInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.producers.infos()
}

// ExpireProducers forgets idempotent producers with no open transaction whose last
// batch is older than producer.id.expiration.ms; it returns how many went. A forgotten
// producer that comes back is accepted at whatever sequence it sends (as in Kafka),
// without duplicate detection for the batches it sent before.
func (l *Log) ExpireProducers(now time.Time) int {
	cutoff := now.UnixMilli() - l.config().ProducerIDExpirationMs
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.mu.producers.expire(cutoff)
	if n > 0 {
		l.mu.snapshotAt = -1
	}
	return n
}

// SetCoordinatorEpoch records the coordinator epoch of the last transaction marker
// written for producerID (the broker knows it from WriteTxnMarkers).
func (l *Log) SetCoordinatorEpoch(producerID int64, epoch int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.producers.setCoordinatorEpoch(producerID, epoch)
	l.mu.snapshotAt = -1
}

// RecoveryPoint is the offset below which data is known to be on disk.
func (l *Log) RecoveryPoint() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.recoveryPoint
}

// UpdateConfig replaces the configuration; it applies to the following operations.
func (l *Log) UpdateConfig(c Config) {
	c = c.withDefaults()
	l.cfg.Store(&c)
}

func (l *Log) now(t time.Time) time.Time {
	if t.IsZero() {
		return l.clock.Now()
	}
	return t
}

// Append appends one validated v2 batch; see AppendOptions. The batch may be modified
// in place (offsets, leader epoch, LogAppendTime) and is not retained.
func (l *Log) Append(batch []byte, opts AppendOptions) (AppendInfo, error) {
	h, err := record.ParseHeader(batch)
	if err != nil {
		return AppendInfo{}, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if h.Size() != len(batch) || h.Length < minBatchLength || h.LastOffsetDelta < 0 {
		return AppendInfo{}, fmt.Errorf("%w: batch length %d does not match %d bytes", ErrCorrupt, h.Size(), len(batch))
	}
	cfg := l.config()
	if int64(len(batch)) > cfg.SegmentBytes || len(batch) > math.MaxInt32/2 {
		return AppendInfo{}, fmt.Errorf("%w: %d bytes, segment.bytes %d", ErrRecordTooLarge, len(batch), cfg.SegmentBytes)
	}
	now := l.now(opts.Now)

	var marker *record.ControlRecord
	if h.IsControl() && h.ProducerID >= 0 {
		m, err := readMarker(batch)
		if err != nil {
			if !opts.Follower {
				return AppendInfo{}, fmt.Errorf("transaction marker: %w", err)
			}
		} else {
			marker = &m
		}
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return AppendInfo{}, ErrLogClosed
	}
	if err := l.mu.syncErr; err != nil {
		return AppendInfo{}, fmt.Errorf("appends refused since an fsync failed: %w", err)
	}
	info := AppendInfo{LogAppendTime: -1}
	leo := l.logEnd.Load()
	epoch := opts.LeaderEpoch
	info.LeaderEpoch = epoch
	if opts.Follower {
		if h.BaseOffset < leo {
			return AppendInfo{}, fmt.Errorf("%w: follower batch at offset %d below log end %d", ErrOffsetOutOfRange, h.BaseOffset, leo)
		}
		epoch = h.PartitionLeaderEpoch
		info.LeaderEpoch = epoch
	} else {
		dup, err := l.mu.producers.check(&h, marker, opts)
		if err != nil {
			return AppendInfo{}, err
		}
		if opts.TxnGuard != 0 && h.IsTransactional() && !h.IsControl() {
			if err := l.checkTxnGuardLocked(&h, opts.TxnGuard); err != nil {
				return AppendInfo{}, err
			}
		}
		if dup != nil {
			info.BaseOffset, info.LastOffset, info.Duplicate = dup.baseOffset, dup.lastOffset, true
			info.LogStartOffset = l.logStart.Load()
			if cfg.LogAppendTime {
				info.LogAppendTime = dup.timestamp
			}
			return info, nil
		}
		record.SetBaseOffset(batch, leo)
		record.SetPartitionLeaderEpoch(batch, epoch)
		h.BaseOffset, h.PartitionLeaderEpoch = leo, epoch
		if cfg.LogAppendTime {
			ms := now.UnixMilli()
			record.SetLogAppendTime(batch, ms)
			h.MaxTimestamp, h.Attributes = ms, h.Attributes|record.AttrTimestampType
			info.LogAppendTime = ms
		}
	}
	if err := l.maybeRollLocked(&h, len(batch), now, cfg); err != nil {
		return AppendInfo{}, appendError(l.active(), err)
	}
	seg := l.active()
	if err := seg.appendBatch(batch, &h, &cfg); err != nil {
		return AppendInfo{}, appendError(seg, err)
	}
	l.size.Add(int64(len(batch)))
	l.logEnd.Store(h.LastOffset() + 1)
	if done, ok := l.mu.producers.update(&h, marker); ok {
		l.completeTxnLocked(seg, done)
	}
	if h.IsTransactional() {
		l.noteTxnsLocked()
	}
	l.epochs.assign(epoch, h.BaseOffset)
	if l.mu.firstUnflushedAt.IsZero() {
		l.mu.firstUnflushedAt = now
	}
	l.mu.unflushedMessages += int64(max(h.NumRecords, 1))
	info.BaseOffset, info.LastOffset = h.BaseOffset, h.LastOffset()
	info.LogStartOffset = l.logStart.Load()
	if l.mu.unflushedMessages >= cfg.FlushIntervalMessages {
		// The recovery point is persisted later (next roll, Flush, Close or the
		// Manager's checkpoint pass): a stale one only makes recovery scan more.
		// On an fsync error the batch is in the log (info says where) but not durable.
		if err := l.flushLocked(false); err != nil {
			return info, err
		}
	}
	return info, nil
}

// appendError describes a failed append, which left the log as it was. A full disk
// is ErrNoSpace: the directory may keep serving and appends succeed once space is
// freed; other errors take the directory offline.
func appendError(seg *segment, err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%w: appending to %s: %w", ErrNoSpace, seg.path(logSuffix), err)
	}
	return fmt.Errorf("appending to %s: %w", seg.path(logSuffix), err)
}

// maybeRollLocked starts a new segment when the batch does not fit the active one
// (size, age, index full, relative offset overflow), as Kafka's LogSegment.shouldRoll.
func (l *Log) maybeRollLocked(h *record.Header, n int, now time.Time, cfg Config) error {
	seg := l.active()
	size := seg.size.Load()
	if size == 0 {
		if h.LastOffset()-seg.base > math.MaxInt32 {
			// A follower batch far beyond the empty active segment's base: restart the
			// segment at the batch so relative offsets fit the index.
			return l.replaceEmptyActiveLocked(h.BaseOffset, now)
		}
		return nil
	}
	var waited int64
	if seg.rollTimestamp >= 0 && h.MaxTimestamp >= 0 {
		waited = h.MaxTimestamp - seg.rollTimestamp
	} else {
		waited = now.Sub(seg.createdAt).Milliseconds()
	}
	segmentMs := cfg.SegmentMs
	if cfg.Compact && cfg.MaxCompactionLagMs < segmentMs {
		// A compacted log rolls by max.compaction.lag.ms too, so the cleaner can reach
		// records that must be compacted by then (Kafka's LogConfig.maxSegmentMs).
		segmentMs = cfg.MaxCompactionLagMs
	}
	if !seg.jitterDrawn {
		// Each segment rolls a random amount early, so that partitions created together
		// do not all roll (and flush) at once: Kafka's segment.jitter.ms.
		seg.jitterDrawn = true
		if j := min(cfg.SegmentJitterMs, segmentMs); j > 0 {
			seg.rollJitterMs = mrand.Int64N(j)
		}
	}
	if size+int64(n) > cfg.SegmentBytes || size+int64(n) > math.MaxInt32 ||
		waited > segmentMs-seg.rollJitterMs ||
		seg.indexFull(cfg.SegmentIndexBytes) ||
		h.LastOffset()-seg.base > math.MaxInt32 {
		return l.rollLocked(now, h.BaseOffset)
	}
	return nil
}

// replaceEmptyActiveLocked swaps the empty active segment for one starting at base.
func (l *Log) replaceEmptyActiveLocked(base int64, now time.Time) error {
	segs := l.segs()
	if err := l.dropSegmentsFrom(len(segs) - 1); err != nil {
		return err
	}
	seg, err := l.newActiveSegment(base, now)
	if err != nil {
		return err
	}
	l.setSegments(append(l.segs(), seg))
	return nil
}

// newActiveSegment creates an empty segment starting at base, ready to be appended to.
func (l *Log) newActiveSegment(base int64, now time.Time) (*segment, error) {
	seg, err := l.createSegment(base, now)
	if err != nil {
		return nil, err
	}
	seg.idx.loaded = true
	if err := seg.activate(); err != nil {
		seg.file.Close()
		return nil, err
	}
	return seg, nil
}

// rollLocked closes the active segment for writing, starts a new one at base (the log
// end offset, or a follower batch's base offset beyond it) and snapshots producer state.
// The rolled segment is fsynced in the background, as Kafka flushes on roll, and the
// recovery point moves once it is on disk: an append never waits for a whole segment
// to be written out.
func (l *Log) rollLocked(now time.Time, base int64) error {
	old := l.active()
	leo := l.logEnd.Load()
	base = max(base, leo)
	// Create the new segment before retiring the old one, so that a failure leaves the
	// old one active and whole.
	seg, err := l.newActiveSegment(base, now)
	if err != nil {
		return err
	}
	if err := old.deactivate(true); err != nil {
		// The index files are caches; recovery rebuilds them if they are wrong.
		l.logger.Warn("closing index files", "topic", l.topic, "partition", l.partition, "offset", old.base, "err", err)
	}
	segs := append(append([]*segment(nil), l.segs()...), seg)
	l.setSegments(segs)
	if err := writeSnapshot(l.fs, l.dir, leo, l.mu.producers); err != nil {
		l.logger.Warn("writing producer snapshot", "topic", l.topic, "partition", l.partition, "offset", leo, "err", err)
	} else {
		l.mu.snapshotAt = leo
		_ = pruneSnapshots(l.fs, l.dir, snapshotsKept)
	}
	l.logger.Debug("rolled segment", "topic", l.topic, "partition", l.partition, "offset", leo)
	l.flushInBackgroundLocked()
	return nil
}

// flushInBackgroundLocked runs Flush on a goroutine of its own, unless one is already
// waiting to run.
func (l *Log) flushInBackgroundLocked() {
	if l.mu.flushQueued {
		return
	}
	l.mu.flushQueued = true
	l.background.Add(1)
	go func() {
		defer l.background.Done()
		l.mu.Lock()
		l.mu.flushQueued = false
		l.mu.Unlock()
		if err := l.Flush(); err != nil && !errors.Is(err, ErrLogClosed) {
			l.logger.Error("flushing rolled segment", "topic", l.topic, "partition", l.partition, "err", err)
		}
	}()
}

// flushLocked fsyncs every segment holding data above the recovery point (and the
// directory when segment files were created or removed) and moves the recovery point
// to the log end offset, persisting it when persist is set.
func (l *Log) flushLocked(persist bool) error {
	end := l.endLocked()
	if err := l.syncFrom(l.mu.recoveryPoint, l.mu.dirDirty, l.mu.parentDirty); err != nil {
		l.syncFailedLocked(err)
		return err
	}
	l.mu.dirDirty, l.mu.parentDirty = false, false
	if written, err := l.persistEpochs(); !written {
		return err
	}
	l.advanceRecoveryPointLocked(end)
	if persist && l.mu.stateDirty {
		return l.writeStateLocked()
	}
	return nil
}

// persistEpochs writes the leader epoch checkpoint, which a flush does before the
// recovery point moves past the epochs assigned since the last one; written reports
// whether it may move. On a full disk the checkpoint stays pending (the next flush
// writes it) and the recovery point where it is, so that a restart assigns those
// epochs again from the batches above it: the data synced is not lost, and the flush
// is not an error — the directory stays online, as for an append on a full disk.
func (l *Log) persistEpochs() (written bool, err error) {
	err = l.epochs.persist()
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, syscall.ENOSPC):
		return false, nil
	}
	return false, fmt.Errorf("writing the leader epoch checkpoint of %s: %w", l.dir, err)
}

// syncFailedLocked records a failed fsync of segment data. Appends fail from then on:
// after a failed fsync the kernel may have dropped the dirty pages, so what the log
// holds is no longer known to be on disk (the broker takes the directory offline).
func (l *Log) syncFailedLocked(err error) {
	if l.mu.syncErr == nil {
		l.mu.syncErr = err
	}
}

// syncFrom fsyncs the segments that may hold data at or above offset, then the
// partition directory when dir is set and the log directory holding it when parent is.
func (l *Log) syncFrom(offset int64, dir, parent bool) error {
	segs := l.segs()
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].base <= offset {
			continue
		}
		if s.deleted.Load() {
			continue
		}
		if err := s.sync(); err != nil && !errors.Is(err, os.ErrClosed) {
			return fmt.Errorf("syncing %s: %w", s.path(logSuffix), err)
		}
	}
	if dir || parent {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return fmt.Errorf("syncing %s: %w", l.dir, err)
		}
	}
	if parent {
		// A new partition's first flush: its partition.metadata, written unsynced, and
		// its name in the log directory.
		if err := syncFile(l.fs, filepath.Join(l.dir, partitionMetaFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("syncing %s: %w", filepath.Join(l.dir, partitionMetaFile), err)
		}
		if err := l.fs.SyncDir(filepath.Dir(l.dir)); err != nil {
			return fmt.Errorf("syncing %s: %w", filepath.Dir(l.dir), err)
		}
	}
	return nil
}

// syncFile fsyncs a file written earlier.
func syncFile(fsys FS, path string) error {
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	return errors.Join(err, f.Close())
}

// logPosition is an offset and where it lies in the files: the base offset of the
// segment holding it and its byte position there.
type logPosition struct {
	offset, segment, position int64
}

// endLocked is where the log ends now: the active segment's size. Log.mu held (an
// append publishes both under it).
func (l *Log) endLocked() logPosition {
	a := l.active()
	return logPosition{l.logEnd.Load(), a.base, a.size.Load()}
}

// advanceRecoveryPointLocked moves the recovery point to end, a log end whose data
// was just fsynced.
func (l *Log) advanceRecoveryPointLocked(end logPosition) {
	if end.offset >= l.logEnd.Load() {
		l.mu.unflushedMessages = 0
		l.mu.firstUnflushedAt = time.Time{}
	}
	if end.offset > l.mu.recoveryPoint {
		l.mu.recoveryPoint, l.mu.recoverySegment, l.mu.recoveryPosition = end.offset, end.segment, end.position
		l.mu.stateDirty = true
	}
}

// setRecoveryPointLocked puts the recovery point at end (recovery, truncation).
func (l *Log) setRecoveryPointLocked(end logPosition) {
	l.mu.recoveryPoint, l.mu.recoverySegment, l.mu.recoveryPosition = end.offset, end.segment, end.position
	l.mu.stateDirty = true
}

// currentStateLocked is what log-state would hold now.
func (l *Log) currentStateLocked() logState {
	return logState{
		logStartOffset:   l.logStart.Load(),
		recoveryPoint:    l.mu.recoveryPoint,
		recoverySegment:  l.mu.recoverySegment,
		recoveryPosition: l.mu.recoveryPosition,
	}
}

func (l *Log) writeStateLocked() error {
	st := l.currentStateLocked()
	err := writeLogState(l.fs, l.dir, st)
	if err == nil {
		l.mu.stateDirty = false
		l.mu.writtenState = st
	}
	return err
}

// CheckpointState persists the log start offset and recovery point if they changed
// since they were last written (the Manager calls it on its flush schedule).
func (l *Log) CheckpointState() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() || !l.mu.stateDirty {
		return nil
	}
	return l.writeStateLocked()
}

// Flush fsyncs all appended data and advances the recovery point. Appends continue
// while the fsync runs.
func (l *Log) Flush() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	if l.closed.Load() {
		l.mu.Unlock()
		return ErrLogClosed
	}
	end, rp, dir, parent, truncations := l.endLocked(), l.mu.recoveryPoint, l.mu.dirDirty, l.mu.parentDirty, l.mu.truncations
	l.mu.dirDirty, l.mu.parentDirty = false, false
	l.mu.Unlock()
	if end.offset <= rp && !dir && !parent {
		return nil
	}
	err := l.syncFrom(rp, dir, parent)
	if err != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.mu.dirDirty = l.mu.dirDirty || dir
		l.mu.parentDirty = l.mu.parentDirty || parent
		l.syncFailedLocked(err)
		return err
	}
	if l.closed.Load() {
		return ErrLogClosed
	}
	if written, err := l.persistEpochs(); !written {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return ErrLogClosed
	}
	if truncations != l.mu.truncations {
		return nil // the offsets synced were taken back meanwhile
	}
	l.advanceRecoveryPointLocked(end)
	if !l.mu.stateDirty {
		return nil
	}
	return l.writeStateLocked()
}

// MaybeFlush flushes when the oldest unflushed append is older than flush.ms.
func (l *Log) MaybeFlush(now time.Time) error {
	l.mu.Lock()
	first := l.mu.firstUnflushedAt
	l.mu.Unlock()
	if first.IsZero() || now.Sub(first).Milliseconds() < l.config().FlushIntervalMs {
		return nil
	}
	return l.Flush()
}

// Close flushes, writes a producer snapshot and the log state, and closes the files.
// Segments waiting for deletion are removed now.
func (l *Log) Close() error {
	defer l.background.Wait() // after the locks are released: a queued Flush takes them
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Swap(true) {
		return nil
	}
	var errs []error
	errs = append(errs, l.flushLocked(false))
	// Files that already hold the current state are not rewritten: a clean shutdown of
	// thousands of idle partitions must not cost thousands of fsyncs.
	leo := l.logEnd.Load()
	if l.mu.snapshotAt != leo {
		// The snapshot says every marker below leo is in a transaction index: the
		// active segment's goes first.
		if a := l.active(); a.txnDirty {
			a.txnDirty = false
			errs = append(errs, a.writeTxnIndex(true))
		}
		errs = append(errs, writeSnapshot(l.fs, l.dir, leo, l.mu.producers))
		_ = pruneSnapshots(l.fs, l.dir, snapshotsKept)
	}
	// The index files are written before log-state: log-state is what a clean open
	// compares the files with.
	errs = append(errs, l.closeFilesLocked())
	if l.currentStateLocked() != l.mu.writtenState {
		errs = append(errs, l.writeStateLocked())
	}
	return errors.Join(errs...)
}

// Abandon closes the log's files without flushing it or writing its state, for a log
// whose directory failed. Reads and appends afterwards fail with ErrLogClosed.
func (l *Log) Abandon() {
	defer l.background.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Swap(true) {
		return
	}
	for s, t := range l.mu.pendingDeletes {
		t.Stop()
		s.file.Close()
	}
	l.mu.pendingDeletes = nil
	for _, s := range l.segs() {
		s.file.Close()
	}
}

func (l *Log) closeFilesLocked() error {
	var errs []error
	for s, t := range l.mu.pendingDeletes {
		t.Stop()
		errs = append(errs, s.removeDeleted())
	}
	l.mu.pendingDeletes = nil
	for _, s := range l.segs() {
		errs = append(errs, s.close())
	}
	return errors.Join(errs...)
}

// Delete closes the log and removes its directory. The directory is renamed at once
// (to <topic>-<partition>.<id>-delete, Kafka's convention) and removed after
// file.delete.delay.ms, so ranges handed to readers stay valid until then.
func (l *Log) Delete() error {
	defer l.background.Wait()
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Swap(true) {
		return ErrLogClosed
	}
	target := deleteDirName(l.dir)
	if err := l.fs.Rename(l.dir, target); err != nil {
		return err
	}
	// Not durable until the log directory is fsynced: a crash before may bring the
	// partition back whole (the broker deletes it again).
	syncErr := l.fs.SyncDir(filepath.Dir(l.dir))
	segs := l.segs()
	pending := l.mu.pendingDeletes
	l.mu.pendingDeletes = nil
	remove := func() {
		// The directory is going: close the files without writing index files.
		for s, t := range pending {
			t.Stop()
			s.file.Close()
		}
		for _, s := range segs {
			s.file.Close()
		}
		if err := l.fs.RemoveAll(target); err != nil {
			l.logger.Warn("removing deleted log", "dir", target, "err", err)
		}
	}
	delay := time.Duration(l.config().FileDeleteDelayMs) * time.Millisecond
	if delay <= 0 {
		remove()
	} else {
		l.clock.AfterFunc(delay, remove)
	}
	return syncErr
}

// deleteDirSuffix marks a partition directory scheduled for removal:
// <topic>-<partition>.<32 hex digits>-delete.
const deleteDirSuffix = "-delete"

// deleteDirName is the name a partition directory is renamed to when it is deleted.
func deleteDirName(dir string) string {
	var id [16]byte
	_, _ = rand.Read(id[:])
	return dir + "." + hex.EncodeToString(id[:]) + deleteDirSuffix
}

// isDeleteDirName reports whether name is a partition directory renamed by a delete
// (and nothing else that happens to end in -delete).
func isDeleteDirName(name string) bool {
	stem, ok := strings.CutSuffix(name, deleteDirSuffix)
	i := strings.LastIndexByte(stem, '.')
	if !ok || i < 0 || len(stem)-i-1 != 32 {
		return false
	}
	if _, err := hex.DecodeString(stem[i+1:]); err != nil {
		return false
	}
	_, ok = parsePartitionDir(stem[:i])
	return ok
}

// partitionDirName is <topic>-<partition>.
func partitionDirName(topic string, partition int32) string {
	return fmt.Sprintf("%s-%d", topic, partition)
}

func partitionDir(dir, topic string, partition int32) string {
	return filepath.Join(dir, partitionDirName(topic, partition))
}

type clockTimer = clock.Timer

// logIndexRebuild logs that a segment's index files were found wrong (or missing)
// and are rebuilt from the segment. Nil-safe (a segment the cleaner is writing).
func (l *Log) logIndexRebuild(s *segment, why error) {
	if l == nil {
		return
	}
	l.logger.Warn("index files do not match their segment; rebuilding them", "topic", l.topic, "partition", l.partition,
		"file", s.path(logSuffix), "offset", s.base, "reason", why)
}

// segmentCut accounts for and logs damage found in a segment outside recovery: the
// segment is served up to pos, the dropped bytes after it are not.
func (l *Log) segmentCut(s *segment, pos, offset, dropped int64) {
	if l == nil {
		return
	}
	l.size.Add(-dropped)
	l.logger.Warn("damaged batch in a segment below the recovery point; serving the segment up to it", "topic", l.topic,
		"partition", l.partition, "file", s.path(logSuffix), "position", pos, "offset", offset, "bytes_dropped", dropped)
}
