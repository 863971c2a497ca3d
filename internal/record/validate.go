package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrTooLarge marks a batch bigger than the configured limit (Kafka's MESSAGE_TOO_LARGE).
var ErrTooLarge = errors.New("record: batch too large")

// ValidateOptions tunes Validate.
type ValidateOptions struct {
	// MaxBatchBytes is the largest batch accepted, in bytes including the 12-byte log
	// overhead (Kafka's max.message.bytes). Zero or negative means no limit.
	MaxBatchBytes int
	// Replica validates a batch copied from a leader's log rather than sent by a
	// client: only its magic, size and framing and its CRC-32C are checked, as Kafka
	// checks what a follower fetches. A log holds batches no client may send: the
	// transaction markers (control batches), a coordinator's transactional writes
	// without sequence numbers, and compacted batches whose records no longer number
	// lastOffsetDelta+1.
	Replica bool
	// Check, when set, is called for each record of a client's batch (after the
	// record is found well formed, in order) with its offset delta, its timestamp
	// (the batch's base timestamp plus its delta) and whether its key is null; an
	// error it returns stops the walk and is Validate's, unwrapped. It lets a topic's
	// per-record rules share the walk, and a compressed batch's one decompression.
	// It is not given the key itself: a compressed batch's records are walked as they
	// are decompressed, and a record larger than the walk's buffer is never held whole.
	Check func(offsetDelta int32, timestamp int64, keyNull bool) error
	// SetMaxTimestamp rewrites a client's CreateTime batch whose maxTimestamp is not
	// the largest timestamp of its records (-1 when none is larger) with that one,
	// and a batch flagged LogAppendTime as CreateTime, recomputing the CRC, as Kafka's
	// LogValidator does (setMaxTimestamp(CREATE_TIME, maxTimestamp)): a producer's
	// header does not decide what retention, the time index and ListOffsets see. The
	// header returned is the rewritten one.
	SetMaxTimestamp bool
}

// Validate checks one whole v2 batch as a producer sent it and returns its header.
//
// Errors, each wrapped with detail:
//   - ErrUnsupportedMagic: magic is not 2.
//   - ErrTooLarge: len(b) > MaxBatchBytes.
//   - ErrCorrupt: shorter than a header, batchLength+12 != len(b), or the CRC-32C does not
//     match (Kafka's CORRUPT_MESSAGE).
//   - ErrInvalid: the contents break a rule (Kafka's INVALID_RECORD): unknown codec,
//     negative lastOffsetDelta, a record count that is not lastOffsetDelta+1, a control
//     batch (clients may not write them), a producer id without a base sequence, or in
//     the records (decompressed first if the batch is compressed) any malformed record,
//     fewer or more records than the header states, offset deltas that are not
//     0,1,2,…, or bytes left after the last record.
//   - ErrCorrupt also when a compressed batch does not decompress, or decompresses to
//     more than MaxDecompressedBytes.
//
// A compressed batch's records are walked as they are decompressed, as Kafka's
// LogValidator does: a header claiming more records than the batch holds would
// otherwise advance the log end by offsets that hold nothing. The walk reads the
// codec's stream into a small pooled buffer (validate_stream.go), so the memory a
// batch costs is that buffer and the codec's window, not the size it expands to.
// Validate does not allocate for an uncompressed batch unless it fails, nor, in the
// steady state, for a compressed one.
func Validate(b []byte, opts ValidateOptions) (Header, error) {
	if len(b) < MagicOffset+1 {
		return Header{}, fmt.Errorf("%w: %w: %d bytes", ErrCorrupt, ErrTooShort, len(b))
	}
	if b[MagicOffset] != MagicV2 {
		h, _ := ParseHeader(b)
		return h, fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, int8(b[MagicOffset]))
	}
	if opts.MaxBatchBytes > 0 && len(b) > opts.MaxBatchBytes {
		h, _ := ParseHeader(b)
		return h, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(b), opts.MaxBatchBytes)
	}
	h, err := checkFrame(b)
	if err != nil || opts.Replica {
		return h, err
	}
	if err := checkClientHeader(&h); err != nil {
		return h, err
	}
	w := walk{count: h.NumRecords, baseTimestamp: h.BaseTimestamp, check: opts.Check, maxTimestamp: -1}
	if h.Compression() != CompressionNone {
		err = w.compressed(b[HeaderSize:], h.Compression())
	} else {
		err = w.uncompressed(b[HeaderSize:])
	}
	if err == nil && opts.SetMaxTimestamp && (h.MaxTimestamp != w.maxTimestamp || h.LogAppendTime()) {
		h.Attributes &^= AttrTimestampType
		h.MaxTimestamp = w.maxTimestamp
		binary.BigEndian.PutUint16(b[AttributesOffset:], uint16(h.Attributes))
		binary.BigEndian.PutUint64(b[35:], uint64(h.MaxTimestamp))
		binary.BigEndian.PutUint32(b[CRCOffset:], Checksum(b))
		h.CRC = binary.BigEndian.Uint32(b[CRCOffset:])
	}
	return h, err
}

