package record

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Record is one record inside a v2 batch. Key and Value are nil for a null key or
// value and empty (non-nil) for a present but empty one. Slices returned by Records and
// Iterator alias the batch (or its decompressed payload) and must not be modified.
//
// Each record on the wire is (varints are zig-zag):
//
//	length          varint  bytes that follow
//	attributes      int8    unused by Kafka, carried as is
//	timestampDelta  varlong relative to the batch's baseTimestamp
//	offsetDelta     varint  relative to the batch's baseOffset
//	keyLength       varint  -1 = null
//	key             bytes
//	valueLength     varint  -1 = null
//	value           bytes
//	headerCount     varint
//	headers         (keyLength varint ≥ 0, key, valueLength varint ≥ -1, value)*
type Record struct {
	OffsetDelta    int32
	TimestampDelta int64
	Key, Value     []byte
	Headers        []RecordHeader
	Attributes     int8
}

// RecordHeader is one record header. A header key is never null; Value may be nil (null).
type RecordHeader struct {
	Key   string
	Value []byte
}

// Reasons one record fails to parse; they are wrapped in ErrInvalid.
var (
	errRecordVarint   = errors.New("malformed varint")
	errRecordLength   = errors.New("record length out of range")
	errRecordTrailing = errors.New("record length does not match its contents")
	errRecordField    = errors.New("field length out of range")
)

// scanRecord parses the record at the start of b and returns how many bytes it spans
// and its offset delta. With rec nil it only checks the structure and allocates
// nothing. With rec non-nil it fills rec; headers are appended to rec.Headers[:0] (header keys are copied into
// strings, everything else aliases b).
func scanRecord(b []byte, rec *Record) (size int, offsetDelta int32, err error) {
	length, n := readVarint32(b)
	if n == 0 {
		return 0, 0, errRecordVarint
	}
	if length < 0 || int(length) > len(b)-n {
		return 0, 0, errRecordLength
	}
	body := b[n : n+int(length)]
	total := n + int(length)

	if len(body) < 1 {
		return 0, 0, errRecordLength
	}
	attrs := int8(body[0])
	p := 1
	tsDelta, m := readVarint64(body[p:])
	if m == 0 {
		return 0, 0, errRecordVarint
	}
	p += m
	offDelta, m := readVarint32(body[p:])
	if m == 0 {
		return 0, 0, errRecordVarint
	}
	p += m
	key, m, err := readBytes(body[p:], true)
	if err != nil {
		return 0, 0, err
	}
	p += m
	value, m, err := readBytes(body[p:], true)
	if err != nil {
		return 0, 0, err
	}
	p += m
	nh, m := readVarint32(body[p:])
	if m == 0 {
		return 0, 0, errRecordVarint
	}
	p += m
	// Each header takes at least two bytes, which bounds nh before anything is allocated.
	if nh < 0 || int(nh) > (len(body)-p)/2 {
		return 0, 0, errRecordField
	}
	if rec != nil {
		rec.Attributes = attrs
		rec.TimestampDelta = tsDelta
		rec.OffsetDelta = offDelta
		rec.Key, rec.Value = key, value
		rec.Headers = rec.Headers[:0]
		if nh > 0 && cap(rec.Headers) < int(nh) {
			rec.Headers = make([]RecordHeader, 0, nh)
		}
	}
	for i := int32(0); i < nh; i++ {
		hk, m, err := readBytes(body[p:], false)
		if err != nil {
			return 0, 0, err
		}
		p += m
		hv, m, err := readBytes(body[p:], true)
		if err != nil {
			return 0, 0, err
		}
		p += m
		if rec != nil {
			rec.Headers = append(rec.Headers, RecordHeader{Key: string(hk), Value: hv})
		}
	}
	if p != len(body) {
		return 0, 0, errRecordTrailing
	}
	return total, offDelta, nil
}

// readBytes reads a varint length followed by that many bytes. -1 means null when
// nullable is set.
func readBytes(b []byte, nullable bool) ([]byte, int, error) {
	l, n := readVarint32(b)
	if n == 0 {
		return nil, 0, errRecordVarint
	}
	if l == -1 && nullable {
		return nil, n, nil
	}
	if l < 0 || int(l) > len(b)-n {
		return nil, 0, errRecordField
	}
	return b[n : n+int(l) : n+int(l)], n + int(l), nil
}

// Iterator walks the records of one batch. It is not safe for concurrent use; create
// one per goroutine.
//
//	it, err := record.NewIterator(batch)
//	var r record.Record
//	for it.Next(&r) { ... }
//	if err := it.Err(); err != nil { ... }
type Iterator struct {
	header  Header
	payload []byte // uncompressed records
	pos     int
	index   int32
	last    int32 // offset delta of the previous record, -1 before the first
	err     error
}

// NewIterator checks the batch's framing and CRC, decompresses its records if needed and
// returns an iterator over them. The batch must be exactly one whole batch.
func NewIterator(b []byte) (*Iterator, error) {
	h, err := checkFrame(b)
	if err != nil {
		return nil, err
	}
	if h.NumRecords < 0 {
		return nil, fmt.Errorf("%w: negative record count %d", ErrInvalid, h.NumRecords)
	}
	payload := b[HeaderSize:]
	if c := h.Compression(); c != CompressionNone {
		payload, err = Decompress(c, payload)
		if err != nil {
			return nil, err
		}
	}
	return &Iterator{header: h, payload: payload, last: -1}, nil
}

// Header is the batch's decoded header.
func (it *Iterator) Header() Header { return it.header }

