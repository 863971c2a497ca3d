package storage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/record"
)

// Open opens the partition log in opts.Dir/<topic>-<partition>, creating it when
// missing and recovering it otherwise (see CleanShutdown). A directory of that name
// holding no file of Samsa's is refused with ErrForeignDir and left as it is (an empty
// one is adopted when opts.TopicID says the partition exists).
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
	l.topicID.Store(new([16]byte))
	// A partition created now has nothing to recover.
	_, statErr := l.fs.Stat(l.dir)
	fresh := errors.Is(statErr, os.ErrNotExist)
	if fresh {
		if err := l.fs.MkdirAll(l.dir, 0o755); err != nil {
			return nil, err
		}
		// The partition's name in the log directory becomes durable with its first
		// flush, before its recovery point moves: a partition crashed away before that
		// held nothing durable, and is created again from the metadata.
		l.mu.dirDirty, l.mu.parentDirty = true, true
	} else if statErr != nil {
		return nil, statErr
	}
	ents, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	if !fresh {
		if err := checkPartitionFiles(l.dir, ents, opts.TopicID != [16]byte{}); err != nil {
			return nil, err
		}
	}
	if err := l.checkTopicID(opts.TopicID); err != nil {
		return nil, err
	}
	if err := l.load(ents, opts.CleanShutdown || fresh); err != nil {
		l.closeFilesLocked()
		return nil, fmt.Errorf("opening log %s: %w", l.dir, err)
	}
	return l, nil
}

// checkPartitionFiles refuses a directory that does not look like a partition of
// Samsa's: one holding files, none of them Samsa's, or an empty one unless the caller
// knows the partition exists (adopt). Nothing is changed in a refused directory.
func checkPartitionFiles(dir string, ents []os.DirEntry, adopt bool) error {
	var foreign []string
	for _, e := range ents {
		if isPartitionFile(e.Name()) {
			return nil
		}
		foreign = append(foreign, e.Name())
	}
	switch {
	case len(foreign) > 0:
		if len(foreign) > 5 {
			foreign = append(foreign[:5], "…")
		}
		return fmt.Errorf("%w: %s holds %s and no file of Samsa's; move it out of the log directory", ErrForeignDir, dir, strings.Join(foreign, ", "))
	case !adopt:
		return fmt.Errorf("%w: %s is empty", ErrForeignDir, dir)
	}
	return nil
}

// isPartitionFile reports whether name is a file Samsa writes in a partition
// directory (see doc.go), including its temporary and lifecycle variants.
func isPartitionFile(name string) bool {
	for _, suf := range []string{tmpSuffix, deletedSuffix, cleanedSuffix, swapSuffix} {
		name = strings.TrimSuffix(name, suf)
	}
	switch name {
	case logStateFile, partitionMetaFile, leaderEpochFile:
		return true
	}
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix, snapshotSuffix} {
		if stem, ok := strings.CutSuffix(name, suf); ok {
			_, ok := parseBase(stem)
			return ok
		}
	}
	return false
}

// checkTopicID compares the topic id in partition.metadata with id (zero: unknown).
// A missing or damaged file is written with id when it is known, and otherwise once
// it is (AdoptTopicID).
func (l *Log) checkTopicID(id [16]byte) error {
	onDisk, err := readPartitionMetadata(l.fs, l.dir)
	switch {
	case err == nil:
		if id != ([16]byte{}) && id != onDisk {
			return fmt.Errorf("%w: %s holds topic id %s, expected %s", ErrTopicIDMismatch, l.dir, formatUUID(onDisk), formatUUID(id))
		}
		l.topicID.Store(&onDisk)
		return nil
	case errors.Is(err, os.ErrNotExist):
	case errors.Is(err, ErrCorrupt):
		what := "rewritten once the topic id is known"
		if id != ([16]byte{}) {
			what = "rewritten with topic id " + formatUUID(id)
		}
		l.logger.Warn("partition.metadata unreadable; "+what, "topic", l.topic, "partition", l.partition,
			"file", filepath.Join(l.dir, partitionMetaFile), "err", err)
	default:
		return err
	}
	if id == ([16]byte{}) {
		return nil
	}
	l.topicID.Store(&id)
	// A new partition's file is made durable by its first flush (parentDirty).
	return writePartitionMetadata(l.fs, l.dir, id, !l.mu.parentDirty)
}

