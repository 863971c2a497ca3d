package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-streaming/samsa/internal/record"
)

// File name suffixes (format constants).
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	snapshotSuffix  = ".snapshot"
	deletedSuffix   = ".deleted"
)

// segmentSuffixes are the files of one segment: its records and its indexes.
var segmentSuffixes = []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix}

func fileName(base int64, suffix string) string { return fmt.Sprintf("%020d%s", base, suffix) }

// segment is one file of batches plus its two sparse indexes.
//
// Concurrency: base, file and the paths are immutable. size is the number of bytes
// visible to readers; it only grows while the segment is active (the appender writes the
// bytes first, then publishes the new size) and shrinks only under Log.mu in TruncateTo.
// idx guards the in-memory indexes, loaded lazily for old segments. The fields under
// "appender state" belong to the Log's mutex.
type segment struct {
	base    int64
	dir     string
	fs      FS
	file    File
	size    atomic.Int64
	deleted atomic.Bool
	// owner is the log the segment belongs to (logging, size accounting when damage
	// is found); nil while the cleaner writes a segment.
	owner *Log

	idx struct {
		sync.RWMutex
		loaded               bool
		x                    segmentIndex
		maxTimestamp         int64 // largest batch max timestamp, -1 when none
		offsetOfMaxTimestamp int64 // base offset of the batch holding it, -1 when none
		fromFiles            bool  // x was read from the index files, not rebuilt
		// aborted are the aborted transactions whose marker the segment holds,
		// ascending by marker offset (its .txnindex, loaded at open).
		aborted []AbortedTxn
	}

	// appender state (Log.mu)
	active          bool // the log's last segment, indexed in memory only
	indexDirty      bool // the in-memory index differs from the index files
	txnDirty        bool // idx.aborted differs from the .txnindex file
	bytesSinceIndex int64
	rollTimestamp   int64     // max timestamp of the first batch, -1 when unknown
	createdAt       time.Time // when the segment was created or opened
	reserved        int64     // disk blocks are preallocated up to here (>= size)
	noPreallocate   bool      // the file system refused to preallocate
	rollJitterMs    int64     // taken off segment.ms for this segment (segment.jitter.ms)
	jitterDrawn     bool      // rollJitterMs was drawn (at the first age check)
}

func (s *segment) path(suffix string) string { return filepath.Join(s.dir, fileName(s.base, suffix)) }

// openSegment opens the segment file starting at base, creating it when create is set.
func openSegment(fs FS, dir string, base int64, now time.Time, create bool) (*segment, error) {
	s := &segment{base: base, dir: dir, fs: fs, rollTimestamp: -1, createdAt: now}
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE
	}
	f, err := fs.OpenFile(s.path(logSuffix), flag, 0o644)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	s.file = f
	s.size.Store(st.Size())
	s.idx.maxTimestamp, s.idx.offsetOfMaxTimestamp = -1, -1
	return s, nil
}

// ensureIndex loads the index files the first time they are needed, rebuilding them
// from the segment when missing or invalid.
func (s *segment) ensureIndex(interval int) error {
	s.idx.RLock()
	loaded := s.idx.loaded
	s.idx.RUnlock()
	if loaded {
		return nil
	}
	s.idx.Lock()
	defer s.idx.Unlock()
	return s.ensureIndexLocked(interval)
}

func (s *segment) ensureIndexLocked(interval int) error {
	if s.idx.loaded {
		return nil
	}
	if _, err := s.loadIndexFilesLocked(interval); err != nil {
		if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, ErrCorrupt) {
			return err // an I/O error: the files may be fine
		}
		s.owner.logIndexRebuild(s, err)
		return s.rebuildIndexLocked(interval, true)
	}
	return nil
}

// segmentTail is what loading the index files learnt about the end of a segment.
type segmentTail struct {
	lastOffset int64 // of the last batch; base-1 when the segment is empty
	lastEpoch  int32 // partition leader epoch of the last batch, -1 when empty
}