// Next decodes the next record into r and reports whether there was one. r's Headers
// slice is reused; r's byte slices alias the batch. After Next returns false, Err says
// whether the batch ended cleanly.
func (it *Iterator) Next(r *Record) bool {
	if it.err != nil {
		return false
	}
	if it.index == it.header.NumRecords {
		if it.pos != len(it.payload) {
			it.err = fmt.Errorf("%w: %d bytes after the last of %d records", ErrInvalid,
				len(it.payload)-it.pos, it.header.NumRecords)
		}
		return false
	}
	n, _, err := scanRecord(it.payload[it.pos:], r)
	if err != nil {
		it.err = fmt.Errorf("%w: record %d: %w", ErrInvalid, it.index, err)
		return false
	}
	if r.OffsetDelta <= it.last || r.OffsetDelta > it.header.LastOffsetDelta {
		it.err = fmt.Errorf("%w: record %d has offset delta %d (previous %d, last %d)",
			ErrInvalid, it.index, r.OffsetDelta, it.last, it.header.LastOffsetDelta)
		return false
	}
	it.last = r.OffsetDelta
	it.pos += n
	it.index++
	return true
}

// Err is the error that stopped iteration, or nil if every record was read.
func (it *Iterator) Err() error { return it.err }

// Records decodes every record of one whole batch, decompressing it if needed. It checks
// the CRC (ErrCorrupt) and the record structure (ErrInvalid): the records must fill the
// payload exactly, match the header's record count and have strictly increasing offset
// deltas no greater than lastOffsetDelta. Gaps are allowed, as compaction leaves them.
func Records(b []byte) (Header, []Record, error) {
	it, err := NewIterator(b)
	if err != nil {
		h, _ := ParseHeader(b)
		return h, nil, err
	}
	// Each record takes at least 7 bytes, which bounds the allocation for a lying count.
	n := int(it.header.NumRecords)
	if max := len(it.payload) / 7; n > max {
		n = max
	}
	records := make([]Record, 0, n)
	for {
		var r Record
		if !it.Next(&r) {
			break
		}
		if len(r.Headers) == 0 {
			r.Headers = nil
		}
		records = append(records, r)
	}
	if err := it.Err(); err != nil {
		return it.header, nil, err
	}
	return it.header, records, nil
}

// checkFrame parses the header of one whole batch and checks magic, length and CRC.
func checkFrame(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		if errors.Is(err, ErrTooShort) {
			return h, fmt.Errorf("%w: %w: %d bytes", ErrCorrupt, ErrTooShort, len(b))
		}
		return h, err
	}
	if int64(h.Length)+LogOverhead != int64(len(b)) {
		return h, fmt.Errorf("%w: batchLength %d does not match %d bytes", ErrCorrupt, h.Length, len(b))
	}
	if crc := Checksum(b); crc != h.CRC {
		return h, fmt.Errorf("%w: crc %08x, computed %08x", ErrCorrupt, h.CRC, crc)
	}
	return h, nil
}

// ControlType is the type of a control record (Kafka's ControlRecordType).
type ControlType int16

const (
	ControlAbort  ControlType = 0 // transaction aborted
	ControlCommit ControlType = 1 // transaction committed
)

func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "abort"
	case ControlCommit:
		return "commit"
	}
	return fmt.Sprintf("control(%d)", int16(t))
}

// ControlRecord is a decoded control record. For commit and abort markers the value is
// an end-transaction marker carrying the coordinator epoch.
//
//	key:   version int16 (0), type int16
//	value: version int16 (0), coordinatorEpoch int32   (commit and abort only)
type ControlRecord struct {
	Version          int16
	Type             ControlType
	CoordinatorEpoch int32
}

// ParseControlRecord decodes the key and value of a record in a control batch. Newer key
// or value versions are accepted (their known prefix is read), as Kafka does. Control
// types other than commit and abort are returned with CoordinatorEpoch zero and their
// value unread.
func ParseControlRecord(key, value []byte) (ControlRecord, error) {
	var c ControlRecord
	if len(key) < 4 {
		return c, fmt.Errorf("%w: control record key of %d bytes", ErrInvalid, len(key))
	}
	c.Version = int16(binary.BigEndian.Uint16(key))
	if c.Version < 0 {
		return c, fmt.Errorf("%w: control record key version %d", ErrInvalid, c.Version)
	}
	c.Type = ControlType(binary.BigEndian.Uint16(key[2:]))
	if c.Type != ControlAbort && c.Type != ControlCommit {
		return c, nil
	}
	if len(value) < 6 {
		return c, fmt.Errorf("%w: end transaction marker of %d bytes", ErrInvalid, len(value))
	}
	if v := int16(binary.BigEndian.Uint16(value)); v < 0 {
		return c, fmt.Errorf("%w: end transaction marker version %d", ErrInvalid, v)
	}
	c.CoordinatorEpoch = int32(binary.BigEndian.Uint32(value[2:]))
	return c, nil
}

// Record returns the control record as a Record (key and, for commit and abort, the
// end-transaction marker value, both at version 0) ready for Build with
// BuildOptions.Control set.
func (c ControlRecord) Record() Record {
	key := make([]byte, 4)
	binary.BigEndian.PutUint16(key[2:], uint16(c.Type))
	if c.Type != ControlAbort && c.Type != ControlCommit {
		return Record{Key: key}
	}
	value := make([]byte, 6)
	binary.BigEndian.PutUint32(value[2:], uint32(c.CoordinatorEpoch))
	return Record{Key: key, Value: value}
}
