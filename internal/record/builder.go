package record

import (
	"encoding/binary"
	"fmt"
)

// BuildOptions describes the batch header Build writes.
//
// The zero value is literal: ProducerID 0 is a real producer id. Start from
// DefaultBuildOptions for a batch without a producer (-1 id, epoch and sequence) and an
// unknown partition leader epoch (-1).
type BuildOptions struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Compression          Compression
	ProducerID           int64 // -1 = none
	ProducerEpoch        int16 // -1 = none
	BaseSequence         int32 // -1 = none
	Transactional        bool
	Control              bool
	// BaseTimestamp is the timestamp records' TimestampDelta is relative to. The batch's
	// maxTimestamp is BaseTimestamp plus the largest delta, or BaseTimestamp itself when
	// LogAppendTime is set (it is then the broker's append time).
	BaseTimestamp int64
	LogAppendTime bool
	// CompressionLevel is the codec's level as Kafka names it; zero is the codec's
	// default (see CompressLevel).
	CompressionLevel int
}

// DefaultBuildOptions returns options for a non-idempotent, uncompressed batch at offset
// zero: ProducerID, ProducerEpoch, BaseSequence and PartitionLeaderEpoch are -1.
func DefaultBuildOptions() BuildOptions {
	return BuildOptions{
		PartitionLeaderEpoch: -1,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		BaseSequence:         -1,
	}
}

// Build encodes records as one v2 batch with its lengths, delta encoding, compression and
// CRC filled in. Records keep their OffsetDelta, which must start at 0 or more and
// strictly increase (gaps are allowed, as after compaction); as a convenience, when every
// record has OffsetDelta 0 they are numbered 0, 1, 2, …. At least one record is
// required. Errors wrap ErrInvalid (ErrTooLarge for a batch past 2 GiB).
func Build(opts BuildOptions, records []Record) ([]byte, error) {
	number := len(records) > 1
	for i := range records {
		if records[i].OffsetDelta != 0 {
			number = false
			break
		}
	}
	var b BatchBuilder
	b.Reset(opts)
	for i, r := range records {
		if number {
			r.OffsetDelta = int32(i)
		}
		b.Append(r)
	}
	return b.AppendTo(nil)
}

// BatchBuilder builds batches incrementally and reuses its buffers across Reset, which
// suits the log cleaner writing many batches. It is not safe for concurrent use.
type BatchBuilder struct {
	opts     BuildOptions
	records  []byte // encoded records, uncompressed
	count    int32
	last     int32 // last offset delta appended, -1 if none
	maxDelta int64 // largest timestamp delta
	err      error
}

// NewBatchBuilder returns a builder for a batch with the given options.
func NewBatchBuilder(opts BuildOptions) *BatchBuilder {
	b := new(BatchBuilder)
	b.Reset(opts)
	return b
}

// Reset discards appended records and starts a new batch with opts.
func (b *BatchBuilder) Reset(opts BuildOptions) {
	b.opts = opts
	b.records = b.records[:0]
	b.count = 0
	b.last = -1
	b.maxDelta = 0
	b.err = nil
}

// Len is the number of records appended since the last Reset.
func (b *BatchBuilder) Len() int { return int(b.count) }

// EncodedSize is the size of the records appended so far, before compression and
// without the 61-byte header; the cleaner uses it to bound batch sizes.
func (b *BatchBuilder) EncodedSize() int { return len(b.records) }

// Append adds a record. Its OffsetDelta is used as given and must be greater than the
// previous record's (and not negative); a broken rule is reported by AppendTo. Unlike
// Build, Append never numbers records itself.
func (b *BatchBuilder) Append(r Record) {
	if b.err != nil {
		return
	}
	if r.OffsetDelta <= b.last {
		b.err = fmt.Errorf("%w: record %d has offset delta %d after %d",
			ErrInvalid, b.count, r.OffsetDelta, b.last)
		return
	}
	if b.count == 0 || r.TimestampDelta > b.maxDelta {
		b.maxDelta = r.TimestampDelta
	}
	b.records = appendRecord(b.records, r)
	b.count++
	b.last = r.OffsetDelta
}