// loadIndexFilesLocked reads and checks the index files (checkIndexLocked) and, when
// they describe the segment, makes them its index. An error wraps os.ErrNotExist (a
// file is missing), ErrCorrupt (they do not describe the segment, or the walk met
// damage) or is an I/O error.
func (s *segment) loadIndexFilesLocked(interval int) (segmentTail, error) {
	if s.size.Load() == 0 {
		s.idx.x, s.idx.loaded = segmentIndex{}, true
		s.idx.maxTimestamp, s.idx.offsetOfMaxTimestamp = -1, -1
		return segmentTail{lastOffset: s.base - 1, lastEpoch: -1}, nil
	}
	x, err := readIndexes(s.fs, s.path(indexSuffix), s.path(timeIndexSuffix), max(s.size.Load(), 1))
	if err != nil {
		return segmentTail{}, err
	}
	tail, err := s.checkIndexLocked(&x, interval)
	if err != nil {
		return tail, err
	}
	s.idx.x = x
	s.idx.fromFiles = true
	s.idx.loaded = true
	return tail, nil
}

// errIndexMismatch: an index file does not describe its segment.
var errIndexMismatch = fmt.Errorf("%w: index does not match its segment", ErrCorrupt)

// checkIndexLocked is Kafka's index sanity check, and more: on top of what
// readIndexes checks (sizes, order, positions inside the segment) it walks the batch
// headers from the index entry at or before the earlier of the last offset entry and
// the last time entry's batch to the end of the segment, and requires that
//
//   - the index entries it passes point at the start of batches with the offsets they
//     claim (a stale or foreign index points elsewhere);
//   - no batch after the last offset entry should have had an entry (the file was not
//     cut short; an index.interval.bytes lowered since costs one rebuild);
//   - the last time entry names a batch whose largest timestamp it is, and no later
//     batch has a larger one (the segment's final entry is there);
//   - a time index is empty only when no batch has a timestamp.
//
// It sets the segment's max timestamp from the walk. In the usual case (timestamps
// grow) the walk covers the last index.interval.bytes of the segment.
func (s *segment) checkIndexLocked(x *segmentIndex, interval int) (segmentTail, error) {
	size := s.size.Load()
	tail := segmentTail{lastOffset: s.base - 1, lastEpoch: -1}
	var lastO offsetEntry
	haveO := len(x.offsets) > 0
	if haveO {
		lastO = x.offsets[len(x.offsets)-1]
	}
	var lastT timeEntry
	haveT := len(x.times) > 0
	from := int64(lastO.relOffset) // offset the walk must reach through the index
	if haveT {
		lastT = x.times[len(x.times)-1]
		from = min(from, int64(lastT.relOffset))
	}
	startEntry, startIndexed := x.lookupEntry(s.base, s.base+from)
	start := int64(startEntry.position)
	maxTs, offsetOfMax := int64(-1), int64(-1)
	seenLastO, seenLastT := !haveO, !haveT
	var since int64
	it := newBatchIter(s.file, start, size, 64<<10)
	for {
		h, pos, err := it.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return tail, err
		}
		if pos == start && startIndexed && h.BaseOffset != s.base+int64(startEntry.relOffset) {
			return tail, fmt.Errorf("%w: offset index entry names offset %d at position %d, the batch there starts at %d",
				errIndexMismatch, s.base+int64(startEntry.relOffset), pos, h.BaseOffset)
		}
		if haveO && pos == int64(lastO.position) {
			if h.BaseOffset != s.base+int64(lastO.relOffset) {
				return tail, fmt.Errorf("%w: last offset index entry names offset %d at position %d, the batch there starts at %d", errIndexMismatch, s.base+int64(lastO.relOffset), pos, h.BaseOffset)
			}
			seenLastO, since = true, 0
		} else if seenLastO && since > int64(interval) {
			return tail, fmt.Errorf("%w: no offset index entry for the batch at position %d", errIndexMismatch, pos)
		}
		if haveT && h.BaseOffset == s.base+int64(lastT.relOffset) {
			if h.MaxTimestamp != lastT.timestamp {
				return tail, fmt.Errorf("%w: last time index entry says %d for offset %d, the batch says %d", errIndexMismatch, lastT.timestamp, h.BaseOffset, h.MaxTimestamp)
			}
			seenLastT = true
		}
		if seenLastO {
			since += int64(h.Size())
		}
		if h.MaxTimestamp > maxTs {
			maxTs, offsetOfMax = h.MaxTimestamp, h.BaseOffset
		}
		tail.lastOffset, tail.lastEpoch = h.LastOffset(), h.PartitionLeaderEpoch
	}
	switch {
	case !seenLastO:
		return tail, fmt.Errorf("%w: last offset index entry (position %d) is not the start of a batch", errIndexMismatch, lastO.position)
	case !seenLastT:
		return tail, fmt.Errorf("%w: last time index entry names offset %d, not a batch of the segment (which ends at %d)", errIndexMismatch, s.base+int64(lastT.relOffset), tail.lastOffset)
	case haveT && maxTs > lastT.timestamp:
		return tail, fmt.Errorf("%w: time index ends at %d, a later batch has %d", errIndexMismatch, lastT.timestamp, maxTs)
	case !haveT && maxTs >= 0:
		return tail, fmt.Errorf("%w: time index empty, the batch at offset %d has timestamp %d", errIndexMismatch, offsetOfMax, maxTs)
	case !haveT && start > 0:
		// The batches before the walk: the first one tells whether any has a timestamp
		// (an empty time index means none has).
		var hb [record.HeaderSize]byte
		if _, err := s.file.ReadAt(hb[:], 0); err != nil {
			return tail, err
		}
		if h, err := record.ParseHeader(hb[:]); err != nil || h.MaxTimestamp >= 0 {
			return tail, fmt.Errorf("%w: time index empty, the segment has timestamps", errIndexMismatch)
		}
	}
	if haveT {
		maxTs, offsetOfMax = lastT.timestamp, s.base+int64(lastT.relOffset)
	}
	s.idx.maxTimestamp, s.idx.offsetOfMaxTimestamp = maxTs, offsetOfMax
	return tail, nil
}

