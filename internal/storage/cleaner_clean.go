package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/samsa-streaming/samsa/internal/record"
)

// offsetMap maps a key (by a 128-bit hash, as Kafka's SkimpyOffsetMap uses MD5) to the
// latest offset at which the key is written in the dirty section. put keeps the larger
// offset.
type offsetMap struct {
	seed1, seed2 maphash.Seed
	m            map[[2]uint64]int64
}

func newOffsetMap() *offsetMap {
	return &offsetMap{seed1: maphash.MakeSeed(), seed2: maphash.MakeSeed(), m: map[[2]uint64]int64{}}
}

func (m *offsetMap) hash(key []byte) [2]uint64 {
	return [2]uint64{maphash.Bytes(m.seed1, key), maphash.Bytes(m.seed2, key)}
}

func (m *offsetMap) put(k [2]uint64, offset int64) {
	if cur, ok := m.m[k]; !ok || offset > cur {
		m.m[k] = offset
	}
}

func (m *offsetMap) get(key []byte) (int64, bool) {
	off, ok := m.m[m.hash(key)]
	return off, ok
}

// cleanJob is one cleaning of one log: the offset map over the dirty section
// [firstDirty, firstUncleanable), then the rewrite of every segment below the end of the
// map, group by group.
type cleanJob struct {
	ctx              context.Context
	log              *Log
	cfg              Config
	view             cleanerView
	firstDirty       int64 // a segment base offset
	firstUncleanable int64 // a segment base offset ≤ the active segment's
	now              int64 // ms
	mapCapacity      int
	throttle         *throttler
	clockWait        func(context.Context, time.Duration) error
	hook             crashHook

	offsets *offsetMap
	txn     *txnCleaning
	// results
	mapEnd      int64 // first offset not covered by the map: the next first dirty offset
	nextHorizon int64 // earliest delete horizon among tombstones kept, MaxInt64 if none
	bytesRead   int64
	bytesIn     int64 // size of the segments replaced
	bytesOut    int64 // size of the cleaned segments
	groups      int
}

// run cleans the log. It returns errCleanAborted when the log changed under it.
func (j *cleanJob) run() error {
	j.nextHorizon = math.MaxInt64
	if err := j.buildOffsetMap(); err != nil {
		return err
	}
	segs := j.view.segs
	n := 0
	for n < len(segs)-1 && segs[n+1].base <= j.mapEnd {
		n++
	}
	j.txn = newTxnCleaning(j.log.AbortedTransactions(segs[0].base, segs[n].base, nil))
	for _, group := range groupSegments(segs[:n], segs[n].base, j.cfg.SegmentBytes) {
		if err := j.ctx.Err(); err != nil {
			return err
		}
		if err := j.cleanGroup(group); err != nil {
			return err
		}
	}
	return nil
}

// groupSegments splits consecutive segments (end: the base offset of the segment after
// the last) into groups that fit one segment: total size at most maxSize (at least one
// segment a group) and an offset range that fits the index's 32-bit relative offsets
// (Kafka's groupSegmentsBySize).
func groupSegments(segs []*segment, end, maxSize int64) [][]*segment {
	maxSize = min(maxSize, math.MaxInt32)
	var out [][]*segment
	for i := 0; i < len(segs); {
		j, size := i+1, segs[i].size.Load()
		for j < len(segs) {
			// segs[j]'s last offset is below the base of the segment after it.
			last := end - 1
			if j+1 < len(segs) {
				last = segs[j+1].base - 1
			}
			if size+segs[j].size.Load() > maxSize || last-segs[i].base > math.MaxInt32 {
				break
			}
			size += segs[j].size.Load()
			j++
		}
		out = append(out, segs[i:j])
		i = j
	}
	return out
}