// TopicID returns the topic id of the partition (zero when unknown).
func (l *Log) TopicID() [16]byte { return *l.topicID.Load() }

// AdoptTopicID records the topic id of a log opened without one (partition.metadata
// was missing or damaged) and writes partition.metadata. It does nothing when the log
// already has an id.
func (l *Log) AdoptTopicID(id [16]byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if id == ([16]byte{}) || l.TopicID() != ([16]byte{}) {
		return nil
	}
	if l.closed.Load() {
		return ErrLogClosed
	}
	if err := writePartitionMetadata(l.fs, l.dir, id, true); err != nil {
		return err
	}
	l.topicID.Store(&id)
	l.logger.Info("partition.metadata written", "topic", l.topic, "partition", l.partition, "topic_id", formatUUID(id))
	return nil
}

// Topic and Partition name the partition this log stores.
func (l *Log) Topic() string    { return l.topic }
func (l *Log) Partition() int32 { return l.partition }

// load finds the segments, checks or recovers them and rebuilds the in-memory state.
// ents is the directory's listing.
func (l *Log) load(ents []os.DirEntry, clean bool) error {
	cfg := l.config()
	now := l.clock.Now()
	bases, ents, err := l.scanDir(ents)
	if err != nil {
		return err
	}
	state, stateErr := readLogState(l.fs, l.dir)
	l.mu.writtenState = state
	var segs []*segment
	var bytes int64
	for _, b := range bases {
		s, err := l.openSegment(b, now)
		if err != nil {
			for _, s := range segs {
				s.file.Close()
			}
			return err
		}
		segs = append(segs, s)
		bytes += s.size.Load()
	}
	l.size.Add(bytes)
	if len(segs) == 0 {
		s, err := l.createSegment(state.logStartOffset, now)
		if err != nil {
			return err
		}
		segs = append(segs, s)
	}
	l.setSegments(segs)
	if stateErr != nil {
		state = unknownLogState
		switch {
		case !errors.Is(stateErr, os.ErrNotExist):
			l.logger.Warn("log-state unreadable; recovering the whole log", "topic", l.topic, "partition", l.partition,
				"file", filepath.Join(l.dir, logStateFile), "err", stateErr)
			clean = false // and log-state is written again below
		case bytes > 0:
			// Lost, or never written: a log that was not flushed since it was created.
			l.logger.Info("no log-state; recovering the whole log", "topic", l.topic, "partition", l.partition,
				"file", filepath.Join(l.dir, logStateFile))
			clean = false
		default:
			clean = true // a new, empty log: nothing to recover or write
		}
	}

	epochs, epochErr := loadEpochCache(l.fs, l.dir)
	l.epochs = epochs
	end, err := l.findEnd(cfg, state, bytes, clean)
	if err != nil {
		return err
	}
	leo, clean := end.leo, end.trusted
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
	if active.size.Load() > 0 {
		var hb [record.HeaderSize]byte
		if _, err := active.file.ReadAt(hb[:], 0); err == nil {
			if h, err := record.ParseHeader(hb[:]); err == nil {
				active.rollTimestamp = h.MaxTimestamp
			}
		}
	}

	if err := l.loadEpochs(epochErr, end.epochDoubt, end.lastEpoch, logStart, leo); err != nil {
		return err
	}
	l.loadTxnIndexes(ents)
	if err := l.loadProducerState(ents, leo); err != nil {
		return err
	}
	if clean {
		// The files end at the recovery point (openClean), or the log is empty.
		l.mu.recoveryPoint, l.mu.recoverySegment, l.mu.recoveryPosition = state.recoveryPoint, state.recoverySegment, state.recoveryPosition
		if bytes == 0 {
			l.mu.recoveryPoint, l.mu.recoverySegment, l.mu.recoveryPosition = min(state.recoveryPoint, leo), -1, -1
		}
		return nil
	}
	// Everything up to the log end was just verified (or the log is empty and
	// log-state damaged); make it durable.
	if err := l.syncFrom(min(state.recoveryPoint, leo), true, false); err != nil {
		return err
	}
	if err := l.epochs.persist(); err != nil { // epochs recovery assigned from the batches
		return err
	}
	l.mu.dirDirty = false
	l.setRecoveryPointLocked(l.endLocked())
	return l.writeStateLocked()
}

