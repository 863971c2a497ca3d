package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
)

func TestRecordsXerialSnappyBatch(t *testing.T) {
	rs := sampleRecords(30)
	o := producerOpts(CompressionSnappy)
	b := kmsgBatch(o, 30, 29, o.BaseTimestamp, xerialFrame(kmsgRecords(rs), 256))
	if _, err := Validate(b, ValidateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, got, err := Records(b)
	if err != nil {
		t.Fatal(err)
	}
	equalRecords(t, got, rs)
}

func TestRecordsErrors(t *testing.T) {
	good := mustBuild(t, producerOpts(CompressionNone), sampleRecords(4))
	o := producerOpts(CompressionGzip)
	tests := []struct {
		name  string
		batch []byte
		want  error
	}{
		{"bad crc", func() []byte { b := bytes.Clone(good); b[HeaderSize] ^= 1; return b }(), ErrCorrupt},
		{"truncated", good[:len(good)-2], ErrCorrupt},
		{"magic 1", func() []byte { b := bytes.Clone(good); b[MagicOffset] = 1; return b }(), ErrUnsupportedMagic},
		{"compressed garbage", kmsgBatch(o, 1, 0, 0, []byte("not gzip")), ErrCorrupt},
		{"more records than count", kmsgBatch(producerOpts(CompressionNone), 3, 3, 0, kmsgRecords(sampleRecords(4))), ErrInvalid},
		{"fewer records than count", kmsgBatch(producerOpts(CompressionNone), 5, 4, 0, kmsgRecords(sampleRecords(4))), ErrInvalid},
		{"delta beyond lastOffsetDelta", kmsgBatch(producerOpts(CompressionNone), 4, 2, 0, kmsgRecords(sampleRecords(4))), ErrInvalid},
		{"negative count", kmsgBatch(producerOpts(CompressionNone), -1, 0, 0, nil), ErrInvalid},
		{"unknown codec", kmsgBatch(BuildOptions{Compression: 6}, 1, 0, 0, []byte{1, 2, 3}), ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, rs, err := Records(tt.batch); !errors.Is(err, tt.want) || rs != nil {
				t.Fatalf("Records = %d records, %v; want %v", len(rs), err, tt.want)
			}
		})
	}
}