// AppendTo appends the finished batch to dst and returns the extended slice. The
// builder keeps its records, so AppendTo may be called again (for example with a
// different dst); call Reset to start over.
func (b *BatchBuilder) AppendTo(dst []byte) ([]byte, error) {
	if b.err != nil {
		return dst, b.err
	}
	if b.count == 0 {
		return dst, fmt.Errorf("%w: a batch needs at least one record", ErrInvalid)
	}
	records, lastDelta := b.records, b.last
	o := &b.opts
	start := len(dst)
	dst = grow(dst, HeaderSize+len(records))
	dst = dst[:start+HeaderSize]
	h := dst[start:]
	attrs := uint16(o.Compression) & AttrCompressionMask
	if o.LogAppendTime {
		attrs |= AttrTimestampType
	}
	if o.Transactional {
		attrs |= AttrTransactional
	}
	if o.Control {
		attrs |= AttrControl
	}
	maxTimestamp := o.BaseTimestamp + b.maxDelta
	if o.LogAppendTime {
		maxTimestamp = o.BaseTimestamp
	}
	binary.BigEndian.PutUint64(h[0:], uint64(o.BaseOffset))
	binary.BigEndian.PutUint32(h[12:], uint32(o.PartitionLeaderEpoch))
	h[MagicOffset] = MagicV2
	binary.BigEndian.PutUint16(h[21:], attrs)
	binary.BigEndian.PutUint32(h[23:], uint32(lastDelta))
	binary.BigEndian.PutUint64(h[27:], uint64(o.BaseTimestamp))
	binary.BigEndian.PutUint64(h[35:], uint64(maxTimestamp))
	binary.BigEndian.PutUint64(h[43:], uint64(o.ProducerID))
	binary.BigEndian.PutUint16(h[51:], uint16(o.ProducerEpoch))
	binary.BigEndian.PutUint32(h[53:], uint32(o.BaseSequence))
	binary.BigEndian.PutUint32(h[57:], uint32(b.count))
	var err error
	if o.Compression == CompressionNone {
		dst = append(dst, records...)
	} else if dst, err = CompressLevel(o.Compression, o.CompressionLevel, dst, records); err != nil {
		return dst[:start], err
	}
	if err := finishBatch(dst[start:]); err != nil {
		return dst[:start], err
	}
	return dst, nil
}

// finishBatch fills in a whole batch's length and CRC-32C from its bytes.
func finishBatch(batch []byte) error {
	length := len(batch) - LogOverhead
	if length > 0x7fffffff {
		return fmt.Errorf("%w: batch of %d bytes", ErrTooLarge, len(batch))
	}
	binary.BigEndian.PutUint32(batch[LengthOffset:], uint32(length))
	binary.BigEndian.PutUint32(batch[CRCOffset:], Checksum(batch))
	return nil
}

// appendRecord encodes r (with its length prefix) onto dst.
func appendRecord(dst []byte, r Record) []byte {
	size := 1 + varint64Len(r.TimestampDelta) + varint32Len(r.OffsetDelta) +
		bytesLen(r.Key) + bytesLen(r.Value) + varint32Len(int32(len(r.Headers)))
	for _, h := range r.Headers {
		size += varint32Len(int32(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}
	dst = appendVarint32(dst, int32(size))
	dst = append(dst, byte(r.Attributes))
	dst = appendVarint64(dst, r.TimestampDelta)
	dst = appendVarint32(dst, r.OffsetDelta)
	dst = appendBytes(dst, r.Key)
	dst = appendBytes(dst, r.Value)
	dst = appendVarint32(dst, int32(len(r.Headers)))
	for _, h := range r.Headers {
		dst = appendVarint32(dst, int32(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendBytes(dst, h.Value)
	}
	return dst
}

func bytesLen(b []byte) int {
	if b == nil {
		return 1
	}
	return varint32Len(int32(len(b))) + len(b)
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return appendVarint32(dst, -1)
	}
	dst = appendVarint32(dst, int32(len(b)))
	return append(dst, b...)
}

func varint64Len(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}