// foundEnd is where a log's files end, as load found it.
type foundEnd struct {
	leo       int64
	lastEpoch int32 // leader epoch of the last batch, -1 when not read
	// trusted: the files were taken as they are (a clean open, or an empty log);
	// otherwise they were recovered.
	trusted    bool
	epochDoubt string // see recoveredLog
}

// findEnd finds the log end: an empty log ends where its last segment starts; after a
// clean shutdown the files are checked against log-state (openClean); otherwise, or
// when they disagree, the log is recovered from the recovery point. bytes is the size
// of the segments.
func (l *Log) findEnd(cfg Config, state logState, bytes int64, clean bool) (foundEnd, error) {
	if bytes == 0 {
		return foundEnd{leo: l.active().base, lastEpoch: -1, trusted: clean}, nil
	}
	if clean {
		leo, lastEpoch, mismatch, err := l.openClean(cfg, state)
		if err != nil || mismatch == "" {
			return foundEnd{leo: leo, lastEpoch: lastEpoch, trusted: true}, err
		}
		l.logger.Warn("clean shutdown recorded, but the files disagree with log-state; recovering from the recovery point",
			"topic", l.topic, "partition", l.partition, "file", filepath.Join(l.dir, logStateFile),
			"recovery_point", state.recoveryPoint, "reason", mismatch)
	}
	rec, err := l.recover(cfg, state.recoveryPoint)
	if err != nil {
		return foundEnd{}, err
	}
	if rec.leo < state.recoveryPoint {
		l.logger.Warn("log ends below its recovery point: data that was on disk is gone", "topic", l.topic, "partition", l.partition,
			"log_end_offset", rec.leo, "recovery_point", state.recoveryPoint)
	}
	return foundEnd{leo: rec.leo, lastEpoch: rec.lastEpoch, epochDoubt: rec.epochDoubt}, nil
}

// openSegment opens the segment file starting at base, which exists.
func (l *Log) openSegment(base int64, now time.Time) (*segment, error) {
	s, err := openSegment(l.fs, l.dir, base, now, false)
	if s != nil {
		s.owner = l
	}
	return s, err
}

// createSegment creates the segment file starting at base. Its name is made durable
// by the next flush (dirDirty).
func (l *Log) createSegment(base int64, now time.Time) (*segment, error) {
	s, err := openSegment(l.fs, l.dir, base, now, true)
	if err != nil {
		return nil, err
	}
	s.owner = l
	l.mu.dirDirty = true
	return s, nil
}