func TestRecordsEmptyCompactedBatch(t *testing.T) {
	// The log cleaner keeps empty batches to preserve producer state: count 0 with a
	// lastOffsetDelta. Records reads them; Validate (client path) refuses them.
	b := kmsgBatch(producerOpts(CompressionNone), 0, 4, 0, nil)
	h, rs, err := Records(b)
	if err != nil || len(rs) != 0 || h.LastOffsetDelta != 4 {
		t.Fatalf("Records = %+v, %d records, %v", h, len(rs), err)
	}
	if _, err := Validate(b, ValidateOptions{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Validate error = %v, want ErrInvalid", err)
	}
}

func TestIterator(t *testing.T) {
	rs := sampleRecords(10)
	it, err := NewIterator(mustBuild(t, producerOpts(CompressionLZ4), rs))
	if err != nil {
		t.Fatal(err)
	}
	var got []Record
	var r Record
	for it.Next(&r) {
		c := r
		c.Headers = append([]RecordHeader(nil), r.Headers...)
		got = append(got, c)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if it.Next(&r) {
		t.Fatal("Next returned true after the end")
	}
	equalRecords(t, got, rs)
	if it.Header().NumRecords != 10 {
		t.Fatalf("header %+v", it.Header())
	}
}

func TestControlRecords(t *testing.T) {
	for _, typ := range []ControlType{ControlAbort, ControlCommit} {
		t.Run(typ.String(), func(t *testing.T) {
			o := producerOpts(CompressionNone)
			o.Control, o.Transactional = true, true
			b := mustBuild(t, o, []Record{ControlRecord{Type: typ, CoordinatorEpoch: 77}.Record()})
			h, rs, err := Records(b)
			if err != nil {
				t.Fatal(err)
			}
			if !h.IsControl() || len(rs) != 1 {
				t.Fatalf("header %+v, %d records", h, len(rs))
			}
			c, err := ParseControlRecord(rs[0].Key, rs[0].Value)
			if err != nil {
				t.Fatal(err)
			}
			if c != (ControlRecord{Type: typ, CoordinatorEpoch: 77}) {
				t.Fatalf("control record %+v", c)
			}
		})
	}

	key := func(v, typ int16) []byte {
		return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, uint16(v)), uint16(typ))
	}
	value := func(v int16, epoch int32, extra ...byte) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(v))
		return append(binary.BigEndian.AppendUint32(b, uint32(epoch)), extra...)
	}
	tests := []struct {
		name       string
		key, value []byte
		want       ControlRecord
		wantErr    bool
	}{
		{"commit", key(0, 1), value(0, 5), ControlRecord{Type: ControlCommit, CoordinatorEpoch: 5}, false},
		{"abort", key(0, 0), value(0, -1), ControlRecord{Type: ControlAbort, CoordinatorEpoch: -1}, false},
		{"newer versions with extra bytes", append(key(1, 1), 9, 9), value(1, 6, 1, 2, 3), ControlRecord{Version: 1, Type: ControlCommit, CoordinatorEpoch: 6}, false},
		{"other control type ignores value", key(0, 2), nil, ControlRecord{Type: 2}, false},
		{"short key", []byte{0, 0, 1}, value(0, 5), ControlRecord{}, true},
		{"null key", nil, value(0, 5), ControlRecord{}, true},
		{"negative key version", key(-1, 1), value(0, 5), ControlRecord{}, true},
		{"short marker", key(0, 1), []byte{0, 0, 0, 0, 1}, ControlRecord{}, true},
		{"negative marker version", key(0, 0), value(-2, 5), ControlRecord{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseControlRecord(tt.key, tt.value)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("error = %v, want ErrInvalid", err)
				}
				return
			}
			if err != nil || c != tt.want {
				t.Fatalf("ParseControlRecord = %+v, %v; want %+v", c, err, tt.want)
			}
		})
	}
}

// TestTimestampsMatchesIterator: Timestamps yields the offset deltas and timestamps
// Iterator decodes, for each codec, with the gaps compaction leaves, stops when told,
// and refuses offset deltas that do not increase.
func TestTimestampsMatchesIterator(t *testing.T) {
	recs := []Record{
		{OffsetDelta: 0, TimestampDelta: 3, Value: []byte("a")},
		{OffsetDelta: 2, TimestampDelta: 1, Value: bytes.Repeat([]byte("b"), 300<<10)},
		{OffsetDelta: 7, TimestampDelta: 9, Key: []byte("k")},
	}
	for _, c := range []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
		o := producerOpts(c)
		b := mustBuild(t, o, recs)
		var got []int64
		if err := Timestamps(b, func(d int32, ts int64) bool {
			got = append(got, int64(d), ts)
			return true
		}); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		var want []int64
		it, err := NewIterator(b)
		if err != nil {
			t.Fatal(err)
		}
		var r Record
		for it.Next(&r) {
			want = append(want, int64(r.OffsetDelta), o.BaseTimestamp+r.TimestampDelta)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: Timestamps %v, Iterator %v", c, got, want)
		}
		calls := 0
		if err := Timestamps(b, func(int32, int64) bool { calls++; return false }); err != nil || calls != 1 {
			t.Errorf("%s: stopped at the first record: %d calls, %v", c, calls, err)
		}
	}
	bad := mustBuild(t, producerOpts(CompressionNone), recs)
	// Make the third record's offset delta 2, as the second's (zig-zag 4, one byte).
	third := bytes.LastIndex(bad, []byte{0x0e, 0x02, 'k'}) // delta 7, key length 1, 'k'
	if third < 0 {
		t.Fatal("third record not found")
	}
	bad[third] = 0x04
	bad = fixCRC(bad)
	if err := Timestamps(bad, func(int32, int64) bool { return true }); !errors.Is(err, ErrInvalid) {
		t.Errorf("offset deltas 0, 2, 2: %v, want ErrInvalid", err)
	}
}