// rebuildIndexLocked recreates both indexes by walking every batch header. Damage
// (a header that does not parse or a batch running past the end) cuts the segment
// there: the batches before it are served, the bytes after it are not (see cutLocked).
func (s *segment) rebuildIndexLocked(interval int, write bool) error {
	s.idx.x = segmentIndex{}
	s.idx.fromFiles = false
	s.idx.maxTimestamp, s.idx.offsetOfMaxTimestamp = -1, -1
	size := s.size.Load()
	it := newBatchIter(s.file, 0, size, 256<<10)
	var since int64
	next := s.base
	for {
		h, pos, err := it.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				return fmt.Errorf("rebuilding index of %s: %w", s.path(logSuffix), err)
			}
			if err := s.cutLocked(pos, next); err != nil {
				return err
			}
			break
		}
		s.indexBatchLocked(&h, pos, &since, interval)
		next = h.LastOffset() + 1
	}
	return s.finishIndexLocked(write)
}

// finishIndexLocked marks a rebuilt index loaded and, when write is set, writes its
// files (with the final time entry, as deactivate would).
func (s *segment) finishIndexLocked(write bool) error {
	s.finalTimeEntryLocked()
	s.idx.loaded = true
	if !write || s.deleted.Load() {
		return nil // the active segment's, or a deleted one's: in memory only
	}
	return writeIndexes(s.fs, s.path(indexSuffix), s.path(timeIndexSuffix), &s.idx.x, false)
}

// cutLocked stops serving the segment at pos, where damage was found outside
// recovery: in a segment below the recovery point, which recovery does not read.
// The batches before pos stay readable; the file is left as it is (the cleaner or
// retention replace it in time) and the loss is logged.
func (s *segment) cutLocked(pos, offset int64) error {
	old := s.size.Load()
	if s.owner != nil && s.owner.active() == s {
		return fmt.Errorf("%w: %s: damaged at position %d of the active segment", ErrCorrupt, s.path(logSuffix), pos)
	}
	s.size.Store(pos)
	s.owner.segmentCut(s, pos, offset, old-pos)
	return nil
}