// scanDir settles leftovers (the cleaner's .cleaned and .swap files, .deleted, .tmp,
// orphan indexes) and returns the base offsets of the segment files, ascending, and
// the directory's listing (after the cleaner's files were settled: the segments and
// snapshots in it are current).
func (l *Log) scanDir(ents []os.DirEntry) ([]int64, []os.DirEntry, error) {
	changed, err := settleCleanerFiles(l.fs, l.dir, ents)
	if err != nil {
		return nil, nil, err
	}
	if changed {
		if ents, err = l.fs.ReadDir(l.dir); err != nil {
			return nil, nil, err
		}
	}
	logs := map[int64]bool{}
	var orphans []string
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, deletedSuffix), strings.HasSuffix(name, tmpSuffix):
			if isPartitionFile(name) {
				_ = l.fs.Remove(filepath.Join(l.dir, name))
			}
		case strings.HasSuffix(name, logSuffix):
			if b, ok := parseBase(strings.TrimSuffix(name, logSuffix)); ok {
				logs[b] = true
			}
		case strings.HasSuffix(name, indexSuffix), strings.HasSuffix(name, timeIndexSuffix), strings.HasSuffix(name, txnIndexSuffix):
			orphans = append(orphans, name)
		}
	}
	for _, name := range orphans {
		stem := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, txnIndexSuffix), timeIndexSuffix), indexSuffix)
		if b, ok := parseBase(stem); ok && !logs[b] {
			_ = l.fs.Remove(filepath.Join(l.dir, name))
		}
	}
	bases := make([]int64, 0, len(logs))
	for b := range logs {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, ents, nil
}

// openClean loads the active segment's index files, checking them and walking the
// batch headers after their last entries to find the log end offset, and requires
// that the log ends exactly at the recovery point in log-state, at the byte it names
// (what Close leaves). mismatch says why the files cannot be trusted (the caller then
// recovers); an error is an I/O failure.
func (l *Log) openClean(cfg Config, state logState) (leo int64, lastEpoch int32, mismatch string, err error) {
	segs := l.segs()
	active := segs[len(segs)-1]
	active.idx.Lock()
	tail, err := active.loadIndexFilesLocked(cfg.IndexIntervalBytes)
	active.idx.Unlock()
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, ErrCorrupt) {
			return 0, -1, "", err
		}
		return 0, -1, fmt.Sprintf("checking the active segment %s against its index: %v", active.path(logSuffix), err), nil
	}
	leo = tail.lastOffset + 1
	size := active.size.Load()
	switch {
	case state.recoverySegment >= 0 && (active.base != state.recoverySegment || size != state.recoveryPosition):
		mismatch = fmt.Sprintf("active segment %s has %d bytes, log-state has the recovery point at byte %d of segment %d",
			active.path(logSuffix), size, state.recoveryPosition, state.recoverySegment)
	case leo != state.recoveryPoint:
		mismatch = fmt.Sprintf("log end %d found in %s, the recovery point is %d", leo, active.path(logSuffix), state.recoveryPoint)
	}
	return leo, tail.lastEpoch, mismatch, nil
}

// recovered is what recovery found about the whole log.
type recoveredLog struct {
	leo       int64
	lastEpoch int32 // leader epoch of the last batch, -1 when no batch was read
	// epochDoubt says why the leader epoch checkpoint disagrees with the first batch
	// recovery read ("" when it agrees): the epochs below it cannot be trusted.
	epochDoubt string
}