// buildOffsetMap reads the dirty segments and records the latest offset of every key.
// As in Kafka, the records of an aborted transaction never enter the map (they must not
// shadow committed data) and those of any other transaction do: the dirty section ends
// below the first unstable offset, so every transaction there is decided, and one not
// in the aborted-transaction index was committed, even when its marker lies beyond the
// dirty section. It stops after a whole segment once the map holds mapCapacity keys;
// mapEnd is then that segment's end.
func (j *cleanJob) buildOffsetMap() error {
	j.offsets = newOffsetMap()
	j.mapEnd = j.firstDirty
	txn := newTxnCleaning(j.log.AbortedTransactions(j.firstDirty, j.firstUncleanable, nil))
	segs := j.view.segs
	for i, s := range segs {
		if i == len(segs)-1 || s.base < j.firstDirty || s.base >= j.firstUncleanable {
			continue
		}
		if len(j.offsets.m) >= j.mapCapacity {
			break
		}
		fr := newFullBatchReader(s.file, 0, s.size.Load())
		for {
			b, h, _, err := fr.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return j.readErr(s, err)
			}
			if err := j.account(len(b)); err != nil {
				return err
			}
			_, recs, err := record.Records(b)
			if err != nil {
				return fmt.Errorf("%w: batch at offset %d of %s: %w", ErrCorrupt, h.BaseOffset, s.path(logSuffix), err)
			}
			if h.IsControl() {
				var marker *record.ControlRecord
				if len(recs) > 0 {
					if c, err := record.ParseControlRecord(recs[0].Key, recs[0].Value); err == nil {
						marker = &c
					}
				}
				txn.onMarker(&h, marker) // ends the producer's aborted transaction
				continue
			}
			if txn.onData(&h) {
				continue // aborted
			}
			for _, r := range recs {
				if r.Key != nil {
					j.offsets.put(j.offsets.hash(r.Key), h.BaseOffset+int64(r.OffsetDelta))
				}
			}
		}
		j.mapEnd = segs[i+1].base
	}
	return nil
}

func (j *cleanJob) readErr(s *segment, err error) error {
	if errors.Is(err, os.ErrClosed) || s.deleted.Load() {
		return errCleanAborted // retention or truncation took the segment meanwhile
	}
	return fmt.Errorf("reading %s: %w", s.path(logSuffix), err)
}

// account counts bytes read or written against log.cleaner.io.max.bytes.per.second.
func (j *cleanJob) account(n int) error {
	j.bytesRead += int64(n)
	if d := j.throttle.record(j.log.clock.Now(), n); d > 0 {
		return j.clockWait(j.ctx, d)
	}
	return j.ctx.Err()
}

// cleanGroup writes the retained batches of group into <base>.log.cleaned with its
// indexes, syncs them and swaps the result in for the group.
func (j *cleanJob) cleanGroup(group []*segment) error {
	l := j.log
	base := group[0].base
	cleanedPath := func(suf string) string { return filepath.Join(l.dir, fileName(base, suf)+cleanedSuffix) }
	f, err := l.fs.OpenFile(cleanedPath(logSuffix), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	seg := &segment{base: base, dir: l.dir, fs: l.fs, file: f, owner: l, rollTimestamp: -1, createdAt: l.clock.Now()}
	seg.idx.maxTimestamp, seg.idx.offsetOfMaxTimestamp = -1, -1
	removeCleaned := func() {
		seg.file.Close()
		for _, suf := range segmentSuffixes {
			_ = l.fs.Remove(cleanedPath(suf))
		}
	}
	w := &cleanedWriter{seg: seg, interval: j.cfg.IndexIntervalBytes}
	var newest time.Time
	var in int64
	for _, s := range group {
		in += s.size.Load()
		if st, err := s.file.Stat(); err == nil && st.ModTime().After(newest) {
			newest = st.ModTime()
		}
		if err := j.filterSegment(s, w); err != nil {
			removeCleaned()
			return err
		}
	}
	if err := j.finishCleaned(w, cleanedPath, newest); err != nil {
		removeCleaned()
		return err
	}
	if err := j.hook.call(stepCleanedWritten); err != nil {
		seg.file.Close()
		return err // injected crash: leave the files as they are
	}
	committed, err := l.replaceSegments(group, seg, j.hook)
	if !committed {
		removeCleaned()
		return err
	}
	if err != nil {
		if errors.Is(err, errInjectedCrash) {
			return err
		}
		l.logger.Warn("finishing segment swap", "topic", l.topic, "partition", l.partition, "offset", base, "err", err)
	}
	j.bytesIn += in
	j.bytesOut += seg.size.Load()
	j.groups++
	return nil
}

// errInjectedCrash is what tests' crash hooks return; the cleaner leaves everything as
// it is when it sees it.
var errInjectedCrash = errors.New("storage: injected crash")

// finishCleaned flushes and syncs the cleaned segment and writes its synced indexes.
func (j *cleanJob) finishCleaned(w *cleanedWriter, path func(string) string, mtime time.Time) error {
	if err := w.flush(); err != nil {
		return err
	}
	if err := w.seg.file.Sync(); err != nil {
		return err
	}
	w.seg.size.Store(w.pos)
	w.seg.idx.Lock()
	w.seg.finalTimeEntryLocked()
	w.seg.idx.loaded = true
	x := w.seg.idx.x
	w.seg.idx.Unlock()
	fsys := j.log.fs
	if err := writeIndexes(fsys, path(indexSuffix), path(timeIndexSuffix), &x, true); err != nil {
		return err
	}
	if aborted := w.seg.idx.aborted; len(aborted) > 0 {
		if err := writeIndexFile(fsys, path(txnIndexSuffix), encodeTxnIndex(aborted), true); err != nil {
			return err
		}
	}
	if !mtime.IsZero() {
		// Retention by age falls back on the file time for segments without timestamps:
		// the cleaned segment keeps the newest time of the ones it replaces, as in Kafka.
		_ = fsys.Chtimes(path(logSuffix), mtime, mtime)
	}
	return nil
}

// filterSegment copies the retained part of every batch of s to w.
func (j *cleanJob) filterSegment(s *segment, w *cleanedWriter) error {
	fr := newFullBatchReader(s.file, 0, s.size.Load())
	for {
		b, h, _, err := fr.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return j.readErr(s, err)
		}
		if err := j.account(len(b)); err != nil {
			return err
		}
		var out []byte
		if h.IsControl() {
			out, err = j.filterMarker(b, &h, w.seg)
		} else {
			out, err = j.filterBatch(b, &h)
		}
		if err != nil {
			return fmt.Errorf("%w: batch at offset %d of %s: %w", ErrCorrupt, h.BaseOffset, s.path(logSuffix), err)
		}
		if out == nil {
			continue
		}
		if err := w.write(out); err != nil {
			return err
		}
		if err := j.account(len(out)); err != nil {
			return err
		}
	}
}

