package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Record batch v2 layout (all integers big-endian). This is Kafka's on-disk and
// on-wire format; Samsa stores batches byte for byte as producers send them.
//
//	offset  size  field
//	0       8     baseOffset
//	8       4     batchLength (bytes after this field)
//	12      4     partitionLeaderEpoch
//	16      1     magic (2)
//	17      4     crc (CRC-32C of bytes 21..end)
//	21      2     attributes
//	23      4     lastOffsetDelta
//	27      8     baseTimestamp
//	35      8     maxTimestamp
//	43      8     producerId
//	51      2     producerEpoch
//	53      4     baseSequence
//	57      4     recordCount
//	61      ...   records (possibly compressed)
const (
	HeaderSize       = 61 // bytes of a v2 batch header
	LengthOffset     = 8  // position of batchLength
	LogOverhead      = 12 // baseOffset + batchLength: bytes not counted by batchLength
	MagicOffset      = 16
	CRCOffset        = 17
	AttributesOffset = 21
	MagicV2          = 2
)

// Attribute bits.
const (
	AttrCompressionMask = 0x07
	AttrTimestampType   = 0x08 // 1 = LogAppendTime
	AttrTransactional   = 0x10
	AttrControl         = 0x20
	AttrDeleteHorizon   = 0x40
)

// Compression is the codec in the low three attribute bits.
type Compression int8

const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLZ4    Compression = 3
	CompressionZstd   Compression = 4
)

func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionGzip:
		return "gzip"
	case CompressionSnappy:
		return "snappy"
	case CompressionLZ4:
		return "lz4"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("compression(%d)", int8(c))
}

// ParseCompression returns the codec of a Kafka codec name (none, gzip, snappy, lz4,
// zstd); ok is false for any other name ("producer" included).
func ParseCompression(name string) (Compression, bool) {
	for c := CompressionNone; c <= CompressionZstd; c++ {
		if c.String() == name {
			return c, true
		}
	}
	return CompressionNone, false
}

// Errors. ErrCorrupt marks bytes that fail a checksum or cannot be parsed as a batch
// (Kafka's CORRUPT_MESSAGE); ErrInvalid marks a well-formed batch whose contents break
// a rule (INVALID_RECORD); ErrUnsupportedMagic marks magic 0 or 1.
var (
	ErrCorrupt          = errors.New("record: corrupt batch")
	ErrInvalid          = errors.New("record: invalid batch")
	ErrUnsupportedMagic = errors.New("record: unsupported magic (only v2 batches are accepted)")
	ErrTooShort         = errors.New("record: truncated batch")
)

// Header is the decoded fixed part of a v2 batch.
type Header struct {
	BaseOffset           int64
	Length               int32 // batchLength: total size is Length + LogOverhead
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Size is the number of bytes the whole batch occupies.
func (h *Header) Size() int { return int(h.Length) + LogOverhead }

// LastOffset is the offset of the last record in the batch.
func (h *Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// LastSequence is the sequence number of the last record (wrapping as Kafka does).
func (h *Header) LastSequence() int32 {
	if h.BaseSequence < 0 {
		return -1
	}
	s := int64(h.BaseSequence) + int64(h.LastOffsetDelta)
	if s > 0x7fffffff {
		s -= 0x80000000
	}
	return int32(s)
}

func (h *Header) Compression() Compression {
	return Compression(h.Attributes & AttrCompressionMask)
}
func (h *Header) IsTransactional() bool { return h.Attributes&AttrTransactional != 0 }
func (h *Header) IsControl() bool       { return h.Attributes&AttrControl != 0 }
func (h *Header) LogAppendTime() bool   { return h.Attributes&AttrTimestampType != 0 }
func (h *Header) HasProducerID() bool   { return h.ProducerID >= 0 }

// ParseHeader decodes the fixed header at the start of b. It checks only that enough
// bytes are present for the header and the magic byte; Validate checks the rest.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < MagicOffset+1 {
		return h, ErrTooShort
	}
	h.BaseOffset = int64(binary.BigEndian.Uint64(b[0:]))
	h.Length = int32(binary.BigEndian.Uint32(b[8:]))
	h.PartitionLeaderEpoch = int32(binary.BigEndian.Uint32(b[12:]))
	h.Magic = int8(b[16])
	if h.Magic != MagicV2 {
		return h, ErrUnsupportedMagic
	}
	if len(b) < HeaderSize {
		return h, ErrTooShort
	}
	h.CRC = binary.BigEndian.Uint32(b[17:])
	h.Attributes = int16(binary.BigEndian.Uint16(b[21:]))
	h.LastOffsetDelta = int32(binary.BigEndian.Uint32(b[23:]))
	h.BaseTimestamp = int64(binary.BigEndian.Uint64(b[27:]))
	h.MaxTimestamp = int64(binary.BigEndian.Uint64(b[35:]))
	h.ProducerID = int64(binary.BigEndian.Uint64(b[43:]))
	h.ProducerEpoch = int16(binary.BigEndian.Uint16(b[51:]))
	h.BaseSequence = int32(binary.BigEndian.Uint32(b[53:]))
	h.NumRecords = int32(binary.BigEndian.Uint32(b[57:]))
	return h, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ChecksumOK reports whether the CRC-32C stored in a whole batch matches its bytes.
func ChecksumOK(b []byte) bool {
	if len(b) < HeaderSize {
		return false
	}
	return crc32.Checksum(b[AttributesOffset:], castagnoli) == binary.BigEndian.Uint32(b[CRCOffset:])
}

// Checksum computes the CRC-32C of a whole batch as it should be stored.
func Checksum(b []byte) uint32 { return crc32.Checksum(b[AttributesOffset:], castagnoli) }

// SetBaseOffset stamps the base offset; it is not covered by the CRC.
func SetBaseOffset(b []byte, off int64) { binary.BigEndian.PutUint64(b[0:], uint64(off)) }

// SetPartitionLeaderEpoch stamps the leader epoch; it is not covered by the CRC.
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[12:], uint32(epoch))
}

// SetLogAppendTime marks the batch as LogAppendTime with the given max timestamp and
// rewrites the CRC, as Kafka does when message.timestamp.type=LogAppendTime.
func SetLogAppendTime(b []byte, ts int64) {
	attrs := binary.BigEndian.Uint16(b[21:]) | AttrTimestampType
	binary.BigEndian.PutUint16(b[21:], attrs)
	binary.BigEndian.PutUint64(b[35:], uint64(ts))
	binary.BigEndian.PutUint32(b[CRCOffset:], Checksum(b))
}