// recover checks every batch (length, CRC, increasing offsets) of the segments from the
// one holding the recovery point on (as Kafka's LogLoader, the whole of that segment:
// the part of it below the recovery point is checked too), rebuilding their indexes. At
// the first bad batch the segment is cut and every later segment deleted.
func (l *Log) recover(cfg Config, recoveryPoint int64) (recoveredLog, error) {
	started := time.Now()
	segs := l.segs()
	first := sort.Search(len(segs), func(i int) bool { return segs[i].base > recoveryPoint }) - 1
	first = max(first, 0)
	next := segs[0].base
	if first > 0 {
		next = segs[first].base
	}
	out := recoveredLog{lastEpoch: -1}
	var scanned, dropped int64
	for i := first; i < len(segs); i++ {
		s := segs[i]
		if i > first && s.base > next && !cfg.Compact {
			// A hole: the segment before ends short of this one. A flush syncs the
			// segments in order, so what follows a hole was never flushed (the new
			// segment's name reached the disk, its predecessor's tail did not). It goes,
			// so that the offsets stay contiguous. (A compacted log has holes where the
			// cleaner removed records; they stay.)
			lost := l.laterBytes(i - 1)
			dropped += lost
			l.logger.Warn("offsets missing before a segment; dropping it and the later ones (never flushed)", "topic", l.topic,
				"partition", l.partition, "file", s.path(logSuffix), "offset", next, "segment_offset", s.base, "bytes_dropped", lost)
			if err := l.dropSegmentsFrom(i); err != nil {
				return out, err
			}
			break
		}
		if s.base < next && s.size.Load() > 0 && i > first {
			// Overlapping segments: keep the earlier data, drop the rest.
			dropped += l.laterBytes(i - 1)
			l.logger.Warn("segment overlaps the previous one; deleting it and the later ones", "topic", l.topic, "partition", l.partition,
				"file", s.path(logSuffix), "offset", next, "bytes_dropped", l.laterBytes(i-1))
			if err := l.dropSegmentsFrom(i); err != nil {
				return out, err
			}
			break
		}
		res, err := l.recoverSegment(s, cfg, next, i == len(segs)-1)
		if err != nil {
			return out, err
		}
		scanned += res.scanned
		if res.lastEpoch >= 0 {
			out.lastEpoch = res.lastEpoch
		}
		if i == first && res.firstEpoch >= 0 && res.firstEpoch != res.checkpointEpoch {
			out.epochDoubt = fmt.Sprintf("the batch at offset %d has epoch %d, the checkpoint says %d", res.firstOffset, res.firstEpoch, res.checkpointEpoch)
		}
		if i == first || s.size.Load() > 0 {
			next = max(res.next, s.base)
		}
		if res.torn {
			lost := s.size.Load() - res.tornPos + l.laterBytes(i)
			dropped += lost
			l.logger.Warn("truncating corrupt or torn log tail", "topic", l.topic, "partition", l.partition,
				"file", s.path(logSuffix), "position", res.tornPos, "offset", next, "bytes_dropped", lost, "reason", res.why)
			if err := l.truncateSegmentAt(s, res.tornPos, cfg); err != nil {
				return out, err
			}
			if err := l.dropSegmentsFrom(i + 1); err != nil {
				return out, err
			}
			break
		}
	}
	segs = l.segs()
	if a := segs[len(segs)-1]; a.size.Load() == 0 {
		next = max(next, a.base)
	}
	if scanned > 0 || dropped > 0 {
		l.logger.Info("recovered log", "topic", l.topic, "partition", l.partition, "recovery_point", recoveryPoint,
			"log_end_offset", next, "segments", len(segs)-first, "bytes_scanned", scanned, "bytes_dropped", dropped,
			"took", time.Since(started).Round(time.Millisecond))
	}
	out.leo = next
	return out, nil
}

func (l *Log) laterBytes(i int) int64 {
	var n int64
	segs := l.segs()
	for _, s := range segs[i+1:] {
		n += s.size.Load()
	}
	return n
}

// recovered is what recoverSegment found.
type recovered struct {
	next        int64 // offset after the last good batch
	firstOffset int64 // of the first batch checked
	firstEpoch  int32 // its leader epoch, -1 when none was checked
	// checkpointEpoch is the epoch the leader epoch checkpoint gave the first batch
	// checked, before recovery added to it.
	checkpointEpoch int32
	lastEpoch       int32  // leader epoch of the last good batch, -1 when none
	scanned         int64  // bytes checked
	torn            bool   // a bad batch was met …
	tornPos         int64  // … at this position
	why             string // … for this reason
}

