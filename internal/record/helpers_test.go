package record

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file builds reference batches with franz-go's kmsg encoder and kgo's compressors,
// independently of this package's Build, so tests can cross-check the two.

// sampleRecords returns n records with a mix of null/empty/present keys, values and
// headers, offset deltas 0..n-1.
func sampleRecords(n int) []Record {
	rs := make([]Record, n)
	for i := range rs {
		r := Record{OffsetDelta: int32(i), TimestampDelta: int64(i * 7)}
		switch i % 4 {
		case 0:
			r.Key, r.Value = []byte(fmt.Sprintf("key-%d", i)), bytes.Repeat([]byte("v"), 50+i)
		case 1:
			r.Key, r.Value = nil, []byte(fmt.Sprintf("value %d", i))
		case 2:
			r.Key, r.Value = []byte{}, nil
			r.Headers = []RecordHeader{{Key: "h1", Value: []byte("x")}, {Key: "", Value: nil}}
		case 3:
			r.Key, r.Value = []byte("k"), []byte{}
			r.Headers = []RecordHeader{{Key: "trace", Value: []byte{}}}
		}
		rs[i] = r
	}
	return rs
}

// kmsgRecords encodes records with kmsg.Record.AppendTo.
func kmsgRecords(rs []Record) []byte {
	var out []byte
	for _, r := range rs {
		kr := kmsg.Record{
			Attributes:       r.Attributes,
			TimestampDelta64: r.TimestampDelta,
			OffsetDelta:      r.OffsetDelta,
			Key:              r.Key,
			Value:            r.Value,
		}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		body := kr.AppendTo(nil)[1:] // Length 0 encodes as one byte
		kr.Length = int32(len(body))
		out = kr.AppendTo(out)
	}
	return out
}

// kgoCompress compresses with franz-go's default compressor for codec c.
func kgoCompress(t testing.TB, c Compression, src []byte) []byte {
	t.Helper()
	var codec kgo.CompressionCodec
	switch c {
	case CompressionGzip:
		codec = kgo.GzipCompression()
	case CompressionSnappy:
		codec = kgo.SnappyCompression()
	case CompressionLZ4:
		codec = kgo.Lz4Compression()
	case CompressionZstd:
		codec = kgo.ZstdCompression()
	default:
		return append([]byte(nil), src...)
	}
	comp, err := kgo.DefaultCompressor(codec)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	out, used := comp.Compress(&buf, src)
	if int8(used) != int8(c) {
		t.Fatalf("kgo compressed with codec %d, want %d", used, c)
	}
	return append([]byte(nil), out...)
}

// kmsgBatch builds a batch with kmsg.RecordBatch.AppendTo around already encoded (and
// possibly compressed) records, computing length and CRC itself.
func kmsgBatch(o BuildOptions, numRecords, lastOffsetDelta int32, maxTimestamp int64, payload []byte) []byte {
	attrs := int16(o.Compression)
	if o.LogAppendTime {
		attrs |= AttrTimestampType
	}
	if o.Transactional {
		attrs |= AttrTransactional
	}
	if o.Control {
		attrs |= AttrControl
	}
	rb := kmsg.RecordBatch{
		FirstOffset:          o.BaseOffset,
		PartitionLeaderEpoch: o.PartitionLeaderEpoch,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      lastOffsetDelta,
		FirstTimestamp:       o.BaseTimestamp,
		MaxTimestamp:         maxTimestamp,
		ProducerID:           o.ProducerID,
		ProducerEpoch:        o.ProducerEpoch,
		FirstSequence:        o.BaseSequence,
		NumRecords:           numRecords,
		Records:              payload,
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	crc := crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(b[17:], crc)
	return b
}

// refBatch is a reference batch of rs built entirely by franz-go.
func refBatch(t testing.TB, o BuildOptions, rs []Record) []byte {
	t.Helper()
	var maxTS int64
	for i, r := range rs {
		if i == 0 || r.TimestampDelta > maxTS {
			maxTS = r.TimestampDelta
		}
	}
	payload := kgoCompress(t, o.Compression, kmsgRecords(rs))
	return kmsgBatch(o, int32(len(rs)), rs[len(rs)-1].OffsetDelta, o.BaseTimestamp+maxTS, payload)
}

// fixCRC recomputes the CRC after a test mutated a batch.
func fixCRC(b []byte) []byte {
	binary.BigEndian.PutUint32(b[CRCOffset:], Checksum(b))
	return b
}

func mustBuild(t testing.TB, o BuildOptions, rs []Record) []byte {
	t.Helper()
	b, err := Build(o, rs)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return b
}

func producerOpts(c Compression) BuildOptions {
	o := DefaultBuildOptions()
	o.BaseOffset = 0
	o.Compression = c
	o.ProducerID = 4000
	o.ProducerEpoch = 3
	o.BaseSequence = 17
	o.BaseTimestamp = 1_700_000_000_000
	return o
}

var allCodecs = []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}

// equalRecords compares decoded records, treating nil and empty header lists alike but
// nil and empty keys/values as different (null is not empty).
func equalRecords(t *testing.T, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.OffsetDelta != w.OffsetDelta || g.TimestampDelta != w.TimestampDelta || g.Attributes != w.Attributes {
			t.Fatalf("record %d: got %+v, want %+v", i, g, w)
		}
		if !sameBytes(g.Key, w.Key) || !sameBytes(g.Value, w.Value) {
			t.Fatalf("record %d: key/value got %q/%q (nil %v/%v), want %q/%q (nil %v/%v)", i,
				g.Key, g.Value, g.Key == nil, g.Value == nil, w.Key, w.Value, w.Key == nil, w.Value == nil)
		}
		if len(g.Headers) != len(w.Headers) {
			t.Fatalf("record %d: %d headers, want %d", i, len(g.Headers), len(w.Headers))
		}
		for j := range w.Headers {
			if g.Headers[j].Key != w.Headers[j].Key || !sameBytes(g.Headers[j].Value, w.Headers[j].Value) {
				t.Fatalf("record %d header %d: got %+v, want %+v", i, j, g.Headers[j], w.Headers[j])
			}
		}
	}
}

func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }
