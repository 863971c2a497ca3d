package record

import (
	"errors"
	"math"
	"testing"
)

var compressedCodecs = []Compression{CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}

// TestValidateCompressedWalksRecords: Validate decompresses a client's compressed batch
// and walks its records. A batch whose header matches its records passes for every
// codec; one whose header states more records than it holds (up to 2^31-1, which would
// advance the log end by 2^31 offsets), fewer, or whose offset deltas skip, is
// ErrInvalid; one that does not decompress is ErrCorrupt. As a replica batch, only the
// header is checked.
func TestValidateCompressedWalksRecords(t *testing.T) {
	recs := sampleRecords(3)
	plain := kmsgRecords(recs)
	skipped := sampleRecords(3)
	skipped[2].OffsetDelta = 5
	for _, c := range compressedCodecs {
		t.Run(c.String(), func(t *testing.T) {
			o := producerOpts(c)
			payload, err := Compress(c, nil, plain)
			if err != nil {
				t.Fatal(err)
			}
			good := kmsgBatch(o, 3, 2, o.BaseTimestamp, payload)
			if _, err := Validate(good, ValidateOptions{}); err != nil {
				t.Fatalf("well-formed batch: %v", err)
			}
			if _, err := Validate(mustBuild(t, o, sampleRecords(500)), ValidateOptions{}); err != nil {
				t.Fatalf("built batch of 500 records: %v", err)
			}
			for _, tc := range []struct {
				name  string
				count int32
				body  []byte
			}{
				{"claims 2^31-1", math.MaxInt32, payload},
				{"claims 4", 4, payload},
				{"claims 2", 2, payload},
				{"skipped delta", 3, mustCompress(t, c, kmsgRecords(skipped))},
				{"trailing bytes", 3, mustCompress(t, c, append(kmsgRecords(recs), 0, 0))},
			} {
				b := kmsgBatch(o, tc.count, tc.count-1, o.BaseTimestamp, tc.body)
				if _, err := Validate(b, ValidateOptions{}); !errors.Is(err, ErrInvalid) {
					t.Errorf("%s: Validate = %v, want ErrInvalid", tc.name, err)
				}
				if _, err := Validate(b, ValidateOptions{Replica: true}); err != nil {
					t.Errorf("%s as a replica batch: %v", tc.name, err)
				}
			}
			garbage := kmsgBatch(o, 3, 2, o.BaseTimestamp, []byte("not compressed at all, not at all"))
			if _, err := Validate(garbage, ValidateOptions{}); !errors.Is(err, ErrCorrupt) {
				t.Errorf("undecodable payload: Validate = %v, want ErrCorrupt", err)
			}
		})
	}
}

// TestValidateCompressedNoSteadyAllocs: validating compressed batches of a size seen
// before reuses the pooled decompression buffer and the pooled codec readers: no
// allocation, for every codec.
func TestValidateCompressedNoSteadyAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	for _, c := range compressedCodecs {
		b := mustBuild(t, producerOpts(c), sampleRecords(1000))
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := Validate(b, ValidateOptions{}); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 0 {
			t.Errorf("%s: %.1f allocations per Validate, want 0", c, allocs)
		}
	}
}

func mustCompress(t testing.TB, c Compression, src []byte) []byte {
	t.Helper()
	out, err := Compress(c, nil, src)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestValidateSnappyStatedLength: Validate refuses a batch whose snappy block states
// 200 MiB of output from 9 bytes as ErrCorrupt, without allocating anything near it
// (a fresh 128 KiB walk buffer at most, when the pool was emptied by a GC).
func TestValidateSnappyStatedLength(t *testing.T) {
	for name, src := range hugeSnappyBlocks() {
		o := producerOpts(CompressionSnappy)
		b := kmsgBatch(o, 1, 0, o.BaseTimestamp, src)
		var err error
		n := allocatedBy(func() { _, err = Validate(b, ValidateOptions{}) })
		if !errors.Is(err, ErrCorrupt) || n > 1<<20 {
			t.Errorf("%s: Validate = %v after allocating %d bytes, want ErrCorrupt and under 1 MiB", name, err, n)
		}
	}
}