// filterBatch returns what is left of one batch: b itself when every record stays (and
// no delete horizon has to be stamped), a rebuilt batch with the same base offset,
// last offset delta, producer fields and codec when some go, an empty batch (header
// only) when none stays but the batch is its producer's last, or nil to drop it.
//
// A record stays when its key's latest offset in the map is not above its own and,
// for a tombstone (null value), while the batch's delete horizon has not passed. A batch
// keeping a tombstone without a horizon gets one: now + delete.retention.ms (KIP-534:
// attribute bit 6 set, baseTimestamp holds the horizon, record timestamp deltas are
// relative to it). Records without a key are dropped, as Kafka's cleaner does, and so
// are the records of aborted transactions. Control batches (transaction markers) are
// filterMarker's.
func (j *cleanJob) filterBatch(b []byte, h *record.Header) ([]byte, error) {
	aborted := j.txn.onData(h)
	_, recs, err := record.Records(b)
	if err != nil {
		return nil, err
	}
	hasHorizon := h.Attributes&record.AttrDeleteHorizon != 0
	keep := make([]bool, len(recs))
	kept, tombstones := 0, 0
	for i, r := range recs {
		if r.Key == nil || aborted {
			continue
		}
		off := h.BaseOffset + int64(r.OffsetDelta)
		if latest, ok := j.offsets.get(r.Key); ok && off < latest {
			continue
		}
		if r.Value == nil {
			if hasHorizon && j.now >= h.BaseTimestamp {
				continue
			}
			tombstones++
		}
		keep[i] = true
		kept++
	}
	horizon := int64(-1)
	if tombstones > 0 {
		horizon = j.now + j.cfg.DeleteRetentionMs
		if hasHorizon {
			horizon = h.BaseTimestamp
		}
		j.nextHorizon = min(j.nextHorizon, horizon)
	}
	switch {
	case kept == 0:
		last, ok := j.view.lastDataOffset[h.ProducerID]
		if h.ProducerID < 0 || !ok || last != h.LastOffset() {
			return nil, nil
		}
		if len(recs) == 0 {
			return b, nil // already empty
		}
		return emptyBatch(h), nil
	case kept == len(recs) && (tombstones == 0 || hasHorizon):
		return b, nil
	}
	return rebuildBatch(h, recs, keep, horizon)
}

