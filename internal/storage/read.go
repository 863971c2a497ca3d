package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/samsa-streaming/samsa/internal/record"
)

// FileRange is a byte range of a segment file. Read it with an explicit offset (pread,
// sendfile with an offset), never through the file's seek position. The file stays
// open for at least file.delete.delay.ms after the segment is deleted.
type FileRange struct {
	File     *os.File
	Pos, Len int64
}

// ReadResult is whole batches as ranges of segment files.
type ReadResult struct {
	Ranges []FileRange
	Size   int64
	// FirstBatchOffset is the base offset of the first batch returned, -1 when empty.
	FirstBatchOffset int64
	// NextOffset is the offset after the last batch returned (the offset asked for
	// when none was).
	NextOffset int64
}

// Read is ReadAppend to no ranges.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64, minOneBatch bool) (ReadResult, error) {
	res, _, err := l.ReadAppend(nil, offset, maxBytes, maxOffset, minOneBatch)
	return res, err
}

// ReadAppend returns whole batches starting with the one containing offset, without copying:
// it stops before a batch whose last offset is ≥ maxOffset (pass the high watermark or
// last stable offset; math.MaxInt64 for no bound) and keeps the total ≤ maxBytes,
// except that with minOneBatch the first batch is returned even when larger (KIP-74).
// offset == LogEndOffset gives an empty result; an offset outside
// [LogStartOffset, LogEndOffset] gives ErrOffsetOutOfRange.
//
// The ranges are appended to dst (a Fetch of many partitions reuses one slice for all
// of them); res.Ranges is the part appended, and the whole slice is returned.
func (l *Log) ReadAppend(dst []FileRange, offset int64, maxBytes int, maxOffset int64, minOneBatch bool) (res ReadResult, all []FileRange, err error) {
	res, all, err = l.read(dst, offset, maxBytes, maxOffset, minOneBatch, nil)
	res.Ranges = all[len(dst):]
	return res, all, err
}

// read is ReadAppend; with copied, the batches' bytes are appended to *copied as well.
func (l *Log) read(dst []FileRange, offset int64, maxBytes int, maxOffset int64, minOneBatch bool, copied *[]byte) (ReadResult, []FileRange, error) {
	res := ReadResult{FirstBatchOffset: -1, NextOffset: offset}
	if l.closed.Load() {
		return res, dst, ErrLogClosed
	}
	segs := l.segs()
	start, end := l.logStart.Load(), l.logEnd.Load()
	if offset < start || offset > end {
		return res, dst, fmt.Errorf("%w: offset %d, log [%d, %d]", ErrOffsetOutOfRange, offset, start, end)
	}
	// Never hand out batches beyond the log end loaded above: an append publishes the
	// segment size before the log end.
	maxOffset = min(maxOffset, end)
	if offset == end || offset >= maxOffset {
		return res, dst, nil
	}
	r := segmentRead{maxOffset: maxOffset, remaining: int64(maxBytes), minOneBatch: minOneBatch, first: -1, ranges: dst, end: offset, copied: copied}
	interval := l.config().IndexIntervalBytes
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > offset }) - 1
	var err error
	for i = max(i, 0); i < len(segs); i++ {
		s := segs[i]
		done, serr := r.segment(s, offset, interval)
		if serr != nil {
			err = l.readErr(s, serr)
			break
		}
		if done {
			break
		}
		offset = r.next
	}
	res.Size, res.FirstBatchOffset, res.NextOffset = r.size, r.first, r.end
	return res, r.ranges, err
}

// segmentRead is the state of a Read across segments.
type segmentRead struct {
	maxOffset   int64
	remaining   int64
	minOneBatch bool
	size, first int64 // ReadResult's Size and FirstBatchOffset
	ranges      []FileRange
	next        int64 // the offset to read from in the next segment
	end         int64 // the offset after the last batch read
	// copied, when not nil, receives the batches' bytes as well (ReadBytesInto),
	// taken from the bytes the header walk read where it holds them.
	copied *[]byte
}

// segment reads the batches of s from offset on; done reports that the read is
// complete (a bound was reached).
func (r *segmentRead) segment(s *segment, offset int64, interval int) (done bool, err error) {
	r.next = offset
	bufSize := 0
	if r.copied != nil {
		// The bytes read are copied out of the iterator's buffer: one that holds them
		// all, and the walk from the index entry before them, reads the file once.
		bufSize = int(min(r.remaining, readIterMaxBuf)) + interval + record.HeaderSize
	}
	it, _, _, found, err := s.findIter(offset, interval, bufSize)
	defer it.close()
	if err != nil || !found {
		return false, err
	}
	var cur *FileRange
	for {
		h, bpos, err := it.next()
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		size := int64(h.Size())
		if h.LastOffset() >= r.maxOffset || (size > r.remaining && !(r.minOneBatch && r.size == 0)) {
			return true, nil
		}
		if r.copied != nil {
			if *r.copied, err = it.appendBytes(*r.copied, bpos, int(size)); err != nil {
				return false, err
			}
		}
		if r.first < 0 {
			r.first = h.BaseOffset
		}
		if cur == nil {
			r.ranges = append(r.ranges, FileRange{File: s.file.OS(), Pos: bpos})
			cur = &r.ranges[len(r.ranges)-1]
		}
		cur.Len += size
		r.size += size
		r.remaining -= size
		r.next = h.LastOffset() + 1
		r.end = r.next
		if r.remaining <= 0 {
			return true, nil
		}
	}
}

