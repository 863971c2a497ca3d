package storage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/record"
)

// Open opens the partition log in opts.Dir/<topic>-<partition>, creating it when
// missing and recovering it otherwise (see CleanShutdown).
func Open(opts Options) (*Log, error) {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.FS == nil {
		opts.FS = OSFS{}
	}
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	cfg := opts.Config.withDefaults()
	l := &Log{
		dir:       partitionDir(opts.Dir, opts.Topic, opts.Partition),
		topic:     opts.Topic,
		partition: opts.Partition,
		clock:     opts.Clock,
		logger:    opts.Logger,
		fs:        opts.FS,
	}
	l.cfg.Store(&cfg)
	// A partition created now has nothing to recover.
	_, statErr := os.Stat(l.dir)
	fresh := errors.Is(statErr, os.ErrNotExist)
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return nil, err
	}
	if err := l.checkTopicID(opts.TopicID); err != nil {
		return nil, err
	}
	if err := l.load(opts.CleanShutdown || fresh); err != nil {
		l.closeFilesLocked()
		return nil, fmt.Errorf("opening log %s: %w", l.dir, err)
	}
	return l, nil
}

func (l *Log) checkTopicID(id [16]byte) error {
	onDisk, err := readPartitionMetadata(l.dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		l.topicID = id
		if id == ([16]byte{}) {
			return nil
		}
		return writePartitionMetadata(l.dir, id)
	case err != nil:
		if id == ([16]byte{}) {
			return err
		}
		l.topicID = id
		return writePartitionMetadata(l.dir, id)
	case id != ([16]byte{}) && id != onDisk:
		return fmt.Errorf("%w: %s holds topic id %s, expected %s", ErrTopicIDMismatch, l.dir, formatUUID(onDisk), formatUUID(id))
	}
	l.topicID = onDisk
	return nil
}

// TopicID returns the topic id of the partition (zero when unknown).
func (l *Log) TopicID() [16]byte { return l.topicID }

// Topic and Partition name the partition this log stores.
func (l *Log) Topic() string    { return l.topic }
func (l *Log) Partition() int32 { return l.partition }

// load finds the segments, recovers them if needed and rebuilds the in-memory state.
func (l *Log) load(clean bool) error {
	cfg := l.config()
	now := l.clock.Now()
	bases, err := l.scanDir()
	if err != nil {
		return err
	}
	state, haveState := readLogState(l.dir)
	if !haveState {
		clean = false
	}
	l.mu.writtenState = state
	var segs []*segment
	for _, b := range bases {
		s, err := openSegment(l.fs, l.dir, b, now)
		if err != nil {
			for _, s := range segs {
				s.file.Close()
			}
			return err
		}
		segs = append(segs, s)
		l.size.Add(s.size.Load())
	}
	if len(segs) == 0 {
		s, err := openSegment(l.fs, l.dir, state.logStartOffset, now)
		if err != nil {
			return err
		}
		s.idx.loaded = true
		segs = append(segs, s)
	}
	l.setSegments(segs)

	// The epoch cache is loaded first: recovery re-assigns the epochs of the batches it
	// checks, which repairs a lost or damaged checkpoint for that part of the log.
	l.epochs, err = loadEpochCache(l.dir)
	if err != nil {
		l.logger.Warn("leader epoch checkpoint unreadable, starting empty", "topic", l.topic, "partition", l.partition, "err", err)
		l.epochs = &epochCache{path: filepath.Join(l.dir, leaderEpochFile)}
		if err := l.epochs.writeLocked(); err != nil {
			return err
		}
	}
	var leo int64
	if clean {
		leo, err = l.openClean(cfg)
	} else {
		leo, err = l.recover(cfg, state.recoveryPoint)
	}
	if err != nil {
		return err
	}
	segs = l.segs()
	l.logEnd.Store(leo)
	logStart := max(state.logStartOffset, segs[0].base)
	if logStart > leo {
		logStart = leo
	}
	l.logStart.Store(logStart)

	active := segs[len(segs)-1]
	if err := active.ensureIndex(cfg.IndexIntervalBytes); err != nil {
		return err
	}
	if err := active.activate(); err != nil {
		return err
	}
	active.idx.RLock()
	if n := len(active.idx.x.offsets); n > 0 {
		active.bytesSinceIndex = active.size.Load() - int64(active.idx.x.offsets[n-1].position)
	} else {
		active.bytesSinceIndex = active.size.Load()
	}
	active.idx.RUnlock()
	if active.size.Load() > 0 {
		var hb [record.HeaderSize]byte
		if _, err := active.file.ReadAt(hb[:], 0); err == nil {
			if h, err := record.ParseHeader(hb[:]); err == nil {
				active.rollTimestamp = h.MaxTimestamp
			}
		}
	}

	if err := l.epochs.truncateFromEnd(leo); err != nil {
		return err
	}
	if err := l.epochs.truncateFromStart(logStart); err != nil {
		return err
	}

	if err := l.loadProducerState(leo); err != nil {
		return err
	}
	l.mu.recoveryPoint = min(state.recoveryPoint, leo)
	if !clean {
		// Everything up to the log end was just verified; make it durable.
		if err := l.syncFrom(l.mu.recoveryPoint); err != nil {
			return err
		}
		if err := l.epochs.persist(); err != nil {
			return err
		}
		l.mu.recoveryPoint = leo
		if err := l.writeStateLocked(); err != nil {
			return err
		}
	}
	return nil
}