// walk checks the records of one batch: count of them, and each passed to check
// when it is set. next is the index of the next record to check, as a compressed
// batch's records are walked a buffer at a time.
type walk struct {
	count         int32
	next          int32
	baseTimestamp int64
	check         func(offsetDelta int32, timestamp int64, keyNull bool) error
	// gaps walks a batch from a log, whose offset deltas need only increase up to
	// lastOffsetDelta (compaction leaves gaps); last is the previous record's.
	gaps            bool
	lastOffsetDelta int32
	last            int32
	// maxTimestamp is the largest record timestamp walked, -1 when none is larger
	// (Kafka's starting value, RecordBatch.NO_TIMESTAMP).
	maxTimestamp int64
}

// checkDelta checks record i's offset delta d: i itself in a client's batch; in a
// log's (w.gaps), more than the previous record's and at most lastOffsetDelta.
func (w *walk) checkDelta(i, d int32) error {
	if !w.gaps {
		if d != i {
			return fmt.Errorf("%w: record %d has offset delta %d", ErrInvalid, i, d)
		}
		return nil
	}
	if d <= w.last || d > w.lastOffsetDelta {
		return fmt.Errorf("%w: record %d has offset delta %d (previous %d, last %d)",
			ErrInvalid, i, d, w.last, w.lastOffsetDelta)
	}
	w.last = d
	return nil
}

// errStopWalk stops Timestamps' walk when its function has seen enough.
var errStopWalk = errors.New("record: walk stopped")

// Timestamps calls fn with the offset delta and timestamp of each record of one whole
// batch from a log, in order, until fn returns false. It checks the frame and CRC
// (ErrCorrupt) and the records' structure as Iterator does (ErrInvalid; offset
// deltas may have gaps), as far as it walks. A compressed batch is walked as it is
// decompressed, as Validate walks one, so it costs a small buffer and the codec's
// window, not what the batch expands to; Iterator holds the whole decompressed
// payload. A LogAppendTime batch's timestamps are its records' own: the caller
// substitutes the batch's.
func Timestamps(b []byte, fn func(offsetDelta int32, timestamp int64) bool) error {
	h, err := checkFrame(b)
	if err != nil {
		return err
	}
	if h.NumRecords < 0 {
		return fmt.Errorf("%w: negative record count %d", ErrInvalid, h.NumRecords)
	}
	w := walk{count: h.NumRecords, baseTimestamp: h.BaseTimestamp, gaps: true,
		lastOffsetDelta: h.LastOffsetDelta, last: -1,
		check: func(d int32, ts int64, _ bool) error {
			if !fn(d, ts) {
				return errStopWalk
			}
			return nil
		}}
	if c := h.Compression(); c != CompressionNone {
		err = w.compressed(b[HeaderSize:], c)
	} else {
		err = w.uncompressed(b[HeaderSize:])
	}
	if errors.Is(err, errStopWalk) {
		return nil
	}
	return err
}

// minRecordSize is the smallest encoded record: seven one-byte varints (length,
// attributes, timestamp delta, offset delta, key length, value length, header count).
const minRecordSize = 7

// checkClientHeader applies the header rules Kafka enforces on batches from clients.
func checkClientHeader(h *Header) error {
	if c := h.Compression(); c > CompressionZstd {
		return fmt.Errorf("%w: unknown compression codec %d", ErrInvalid, int8(c))
	}
	if h.LastOffsetDelta < 0 {
		return fmt.Errorf("%w: negative lastOffsetDelta %d", ErrInvalid, h.LastOffsetDelta)
	}
	if h.NumRecords <= 0 {
		return fmt.Errorf("%w: record count %d", ErrInvalid, h.NumRecords)
	}
	if int64(h.NumRecords) != int64(h.LastOffsetDelta)+1 {
		return fmt.Errorf("%w: record count %d does not match lastOffsetDelta %d",
			ErrInvalid, h.NumRecords, h.LastOffsetDelta)
	}
	if h.IsControl() {
		return fmt.Errorf("%w: clients may not write control batches", ErrInvalid)
	}
	if h.HasProducerID() && h.BaseSequence < 0 {
		return fmt.Errorf("%w: producer id %d with base sequence %d",
			ErrInvalid, h.ProducerID, h.BaseSequence)
	}
	return nil
}

// uncompressed checks that payload holds exactly w.count well-formed records whose
// offset deltas are 0, 1, …, count-1.
func (w *walk) uncompressed(payload []byte) error {
	pos, err := w.records(payload, true)
	if err != nil {
		return err
	}
	if pos != len(payload) {
		return fmt.Errorf("%w: %d bytes after the last of %d records", ErrInvalid, len(payload)-pos, w.count)
	}
	return nil
}

// records checks the records of payload from record w.next on, until the last one
// (w.next == w.count) or, when final is false (payload is a buffered part of a
// longer stream), a record not wholly in payload; it returns the bytes they span.
// Records as producers write them take plainRecordSize's short path; any other, and
// any error, scanRecord's. With final set, payload ending before the last record is
// an error.
func (w *walk) records(payload []byte, final bool) (int, error) {
	pos, count, check := 0, w.count, w.check
	i := w.next
	for ; i < count; i++ {
		n, tsDelta := plainRecordSize(payload, pos, i)
		d, keyNull, decoded := i, false, false
		if n == 0 {
			if !final && !wholeRecord(payload[pos:]) {
				break
			}
			if pos == len(payload) {
				return 0, fmt.Errorf("%w: %d records present, header says %d", ErrInvalid, i, count)
			}
			var err error
			if n, d, err = scanRecord(payload[pos:], nil); err != nil {
				return 0, fmt.Errorf("%w: record %d: %w", ErrInvalid, i, err)
			}
			if err := w.checkDelta(i, d); err != nil {
				return 0, err
			}
			tsDelta, keyNull = timestampAndNullKey(payload[pos : pos+n])
			decoded = true
		} else if w.gaps {
			if err := w.checkDelta(i, d); err != nil {
				return 0, err
			}
		}
		w.maxTimestamp = max(w.maxTimestamp, w.baseTimestamp+tsDelta)
		if check != nil {
			if !decoded {
				_, keyNull = timestampAndNullKey(payload[pos : pos+n])
			}
			if err := check(d, w.baseTimestamp+tsDelta, keyNull); err != nil {
				return 0, err
			}
		}
		pos += n
	}
	w.next = i
	return pos, nil
}

// wholeRecord reports whether b holds the whole record it starts with, or enough of
// it to tell that it is malformed: a length varint that is complete (or malformed)
// and, when it is not negative, that many bytes after it.
func wholeRecord(b []byte) bool {
	length, n := readVarint32(b)
	if n == 0 {
		return len(b) >= 5 // a varint32 takes at most 5 bytes: malformed, not cut
	}
	return length < 0 || int(length) <= len(b)-n
}