func (l *Log) readErr(s *segment, err error) error {
	if l.closed.Load() {
		return ErrLogClosed
	}
	if errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("%w: segment %d was removed", ErrOffsetOutOfRange, s.base)
	}
	return fmt.Errorf("reading %s: %w", s.path(logSuffix), err)
}

// ReadBytes is Read copying the batches into one slice (for internal consumers such as
// coordinators loading their state). At least one batch is returned when available.
func (l *Log) ReadBytes(offset int64, maxBytes int, maxOffset int64) ([]byte, error) {
	return l.ReadBytesInto(nil, offset, maxBytes, maxOffset)
}

// ReadBytesInto is ReadBytes into buf when it is large enough (the result is then a
// prefix of buf), else into a new slice. The bytes come from the reads that walk the
// batch headers where those hold them, so that a small read costs one read of the
// file.
func (l *Log) ReadBytesInto(buf []byte, offset int64, maxBytes int, maxOffset int64) ([]byte, error) {
	out := buf[:0]
	if _, _, err := l.read(nil, offset, maxBytes, maxOffset, true, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// readBatchAt reads the whole batch whose header is h at pos.
func readBatchAt(s *segment, pos int64, h *record.Header) ([]byte, error) {
	b := make([]byte, h.Size())
	if _, err := s.file.ReadAt(b, pos); err != nil {
		return nil, err
	}
	return b, nil
}

// OffsetForTimestamp finds the earliest offset (≥ LogStartOffset) whose record
// timestamp is ≥ ts and that record's timestamp; ok is false when there is none.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, ok bool) {
	if l.closed.Load() {
		return -1, -1, false
	}
	segs := l.segs()
	start := l.logStart.Load()
	interval := l.config().IndexIntervalBytes
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].base <= start {
			continue
		}
		maxTs, _, err := s.maxTimestamp(interval)
		if err != nil || maxTs < ts {
			continue
		}
		s.idx.RLock()
		from, found := s.idx.x.lookupTime(s.base, ts)
		s.idx.RUnlock()
		if !found {
			from = s.base
		}
		from = max(from, start)
		pos, _, found, err := s.find(from, interval)
		if err != nil || !found {
			continue
		}
		it := newReadIter(s.file, pos, s.size.Load())
		defer it.close()
		for {
			h, bpos, err := it.next()
			if err != nil {
				break
			}
			if h.MaxTimestamp < ts || h.LastOffset() < start {
				continue
			}
			if off, rts, ok := recordAtOrAfter(s, bpos, &h, ts, start); ok {
				return off, rts, true
			}
		}
	}
	return -1, -1, false
}

// recordAtOrAfter decodes the batch at pos and returns its first record with a
// timestamp ≥ ts and an offset ≥ minOffset. For LogAppendTime batches every record has
// the batch's max timestamp.
func recordAtOrAfter(s *segment, pos int64, h *record.Header, ts, minOffset int64) (int64, int64, bool) {
	if h.LogAppendTime() {
		return max(h.BaseOffset, minOffset), h.MaxTimestamp, true
	}
	b, err := readBatchAt(s, pos, h)
	if err != nil {
		return 0, 0, false
	}
	// Walked as decompressed (record.Timestamps): a batch of a few kilobytes may
	// expand to hundreds of megabytes, which every lookup would otherwise hold.
	var off, rts int64
	found := false
	err = record.Timestamps(b, func(delta int32, t int64) bool {
		off, rts = h.BaseOffset+int64(delta), t
		found = t >= ts && off >= minOffset
		return !found
	})
	if err != nil && !found {
		// Cannot decode the records: answer at batch granularity.
		return max(h.BaseOffset, minOffset), h.MaxTimestamp, true
	}
	return off, rts, found
}

// MaxTimestamp returns the largest record timestamp in the log and the offset of the
// record carrying it (ListOffsets MAX_TIMESTAMP); (-1, -1) for an empty log.
func (l *Log) MaxTimestamp() (timestamp, offset int64) {
	if l.closed.Load() {
		return -1, -1
	}
	segs := l.segs()
	start := l.logStart.Load()
	interval := l.config().IndexIntervalBytes
	var best *segment
	bestTs, bestBase := int64(-1), int64(-1)
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].base <= start {
			continue
		}
		ts, base, err := s.maxTimestamp(interval)
		if err == nil && ts > bestTs {
			best, bestTs, bestBase = s, ts, base
		}
	}
	if best == nil {
		return -1, -1
	}
	pos, h, found, err := best.find(bestBase, interval)
	if err != nil || !found {
		return bestTs, bestBase
	}
	if h.LogAppendTime() {
		return bestTs, h.BaseOffset // every record carries the max; the first is earliest
	}
	b, err := readBatchAt(best, pos, &h)
	if err != nil {
		return bestTs, bestBase
	}
	offset = h.LastOffset()
	record.Timestamps(b, func(delta int32, t int64) bool { // walked as decompressed
		if t == bestTs {
			offset = h.BaseOffset + int64(delta)
			return false
		}
		return true
	})
	return bestTs, offset
}