// indexBatchLocked adds the index entries for the batch at pos (Kafka's rule: an entry
// when more than interval bytes were appended since the previous one) and updates the
// segment's max timestamp. It returns the entries added (zero values when none).
func (s *segment) indexBatchLocked(h *record.Header, pos int64, since *int64, interval int) (oe offsetEntry, te timeEntry, addedO, addedT bool) {
	if h.MaxTimestamp > s.idx.maxTimestamp {
		s.idx.maxTimestamp, s.idx.offsetOfMaxTimestamp = h.MaxTimestamp, h.BaseOffset
	}
	if *since > int64(interval) {
		oe = offsetEntry{uint32(h.BaseOffset - s.base), uint32(pos)}
		s.idx.x.offsets = append(s.idx.x.offsets, oe)
		addedO = true
		n := len(s.idx.x.times)
		if s.idx.maxTimestamp >= 0 && (n == 0 || s.idx.maxTimestamp > s.idx.x.times[n-1].timestamp) {
			te = timeEntry{s.idx.maxTimestamp, uint32(s.idx.offsetOfMaxTimestamp - s.base)}
			s.idx.x.times = append(s.idx.x.times, te)
			addedT = true
		}
		*since = 0
	}
	*since += int64(h.Size())
	return
}

// finalTimeEntryLocked appends the segment's max timestamp to the time index when it
// is not the last entry yet, so that an inactive segment's max timestamp is its last
// time index entry (Kafka does the same when a segment stops being active).
func (s *segment) finalTimeEntryLocked() (timeEntry, bool) {
	n := len(s.idx.x.times)
	if s.idx.maxTimestamp < 0 || (n > 0 && s.idx.x.times[n-1].timestamp >= s.idx.maxTimestamp) {
		return timeEntry{}, false
	}
	te := timeEntry{s.idx.maxTimestamp, uint32(s.idx.offsetOfMaxTimestamp - s.base)}
	s.idx.x.times = append(s.idx.x.times, te)
	return te, true
}

// activate makes the segment the active one. The in-memory index must be loaded. The
// active segment's index entries live in memory only; the index files are written whole
// when the segment stops being active (roll, close, truncation), so a partition costs one
// file descriptor, not three. After a crash the files of the active segment may be
// stale or missing: they are rebuildable and recovery rebuilds them.
func (s *segment) activate() error {
	s.active = true
	s.reserved = s.size.Load()
	s.idx.RLock()
	fromFiles := s.idx.fromFiles
	// Bytes since the last index entry, as the indexing rule counts them.
	s.bytesSinceIndex = s.size.Load()
	if n := len(s.idx.x.offsets); n > 0 {
		s.bytesSinceIndex -= int64(s.idx.x.offsets[n-1].position)
	}
	s.idx.RUnlock()
	s.indexDirty = !fromFiles || !s.indexFilesMatch()
	return nil
}

// indexFilesMatch reports whether both index files still hold exactly the in-memory
// entries' worth of bytes.
func (s *segment) indexFilesMatch() bool {
	s.idx.RLock()
	no, nt := len(s.idx.x.offsets), len(s.idx.x.times)
	s.idx.RUnlock()
	for _, f := range []struct {
		suffix string
		size   int
	}{{indexSuffix, no * offsetEntrySize}, {timeIndexSuffix, nt * timeEntrySize}} {
		st, err := s.fs.Stat(s.path(f.suffix))
		if err != nil || st.Size() != int64(f.size) {
			return false
		}
	}
	return true
}

// deactivate writes the final time entry and both index files, syncing them when asked.
func (s *segment) deactivate(sync bool) error {
	if !s.active {
		return nil
	}
	s.active = false
	trimErr := s.trimReserved()
	if s.txnDirty {
		s.txnDirty = false
		trimErr = errors.Join(trimErr, s.writeTxnIndex(sync))
	}
	s.idx.Lock()
	if _, added := s.finalTimeEntryLocked(); added {
		s.indexDirty = true
	}
	if !s.indexDirty {
		s.idx.Unlock()
		return trimErr
	}
	s.indexDirty = false
	offsets, times := s.idx.x.encode()
	s.idx.Unlock()
	return errors.Join(trimErr,
		writeIndexFile(s.fs, s.path(indexSuffix), offsets, sync),
		writeIndexFile(s.fs, s.path(timeIndexSuffix), times, sync),
	)
}