// scanDir settles leftovers (the cleaner's .cleaned and .swap files, .deleted, .tmp,
// orphan indexes) and returns the base offsets of the segment files, ascending.
func (l *Log) scanDir() ([]int64, error) {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	if changed, err := settleCleanerFiles(l.dir, ents); err != nil {
		return nil, err
	} else if changed {
		if ents, err = os.ReadDir(l.dir); err != nil {
			return nil, err
		}
	}
	logs := map[int64]bool{}
	var orphans []string
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, deletedSuffix), strings.HasSuffix(name, ".tmp"):
			_ = os.Remove(filepath.Join(l.dir, name))
		case strings.HasSuffix(name, logSuffix):
			b, err := strconv.ParseInt(strings.TrimSuffix(name, logSuffix), 10, 64)
			if err == nil && b >= 0 {
				logs[b] = true
			}
		case strings.HasSuffix(name, indexSuffix), strings.HasSuffix(name, timeIndexSuffix):
			orphans = append(orphans, name)
		}
	}
	for _, name := range orphans {
		stem := strings.TrimSuffix(strings.TrimSuffix(name, timeIndexSuffix), indexSuffix)
		if b, err := strconv.ParseInt(stem, 10, 64); err != nil || !logs[b] {
			_ = os.Remove(filepath.Join(l.dir, name))
		}
	}
	bases := make([]int64, 0, len(logs))
	for b := range logs {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

// openClean trusts the files: it only walks the headers after the active segment's
// last index entry to find the log end offset.
func (l *Log) openClean(cfg Config) (int64, error) {
	segs := l.segs()
	// An empty active segment: the end is its base offset.
	active := segs[len(segs)-1]
	if err := active.ensureIndex(cfg.IndexIntervalBytes); err != nil {
		return 0, err
	}
	active.idx.RLock()
	start := active.idx.x.lookup(active.base, 1<<62)
	active.idx.RUnlock()
	leo := active.base
	it := newBatchIter(active.file, start, active.size.Load(), 64<<10)
	for {
		h, pos, err := it.next()
		if err == io.EOF {
			return leo, nil
		}
		if err != nil {
			l.logger.Warn("torn batch in cleanly closed segment, truncating", "topic", l.topic, "partition", l.partition,
				"offset", leo, "bytes_dropped", active.size.Load()-pos)
			if err := l.truncateSegmentAt(active, pos, cfg); err != nil {
				return 0, err
			}
			return leo, nil
		}
		leo = h.LastOffset() + 1
	}
}

// recover checks every batch (length, CRC, increasing offsets) of the segments from the
// one holding the recovery point on, rebuilding their indexes. At the first bad batch
// the segment is cut and every later segment deleted.
func (l *Log) recover(cfg Config, recoveryPoint int64) (int64, error) {
	segs := l.segs()
	first := sort.Search(len(segs), func(i int) bool { return segs[i].base > recoveryPoint }) - 1
	first = max(first, 0)
	next := segs[0].base
	if first > 0 {
		next = segs[first].base
	}
	for i := first; i < len(segs); i++ {
		s := segs[i]
		if s.base < next && s.size.Load() > 0 && i > first {
			// Overlapping segments: keep the earlier data, drop the rest.
			l.logger.Warn("segment overlaps previous one, deleting", "topic", l.topic, "partition", l.partition, "offset", s.base)
			return next, l.dropSegmentsFrom(i)
		}
		end, torn, tornPos, err := l.recoverSegment(s, cfg, next)
		if err != nil {
			return 0, err
		}
		if i == first || s.size.Load() > 0 {
			next = max(end, s.base)
		}
		if torn {
			l.logger.Warn("truncating corrupt or torn log tail", "topic", l.topic, "partition", l.partition,
				"offset", next, "bytes_dropped", s.size.Load()-tornPos+l.laterBytes(i))
			if err := l.truncateSegmentAt(s, tornPos, cfg); err != nil {
				return 0, err
			}
			if err := l.dropSegmentsFrom(i + 1); err != nil {
				return 0, err
			}
			break
		}
	}
	segs = l.segs()
	if a := segs[len(segs)-1]; a.size.Load() == 0 {
		next = max(next, a.base)
	}
	return next, nil
}

func (l *Log) laterBytes(i int) int64 {
	var n int64
	segs := l.segs()
	for _, s := range segs[i+1:] {
		n += s.size.Load()
	}
	return n
}

// recoverSegment validates the batches of s, rebuilding its indexes. It returns the next
// offset after the last good batch and, when a bad batch was met, its position.
func (l *Log) recoverSegment(s *segment, cfg Config, expectNext int64) (next int64, torn bool, tornPos int64, err error) {
	s.idx.Lock()
	defer s.idx.Unlock()
	s.idx.x = segmentIndex{}
	s.idx.fromFiles = false
	s.idx.maxTimestamp, s.idx.offsetOfMaxTimestamp = -1, -1
	next = expectNext
	fr := newFullBatchReader(s.file, 0, s.size.Load())
	var since int64
	for {
		b, h, pos, rerr := fr.next()
		if rerr == io.EOF {
			break
		}
		bad := rerr != nil || !record.ChecksumOK(b) || h.BaseOffset < s.base ||
			h.BaseOffset < next || h.LastOffset()-s.base > 1<<31-1
		if bad {
			if rerr != nil && !errors.Is(rerr, ErrCorrupt) {
				return 0, false, 0, rerr
			}
			torn, tornPos = true, pos
			break
		}
		s.indexBatchLocked(&h, pos, &since, cfg.IndexIntervalBytes)
		l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset)
		next = h.LastOffset() + 1
	}
	s.idx.loaded = true
	if err := writeIndexes(s.path(indexSuffix), s.path(timeIndexSuffix), &s.idx.x); err != nil {
		return 0, false, 0, err
	}
	return next, torn, tornPos, nil
}