// recoverSegment validates the batches of s, rebuilding its indexes and assigning the
// leader epochs it meets; last says s is the log's last segment.
func (l *Log) recoverSegment(s *segment, cfg Config, expectNext int64, last bool) (recovered, error) {
	s.idx.Lock()
	defer s.idx.Unlock()
	s.idx.x = segmentIndex{}
	s.idx.fromFiles = false
	s.idx.maxTimestamp, s.idx.offsetOfMaxTimestamp = -1, -1
	res := recovered{next: expectNext, firstEpoch: -1, lastEpoch: -1}
	var since int64
	fr := newFullBatchReader(s.file, 0, s.size.Load())
	for {
		b, h, pos, rerr := fr.next()
		if rerr == io.EOF {
			break
		}
		why := ""
		switch {
		case rerr != nil && !errors.Is(rerr, ErrCorrupt):
			return res, rerr
		case rerr != nil:
			why = "incomplete or unparsable batch"
		case !record.ChecksumOK(b):
			why = "CRC mismatch"
		case h.BaseOffset < s.base || h.BaseOffset < res.next:
			why = fmt.Sprintf("batch offset %d below %d", h.BaseOffset, max(s.base, res.next))
		case h.LastOffset()-s.base > 1<<31-1:
			why = fmt.Sprintf("batch offset %d too far from the segment's base", h.LastOffset())
		}
		if why != "" {
			res.torn, res.tornPos, res.why = true, pos, why
			break
		}
		if res.firstEpoch < 0 {
			res.firstOffset, res.firstEpoch = h.BaseOffset, h.PartitionLeaderEpoch
			res.checkpointEpoch = l.epochs.epochAt(h.BaseOffset)
		}
		res.scanned += int64(len(b))
		s.indexBatchLocked(&h, pos, &since, cfg.IndexIntervalBytes)
		l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset)
		res.next, res.lastEpoch = h.LastOffset()+1, h.PartitionLeaderEpoch
	}
	if res.torn {
		res.scanned += s.size.Load() - res.tornPos
	}
	// The last segment becomes the active one, whose index lives in memory (its files
	// are written when it stops being active); the others' files are written now.
	return res, s.finishIndexLocked(!last)
}

