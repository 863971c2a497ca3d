package record

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func fuzzSeeds(f *testing.F) {
	for _, c := range allCodecs {
		f.Add(mustBuild(f, producerOpts(c), sampleRecords(5)))
	}
	plain := make([]Record, 5) // as producers write them: no headers
	for i := range plain {
		plain[i] = Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Value: []byte("value")}
	}
	f.Add(mustBuild(f, producerOpts(CompressionNone), plain))
	o := producerOpts(CompressionNone)
	o.Control, o.Transactional = true, true
	f.Add(mustBuild(f, o, []Record{ControlRecord{Type: ControlCommit, CoordinatorEpoch: 3}.Record()}))
	f.Add(kmsgBatch(producerOpts(CompressionSnappy), 5, 4, 0, xerialFrame(kmsgRecords(sampleRecords(5)), 64)))
	f.Add(kmsgBatch(producerOpts(CompressionNone), 1, 0, 0, []byte{16, 0, 0, 0, 1, 1, 2, 1, 0}))
	f.Add([]byte{})
	f.Add(make([]byte, HeaderSize))
}

// withFrame returns a copy of b with batchLength and CRC made consistent, so the
// fuzzer reaches the record parsing behind them.
func withFrame(b []byte) []byte {
	if len(b) < HeaderSize {
		return b
	}
	b = bytes.Clone(b)
	binary.BigEndian.PutUint32(b[LengthOffset:], uint32(len(b)-LogOverhead))
	b[MagicOffset] = MagicV2
	return fixCRC(b)
}

func FuzzValidate(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = Validate(b, ValidateOptions{MaxBatchBytes: 1 << 20})
		_, _ = Split(b)
		_, _ = NextBatchSize(b)

		framed := withFrame(b)
		h, err := Validate(framed, ValidateOptions{})
		if err != nil {
			return
		}
		if h.Size() != len(framed) || h.NumRecords != h.LastOffsetDelta+1 {
			t.Fatalf("Validate accepted an inconsistent header %+v for %d bytes", h, len(framed))
		}
		// A valid batch, compressed or not, must decode to exactly its records.
		_, rs, err := Records(framed)
		if err != nil {
			t.Fatalf("Validate accepted a batch Records rejects: %v", err)
		}
		if len(rs) != int(h.NumRecords) {
			t.Fatalf("%d records, header says %d", len(rs), h.NumRecords)
		}
		for i, r := range rs {
			if r.OffsetDelta != int32(i) {
				t.Fatalf("record %d has offset delta %d", i, r.OffsetDelta)
			}
		}
	})
}

// FuzzZstdStatedSizes: zstd input decodes to the same bytes whether or not its
// frames' stated sizes are first removed (stripZstdContentSizes).
func FuzzZstdStatedSizes(f *testing.F) {
	for _, n := range []int{1, 100, 5000} {
		f.Add(mustCompress(f, CompressionZstd, bytes.Repeat([]byte("some text, "), n)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want, err := decompress(CompressionZstd, b, 1<<20)
		if err != nil {
			return
		}
		stripped, _, _, err := stripZstdContentSizes(b)
		if err != nil {
			t.Fatalf("decoded, but its frames do not walk: %v", err)
		}
		if got, err := decompress(CompressionZstd, stripped, 1<<20); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("without stated sizes: %v, equal %v", err, bytes.Equal(got, want))
		}
	})
}

func FuzzRecords(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = Records(b)
		framed := withFrame(b)
		h, rs, err := Records(framed)
		// Timestamps walks what Records decodes: the same deltas and timestamps, and
		// an error for a batch Records refuses (unless both fail or Records holds one
		// only a whole decompression bound refuses).
		var walked []Record
		werr := Timestamps(framed, func(d int32, ts int64) bool {
			walked = append(walked, Record{OffsetDelta: d, TimestampDelta: ts - h.BaseTimestamp})
			return true
		})
		if err == nil && werr != nil {
			t.Fatalf("Records decodes %d records, Timestamps fails: %v", len(rs), werr)
		}
		if err == nil {
			if len(walked) != len(rs) {
				t.Fatalf("Timestamps walked %d records, Records %d", len(walked), len(rs))
			}
			for i := range rs {
				if walked[i].OffsetDelta != rs[i].OffsetDelta || walked[i].TimestampDelta != rs[i].TimestampDelta {
					t.Fatalf("record %d: Timestamps %+v, Records %+v", i, walked[i], rs[i])
				}
			}
		}
		if err != nil || len(rs) == 0 {
			return
		}
		// Whatever decodes must rebuild into a batch that decodes to the same records.
		c := h.Compression()
		if c > CompressionZstd {
			t.Fatalf("Records accepted codec %d", c)
		}
		o := BuildOptions{BaseOffset: h.BaseOffset, Compression: c, ProducerID: h.ProducerID,
			ProducerEpoch: h.ProducerEpoch, BaseSequence: h.BaseSequence, BaseTimestamp: h.BaseTimestamp}
		rebuilt, err := Build(o, rs)
		if err != nil {
			t.Fatalf("rebuilding %d decoded records: %v", len(rs), err)
		}
		_, again, err := Records(rebuilt)
		if err != nil {
			t.Fatalf("decoding rebuilt batch: %v", err)
		}
		if len(again) != len(rs) {
			t.Fatalf("rebuilt batch has %d records, want %d", len(again), len(rs))
		}
		for i := range rs {
			a, b := again[i], rs[i]
			if a.OffsetDelta != b.OffsetDelta || a.TimestampDelta != b.TimestampDelta ||
				!sameBytes(a.Key, b.Key) || !sameBytes(a.Value, b.Value) || len(a.Headers) != len(b.Headers) {
				t.Fatalf("record %d changed in a rebuild: %+v vs %+v", i, a, b)
			}
		}
	})
}