// timestampAndNullKey returns the timestamp delta of a record already found well
// formed and whether its key is null.
func timestampAndNullKey(rec []byte) (tsDelta int64, keyNull bool) {
	_, p := readVarint32(rec) // the length
	p++                       // the attributes
	tsDelta, m := readVarint64(rec[p:])
	p += m
	_, m = readVarint32(rec[p:]) // the offset delta
	p += m
	keyLength, _ := readVarint32(rec[p:])
	return tsDelta, keyLength == -1
}

// plainRecordSize returns the size and the timestamp delta of the record at b[pos:]
// when it is well formed, has offset delta delta and no headers, and each of its
// varints takes one or two bytes — what producers write, records under 8 KiB —, and
// 0 for any other record, which scanRecord then checks. It decodes only what the walk needs, with no call
// and no loop: at 100-byte records the full parser's walk was a third of the
// broker's produce CPU.
func plainRecordSize(b []byte, pos int, delta int32) (int, int64) {
	length, p := varint12(b, pos)
	if p == pos || length < 6 || int(length) > len(b)-p {
		return 0, 0
	}
	end := p + int(length)
	b = b[:end]
	// The attributes and the timestamp delta may be anything.
	tsDelta, q := varint12(b, p+1)
	if q == p+1 {
		return 0, 0
	}
	d, p := varint12(b, q)
	if p == q || d != delta {
		return 0, 0
	}
	for range 2 { // key and value: null or within the record
		l, q := varint12(b, p)
		if q == p || l < -1 || int(l) > end-q {
			return 0, 0
		}
		p = q + max(int(l), 0)
	}
	if p != end-1 || b[p] != 0 { // the last byte: no headers
		return 0, 0
	}
	return end - pos, int64(tsDelta)
}

// varint12 decodes the zig-zag varint at b[p:] when it takes one or two bytes and is
// not b's last byte: its value and the position after it, else p.
func varint12(b []byte, p int) (int32, int) {
	if p+1 >= len(b) {
		return 0, p
	}
	c := uint32(b[p])
	if c < 0x80 {
		return int32(c>>1) ^ -int32(c&1), p + 1
	}
	d := uint32(b[p+1])
	if d >= 0x80 {
		return 0, p
	}
	u := c&0x7f | d<<7
	return int32(u>>1) ^ -int32(u&1), p + 2
}

// minBatchLength is the smallest legal batchLength: a header with no records.
const minBatchLength = HeaderSize - LogOverhead

// NextBatchSize returns the total size in bytes of the batch starting at b, reading only
// its first 12 bytes (baseOffset and batchLength); the rest need not be present. It
// returns ErrTooShort if fewer than 12 bytes are given and ErrCorrupt if batchLength is
// smaller than a batch header.
func NextBatchSize(b []byte) (int, error) {
	if len(b) < LogOverhead {
		return 0, ErrTooShort
	}
	length := int32(binary.BigEndian.Uint32(b[LengthOffset:]))
	if length < minBatchLength || uint64(length)+LogOverhead > uint64(math.MaxInt) {
		return 0, fmt.Errorf("%w: batchLength %d", ErrCorrupt, length)
	}
	return int(length) + LogOverhead, nil
}

// Split cuts a concatenation of batches into whole batches (sub-slices of b, no copy).
// It checks framing only (see NextBatchSize), not magic or CRC. A trailing partial batch
// is an error wrapping both ErrCorrupt and ErrTooShort; the batches before it are
// returned with the error so a caller recovering a log can truncate at the torn tail.
func Split(b []byte) ([][]byte, error) {
	var batches [][]byte
	pos := 0
	for pos < len(b) {
		size, err := NextBatchSize(b[pos:])
		if err == nil && size > len(b)-pos {
			err = ErrTooShort
		}
		if err != nil {
			if errors.Is(err, ErrTooShort) {
				err = fmt.Errorf("%w: %w: torn batch at byte %d of %d", ErrCorrupt, ErrTooShort, pos, len(b))
			} else {
				err = fmt.Errorf("at byte %d: %w", pos, err)
			}
			return batches, err
		}
		batches = append(batches, b[pos:pos+size:pos+size])
		pos += size
	}
	return batches, nil
}