// truncateSegmentAt cuts s, which is to be the active segment, at pos and rebuilds
// its index in memory. Its index files, which describe what was cut, are removed (an
// active segment's are written when it stops being active): nothing here needs space
// on the disk.
func (l *Log) truncateSegmentAt(s *segment, pos int64, cfg Config) error {
	old := s.size.Load()
	if err := s.file.Truncate(pos); err != nil {
		return err
	}
	s.size.Store(pos)
	l.size.Add(pos - old)
	for _, suf := range []string{indexSuffix, timeIndexSuffix} {
		if err := l.fs.Remove(s.path(suf)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	s.idx.Lock()
	defer s.idx.Unlock()
	s.idx.loaded = false
	return s.rebuildIndexLocked(cfg.IndexIntervalBytes, false)
}

// dropSegmentsFrom deletes segments i and later at once (recovery and truncation: no
// reader can hold them yet, or they hold data that is being taken back), the last
// first, so that a crash part way leaves the log shorter, not with a hole.
func (l *Log) dropSegmentsFrom(i int) error {
	segs := l.segs()
	if i >= len(segs) {
		return nil
	}
	var errs []error
	for j := len(segs) - 1; j >= i; j-- {
		s := segs[j]
		l.size.Add(-s.size.Load())
		l.forgetAborted(s)
		errs = append(errs, s.discard())
		for _, suf := range segmentSuffixes {
			if err := l.fs.Remove(s.path(suf)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	l.mu.dirDirty = true
	l.setSegments(append([]*segment(nil), segs[:i]...))
	return errors.Join(errs...)
}

// loadEpochs settles the leader epoch cache read from leader-epoch-checkpoint
// (loadErr is what reading it returned): a missing, damaged or stale checkpoint (its
// latest epoch is not the one of the log's last batch, or recovery found it wrong:
// doubt) is rebuilt from the partition leader epoch field of the batch headers. Then
// entries outside [logStart, leo) go.
func (l *Log) loadEpochs(loadErr error, doubt string, lastEpoch int32, logStart, leo int64) error {
	reason := doubt
	switch {
	case loadErr == nil:
	case errors.Is(loadErr, os.ErrNotExist):
		if leo > logStart {
			reason = "missing"
		}
	case errors.Is(loadErr, ErrCorrupt):
		reason = loadErr.Error()
	default:
		return loadErr
	}
	if reason == "" {
		if err := l.epochs.truncateFromEnd(leo); err != nil {
			return err
		}
		if latest := l.epochs.latest(); lastEpoch >= 0 && latest != lastEpoch {
			reason = fmt.Sprintf("its latest epoch is %d, the last batch's is %d", latest, lastEpoch)
		}
	}
	if reason != "" {
		entries, err := l.epochsFromBatches(leo)
		if err != nil {
			return err
		}
		l.logger.Warn("leader epoch checkpoint rebuilt from the batch headers", "topic", l.topic, "partition", l.partition,
			"file", l.epochs.path, "reason", reason, "epochs", len(entries))
		if err := l.epochs.replace(entries); err != nil {
			return err
		}
	}
	if err := l.epochs.truncateFromEnd(leo); err != nil {
		return err
	}
	return l.epochs.truncateFromStart(logStart)
}

// epochsFromBatches walks the batch headers of every segment below leo and returns
// where each leader epoch starts.
func (l *Log) epochsFromBatches(leo int64) ([]EpochEntry, error) {
	var entries []EpochEntry
	for _, s := range l.segs() {
		it := newBatchIter(s.file, 0, s.size.Load(), 256<<10)
		for {
			h, _, err := it.next()
			if err == io.EOF || errors.Is(err, ErrCorrupt) || (err == nil && h.BaseOffset >= leo) {
				break // damage in an old segment is cut when it is read
			}
			if err != nil {
				return nil, err
			}
			if n := len(entries); h.PartitionLeaderEpoch >= 0 && (n == 0 || h.PartitionLeaderEpoch > entries[n-1].Epoch) {
				entries = append(entries, EpochEntry{h.PartitionLeaderEpoch, h.BaseOffset})
			}
		}
	}
	return entries, nil
}

// loadProducerState loads the newest snapshot not above leo and replays the batches
// after it. ents is the directory's listing. The aborted transactions whose markers
// lie in the replayed range are dropped from the transaction indexes and found again
// by the replay, so that they always agree with the log (after a crash, a truncation).
//
// The replay starts at the snapshot even when the log start is past it: the batches
// between the two (DeleteRecords into a segment) are still in the files, and their
// producers' state is kept until producer.id.expiration.ms, as if they were readable.
// Starting at the log start would reload those producers with the older sequences of
// the snapshot, and refuse their next batches as out of order.
func (l *Log) loadProducerState(ents []os.DirEntry, leo int64) error {
	ps, from := l.loadLatestSnapshot(snapshotsIn(ents), leo)
	l.mu.producers = ps
	l.mu.snapshotAt = -1
	if from == leo {
		l.mu.snapshotAt = leo
	}
	from = max(from, l.segs()[0].base)
	l.dropAbortedFromLocked(min(from, leo))
	defer l.noteTxnsLocked()
	if from < leo {
		if err := l.replayProducers(from, leo); err != nil {
			return err
		}
	}
	return l.writeDirtyTxnIndexesLocked()
}

// replayProducers applies the batches in [from, to) to producer state: their headers,
// and the control record of each marker.
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
			h, bpos, err := it.next()
			if err == io.EOF || errors.Is(err, ErrCorrupt) {
				break // damage in an old segment is cut when it is read
			}
			if err != nil {
				return err
			}
			if h.BaseOffset >= to {
				return nil
			}
			var marker *record.ControlRecord
			if h.IsControl() && h.ProducerID >= 0 {
				if m, err := readMarkerAt(s, bpos, &h); err == nil {
					marker = &m
				}
			}
			if done, ok := l.mu.producers.update(&h, marker); ok {
				l.completeTxnLocked(s, done)
			}
			from = h.LastOffset() + 1
		}
	}
	return nil
}