// appendBatch writes b at the end of the active segment and indexes it in memory.
// Log.mu held. On error nothing was appended.
func (s *segment) appendBatch(b []byte, h *record.Header, cfg *Config) error {
	pos := s.size.Load()
	if end := pos + int64(len(b)); end > s.reserved && cfg.Preallocate {
		s.reserve(end, int64(len(b)), cfg.SegmentBytes)
	}
	if _, err := s.file.WriteAt(b, pos); err != nil {
		// Cut anything partially written so the file matches what readers see.
		_ = s.file.Truncate(pos)
		s.reserved = pos
		return err
	}
	s.idx.Lock()
	s.indexBatchLocked(h, pos, &s.bytesSinceIndex, cfg.IndexIntervalBytes)
	s.idx.Unlock()
	s.indexDirty = true
	if s.rollTimestamp < 0 && h.MaxTimestamp >= 0 && pos == 0 {
		s.rollTimestamp = h.MaxTimestamp
	}
	s.size.Store(pos + int64(len(b)))
	return nil
}

// Preallocation bounds (Config.Preallocate): an append past the reserve reserves a
// quarter of the segment's size or the append's own size ahead, whichever is larger,
// at most maxReserve and never past the roll size; nothing when that is below
// minReserve, that is before the segment holds 4 MiB (or an append brings 1 MiB). A
// reservation is a block allocation on the produce path and saves the delayed
// allocation of what it covers: worth it for a segment that grows by megabytes, not
// for the small writes of many partitions (on 1,000 partitions growing from empty,
// reserving from 256 KiB cost more broker CPU than it saved), and a slow partition
// keeps no blocks past its end. It is off by default, as Kafka's preallocation is:
// where the file system must first read block bitmaps back from the disk, the append
// waits for it (docs/performance.md, "Preallocation on and off").
const (
	minReserve = 1 << 20
	maxReserve = 16 << 20
)

// errPreallocateUnsupported is what Preallocate returns where the file system has no
// way to reserve blocks.
var errPreallocateUnsupported = errors.New("preallocation not supported")

// reserve preallocates disk blocks past end, so that appends write into blocks the
// file system has already allocated instead of reserving (ext4: delayed-allocating)
// every 4 KiB block as it is written, which costs the writer CPU. The file's length
// does not change, so readers and crash recovery are unaffected; the reserve is
// trimmed when the segment stops being active. Failures only cost speed: the write
// that follows reports any real problem (ENOSPC).
// Log.mu held.
func (s *segment) reserve(end, n, limit int64) {
	ahead := min(max(end/4, n), maxReserve)
	p, ok := s.file.(interface{ Preallocate(off, n int64) error })
	if !ok || s.noPreallocate || ahead < minReserve {
		return
	}
	to := min(end+ahead, max(limit, end))
	from := max(s.reserved, s.size.Load())
	if err := p.Preallocate(from, to-from); err != nil {
		s.noPreallocate = errors.Is(err, errPreallocateUnsupported)
		return
	}
	s.reserved = to
}

// trimReserved releases the blocks reserved past the segment's end. Log.mu held.
func (s *segment) trimReserved() error {
	size := s.size.Load()
	if s.reserved <= size {
		return nil
	}
	s.reserved = size
	return s.file.Truncate(size)
}

// indexFull reports whether either index reached maxBytes.
func (s *segment) indexFull(maxBytes int) bool {
	s.idx.RLock()
	defer s.idx.RUnlock()
	return len(s.idx.x.offsets)*offsetEntrySize+offsetEntrySize > maxBytes ||
		len(s.idx.x.times)*timeEntrySize+timeEntrySize > maxBytes
}

