package record

import (
	"bytes"
	"fmt"
	"testing"
)

// TestRecompress: a batch re-encoded with every codec from every codec keeps its
// header fields but the codec, length and CRC, passes Validate, and holds the same
// records byte for byte.
func TestRecompress(t *testing.T) {
	var recs []Record
	for i := range 300 {
		r := Record{TimestampDelta: int64(i * 3), Value: bytes.Repeat([]byte{byte('a' + i%26)}, 50+i)}
		if i%3 == 0 {
			r.Key = fmt.Appendf(nil, "key-%d", i)
		}
		if i%7 == 0 {
			r.Headers = []RecordHeader{{Key: "h", Value: []byte("v")}}
		}
		recs = append(recs, r)
	}
	codecs := []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}
	for _, from := range codecs {
		opts := DefaultBuildOptions()
		opts.Compression = from
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = 42, 3, 1000, true
		opts.BaseTimestamp = 1_700_000_000_000
		in, err := Build(opts, recs)
		if err != nil {
			t.Fatal(err)
		}
		hin, _ := ParseHeader(in)
		_, want, err := Records(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, to := range codecs {
			t.Run(fmt.Sprintf("%s-to-%s", from, to), func(t *testing.T) {
				out, err := Recompress([]byte("prefix"), in, to, 0)
				if err != nil {
					t.Fatal(err)
				}
				if string(out[:6]) != "prefix" {
					t.Fatalf("dst's bytes overwritten: %q", out[:6])
				}
				out = out[6:]
				hout, err := Validate(out, ValidateOptions{})
				if err != nil {
					t.Fatalf("Validate of the recompressed batch: %v", err)
				}
				if hout.Compression() != to {
					t.Fatalf("codec %s, want %s", hout.Compression(), to)
				}
				hin2, hout2 := hin, hout
				hin2.Attributes, hout2.Attributes = hin2.Attributes&^AttrCompressionMask, hout2.Attributes&^AttrCompressionMask
				hin2.Length, hout2.Length, hin2.CRC, hout2.CRC = 0, 0, 0, 0
				if hin2 != hout2 {
					t.Fatalf("header changed beyond codec, length and CRC:\n in %+v\nout %+v", hin2, hout2)
				}
				_, got, err := Records(out)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) {
					t.Fatalf("%d records, want %d", len(got), len(want))
				}
				for i := range want {
					if !bytes.Equal(appendRecord(nil, got[i]), appendRecord(nil, want[i])) {
						t.Fatalf("record %d differs: %+v, want %+v", i, got[i], want[i])
					}
				}
			})
		}
	}
}

// BenchmarkRecompress re-encodes a batch of 1,000 records of 100 bytes for a topic's
// codec, with Recompress and, for comparison, the way the broker did it before
// (decoding a Record per record with Records, then Build).
func BenchmarkRecompress(b *testing.B) {
	var recs []Record
	for i := range 1000 {
		recs = append(recs, Record{Value: bytes.Repeat([]byte{byte('a' + i%26)}, 100)})
	}
	for _, pair := range [][2]Compression{{CompressionNone, CompressionZstd}, {CompressionLZ4, CompressionZstd}, {CompressionSnappy, CompressionGzip}} {
		opts := DefaultBuildOptions()
		opts.Compression = pair[0]
		in, err := Build(opts, recs)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("%s-to-%s/recompress", pair[0], pair[1]), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Recompress(nil, in, pair[1], 0); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("%s-to-%s/decode-and-build", pair[0], pair[1]), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, decoded, err := Records(in)
				if err != nil {
					b.Fatal(err)
				}
				out := DefaultBuildOptions()
				out.Compression = pair[1]
				if _, err := Build(out, decoded); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