// truncateSegmentAt cuts s at pos and drops index entries at or beyond it.
func (l *Log) truncateSegmentAt(s *segment, pos int64, cfg Config) error {
	old := s.size.Load()
	if err := s.file.Truncate(pos); err != nil {
		return err
	}
	s.size.Store(pos)
	l.size.Add(pos - old)
	s.idx.Lock()
	defer s.idx.Unlock()
	s.idx.loaded = false
	return s.rebuildIndexLocked(cfg.IndexIntervalBytes)
}

// dropSegmentsFrom deletes segments i and later at once (recovery and truncation: no
// reader can hold them yet, or they hold data that is being taken back).
func (l *Log) dropSegmentsFrom(i int) error {
	segs := l.segs()
	if i >= len(segs) {
		return nil
	}
	var errs []error
	for _, s := range segs[i:] {
		l.size.Add(-s.size.Load())
		errs = append(errs, s.close())
		for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			if err := os.Remove(s.path(suf)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	l.setSegments(append([]*segment(nil), segs[:i]...))
	return errors.Join(errs...)
}

// loadProducerState loads the newest snapshot not above leo and replays the batches
// after it.
func (l *Log) loadProducerState(leo int64) error {
	snaps, err := listSnapshots(l.dir)
	if err != nil {
		return err
	}
	ps, from := loadLatestSnapshot(l.dir, snaps, leo)
	l.mu.producers = ps
	l.mu.snapshotAt = -1
	if from == leo {
		l.mu.snapshotAt = leo
	}
	from = max(from, l.logStart.Load())
	if from >= leo {
		return nil
	}
	return l.replayProducers(from, leo)
}

// replayProducers applies the headers of the batches in [from, to) to producer state.
func (l *Log) replayProducers(from, to int64) error {
	interval := l.config().IndexIntervalBytes
	for _, s := range l.segs() {
		if s.size.Load() == 0 {
			continue
		}
		pos, _, found, err := s.find(from, interval)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		it := newBatchIter(s.file, pos, s.size.Load(), 256<<10)
		for {
			h, _, err := it.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			if h.BaseOffset >= to {
				return nil
			}
			l.mu.producers.update(&h)
			from = h.LastOffset() + 1
		}
	}
	return nil
}