// maxTimestamp returns the segment's largest timestamp and the base offset of the batch
// holding it (-1, -1 when none).
func (s *segment) maxTimestamp(interval int) (int64, int64, error) {
	if err := s.ensureIndex(interval); err != nil {
		return -1, -1, err
	}
	s.idx.RLock()
	defer s.idx.RUnlock()
	return s.idx.maxTimestamp, s.idx.offsetOfMaxTimestamp, nil
}

// find returns the position and header of the first batch whose last offset is ≥
// offset, using the offset index then walking headers. found is false when no such
// batch is in the segment. When the index leads somewhere that is not the batch it
// names, or the walk meets damage, the index is rebuilt from the segment (which cuts
// a damaged segment at the damage) and the lookup is tried once more.
func (s *segment) find(offset int64, interval int) (pos int64, h record.Header, found bool, err error) {
	it, pos, h, found, err := s.findIter(offset, interval, 0)
	it.close()
	return pos, h, found, err
}

// findIter is find handing back the walk's read iterator, which the caller closes:
// when found, it stands at the batch found, so that a read goes on from the bytes the
// walk already read. bufSize is the iterator's buffer size (newReadIterSized).
func (s *segment) findIter(offset int64, interval, bufSize int) (it batchIter, pos int64, h record.Header, found bool, err error) {
	it, pos, h, found, err = s.findOnce(offset, interval, bufSize)
	if err == nil || !errors.Is(err, ErrCorrupt) || (s.owner != nil && s.owner.active() == s) {
		// The active segment's index is built by its appends, and its bytes were
		// checked at open: damage there is not repaired by a rebuild.
		return it, pos, h, found, err
	}
	it.close()
	s.idx.Lock()
	s.owner.logIndexRebuild(s, err)
	err = s.rebuildIndexLocked(interval, true)
	s.idx.Unlock()
	if err != nil {
		return batchIter{}, 0, h, false, err
	}
	return s.findOnce(offset, interval, bufSize)
}

func (s *segment) findOnce(offset int64, interval, bufSize int) (it batchIter, pos int64, h record.Header, found bool, err error) {
	if err := s.ensureIndex(interval); err != nil {
		return batchIter{}, 0, h, false, err
	}
	s.idx.RLock()
	entry, indexed := s.idx.x.lookupEntry(s.base, offset)
	s.idx.RUnlock()
	start := int64(entry.position)
	it = newReadIterSized(s.file, start, s.size.Load(), bufSize)
	for {
		h, pos, err := it.next()
		if err == io.EOF {
			return it, 0, h, false, nil
		}
		if err != nil {
			return it, 0, h, false, err
		}
		if indexed && pos == start && h.BaseOffset != s.base+int64(entry.relOffset) {
			return it, 0, h, false, fmt.Errorf("%w: %s: index names offset %d at position %d, the batch there starts at %d",
				errIndexMismatch, s.path(indexSuffix), s.base+int64(entry.relOffset), pos, h.BaseOffset)
		}
		if h.LastOffset() >= offset {
			it.pos = pos // back to the batch found: its header is in the buffer
			return it, pos, h, true, nil
		}
	}
}

// sync flushes the segment file to disk. Index files are caches rebuilt by recovery;
// they are synced when the segment stops being active (roll, Close).
func (s *segment) sync() error { return s.file.Sync() }

// close closes every file of the segment, syncing the index files of an active one.
func (s *segment) close() error {
	errs := []error{s.deactivate(true)}
	errs = append(errs, s.file.Close())
	return errors.Join(errs...)
}

// discard closes a segment whose files are being removed, writing nothing: a full
// disk cannot fail it.
func (s *segment) discard() error {
	s.active = false
	return s.file.Close()
}

// renameDeleted renames the segment's files with the .deleted suffix. The open file
// stays readable until close.
func (s *segment) renameDeleted() error {
	s.deleted.Store(true)
	var errs []error
	for _, suf := range segmentSuffixes {
		p := s.path(suf)
		if err := s.fs.Rename(p, p+deletedSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeDeleted closes the segment and removes its .deleted files.
func (s *segment) removeDeleted() error {
	errs := []error{s.close()}
	for _, suf := range segmentSuffixes {
		if err := s.fs.Remove(s.path(suf) + deletedSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