// rebuildBatch encodes the kept records of a batch with its header fields. horizon ≥ 0
// stamps a delete horizon.
func rebuildBatch(h *record.Header, recs []record.Record, keep []bool, horizon int64) ([]byte, error) {
	opts := record.BuildOptions{
		BaseOffset:           h.BaseOffset,
		PartitionLeaderEpoch: h.PartitionLeaderEpoch,
		Compression:          h.Compression(),
		ProducerID:           h.ProducerID,
		ProducerEpoch:        h.ProducerEpoch,
		BaseSequence:         h.BaseSequence,
		Transactional:        h.IsTransactional(),
		Control:              h.IsControl(),
		LogAppendTime:        h.LogAppendTime(),
		BaseTimestamp:        horizon,
	}
	if horizon < 0 {
		// The first kept record's timestamp becomes the base, as a producer would set it.
		for i, r := range recs {
			if keep[i] {
				opts.BaseTimestamp = h.BaseTimestamp + r.TimestampDelta
				break
			}
		}
	}
	var bb record.BatchBuilder
	bb.Reset(opts)
	for i, r := range recs {
		if keep[i] {
			r.TimestampDelta = h.BaseTimestamp + r.TimestampDelta - opts.BaseTimestamp
			bb.Append(r)
		}
	}
	out, err := bb.AppendTo(nil)
	if err != nil {
		return nil, err
	}
	// Keep the original last offset delta, so the batch's last sequence number (base
	// sequence + last offset delta) is unchanged and an idempotent producer's state
	// rebuilt from the log matches what it sent (Kafka's overrideLastOffset).
	binary.BigEndian.PutUint32(out[23:], uint32(h.LastOffsetDelta))
	if horizon >= 0 {
		attrs := binary.BigEndian.Uint16(out[record.AttributesOffset:]) | record.AttrDeleteHorizon
		binary.BigEndian.PutUint16(out[record.AttributesOffset:], attrs)
	}
	if h.LogAppendTime() {
		binary.BigEndian.PutUint64(out[35:], uint64(h.MaxTimestamp))
	}
	binary.BigEndian.PutUint32(out[record.CRCOffset:], record.Checksum(out))
	return out, nil
}

// emptyBatch is a batch header without records that keeps the base offset, last offset
// delta, timestamps and producer fields of h (Kafka's DefaultRecordBatch.writeEmptyHeader;
// record.Build cannot make a batch without records).
func emptyBatch(h *record.Header) []byte {
	b := make([]byte, record.HeaderSize)
	attrs := uint16(h.Attributes) & (record.AttrTimestampType | record.AttrTransactional)
	binary.BigEndian.PutUint64(b[0:], uint64(h.BaseOffset))
	binary.BigEndian.PutUint32(b[8:], uint32(record.HeaderSize-record.LogOverhead))
	binary.BigEndian.PutUint32(b[12:], uint32(h.PartitionLeaderEpoch))
	b[record.MagicOffset] = record.MagicV2
	binary.BigEndian.PutUint16(b[21:], attrs)
	binary.BigEndian.PutUint32(b[23:], uint32(h.LastOffsetDelta))
	binary.BigEndian.PutUint64(b[27:], uint64(h.MaxTimestamp))
	binary.BigEndian.PutUint64(b[35:], uint64(h.MaxTimestamp))
	binary.BigEndian.PutUint64(b[43:], uint64(h.ProducerID))
	binary.BigEndian.PutUint16(b[51:], uint16(h.ProducerEpoch))
	binary.BigEndian.PutUint32(b[53:], uint32(h.BaseSequence))
	binary.BigEndian.PutUint32(b[57:], 0)
	binary.BigEndian.PutUint32(b[record.CRCOffset:], record.Checksum(b))
	return b
}

// cleanedWriter appends batches to a cleaned segment through a buffer and indexes them.
type cleanedWriter struct {
	seg      *segment
	interval int
	buf      []byte
	bufPos   int64 // file position of buf[0]
	pos      int64 // file position after the last batch
	since    int64
}

const cleanedWriteBuffer = 1 << 20

func (w *cleanedWriter) write(b []byte) error {
	h, err := record.ParseHeader(b)
	if err != nil {
		return err
	}
	w.seg.idx.Lock()
	w.seg.indexBatchLocked(&h, w.pos, &w.since, w.interval)
	w.seg.idx.Unlock()
	if len(w.buf)+len(b) > cleanedWriteBuffer {
		if err := w.flush(); err != nil {
			return err
		}
	}
	if len(b) > cleanedWriteBuffer {
		if _, err := w.seg.file.WriteAt(b, w.pos); err != nil {
			return err
		}
		w.pos += int64(len(b))
		w.bufPos = w.pos
		return nil
	}
	w.buf = append(w.buf, b...)
	w.pos += int64(len(b))
	return nil
}

func (w *cleanedWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if _, err := w.seg.file.WriteAt(w.buf, w.bufPos); err != nil {
		return err
	}
	w.bufPos += int64(len(w.buf))
	w.buf = w.buf[:0]
	return nil
}
