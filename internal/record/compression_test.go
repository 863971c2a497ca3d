package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

func testPayloads() map[string][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 100_000)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	var text bytes.Buffer
	for i := 0; text.Len() < 300_000; i++ {
		fmt.Fprintf(&text, "record %d: the quick brown fox jumps over the lazy dog\n", i)
	}
	return map[string][]byte{
		"empty":  {},
		"byte":   {42},
		"random": random,
		"text":   text.Bytes(),
	}
}

func TestCompressRoundTrip(t *testing.T) {
	for _, c := range allCodecs {
		for name, src := range testPayloads() {
			t.Run(c.String()+"/"+name, func(t *testing.T) {
				prefix := []byte("prefix")
				out, err := Compress(c, append([]byte(nil), prefix...), src)
				if err != nil {
					t.Fatalf("Compress: %v", err)
				}
				if !bytes.HasPrefix(out, prefix) {
					t.Fatalf("Compress did not append to dst")
				}
				got, err := Decompress(c, out[len(prefix):])
				if err != nil {
					t.Fatalf("Decompress: %v", err)
				}
				if !bytes.Equal(got, src) {
					t.Fatalf("round trip changed %d bytes into %d", len(src), len(got))
				}
			})
		}
	}
}

// TestCompressLevels: every level Kafka allows round-trips, out-of-range levels fall
// back to the default, and a high level compresses text smaller than a low one, so the
// level is really applied.
func TestCompressLevels(t *testing.T) {
	src := testutil.Words(1, 256<<10)
	size := func(c Compression, level int) int {
		t.Helper()
		out, err := CompressLevel(c, level, nil, src)
		if err != nil {
			t.Fatalf("%v level %d: %v", c, level, err)
		}
		got, err := Decompress(c, out)
		if err != nil || !bytes.Equal(got, src) {
			t.Fatalf("%v level %d: round trip failed: %v", c, level, err)
		}
		return len(out)
	}
	for _, tc := range []struct {
		c                 Compression
		levels            []int
		low, high, defalt int
	}{
		{CompressionGzip, []int{-1, 0, 1, 5, 9, 10}, 1, 9, -1},
		{CompressionLZ4, []int{0, 1, 8, 9, 10, 17}, 9, 17, 9},
		{CompressionZstd, []int{-131072, -1, 0, 1, 3, 6, 10, 22}, 1, 19, 3},
	} {
		for _, level := range tc.levels {
			size(tc.c, level)
		}
		if low, high := size(tc.c, tc.low), size(tc.c, tc.high); high >= low {
			t.Errorf("%v: level %d gives %d bytes, level %d %d: the level has no effect", tc.c, tc.high, high, tc.low, low)
		}
		if d, z := size(tc.c, tc.defalt), size(tc.c, 0); d != z {
			t.Errorf("%v: Kafka's default level %d gives %d bytes, level 0 (default) %d", tc.c, tc.defalt, d, z)
		}
	}
}

// TestCodecsInteroperateWithFranzGo decodes franz-go's compression and has franz-go
// decode ours, for every codec.
func TestCodecsInteroperateWithFranzGo(t *testing.T) {
	dec := kgo.DefaultDecompressor()
	for _, c := range allCodecs[1:] {
		for name, src := range testPayloads() {
			if len(src) == 0 {
				continue
			}
			t.Run(c.String()+"/"+name, func(t *testing.T) {
				got, err := Decompress(c, kgoCompress(t, c, src))
				if err != nil || !bytes.Equal(got, src) {
					t.Fatalf("decoding franz-go's %s: %v (equal %v)", c, err, bytes.Equal(got, src))
				}
				ours, err := Compress(c, nil, src)
				if err != nil {
					t.Fatal(err)
				}
				back, err := dec.Decompress(ours, kgo.CompressionCodecType(c))
				if err != nil || !bytes.Equal(back, src) {
					t.Fatalf("franz-go decoding our %s: %v", c, err)
				}
			})
		}
	}
}

// xerialFrame writes snappy-java's stream framing by hand: the 16-byte header, then
// blocks of at most blockSize input bytes, each behind a big-endian length.
func xerialFrame(src []byte, blockSize int) []byte {
	out := append([]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}, 0, 0, 0, 1, 0, 0, 0, 1)
	for len(src) > 0 {
		n := min(blockSize, len(src))
		block := snappy.Encode(nil, src[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
		src = src[n:]
	}
	return out
}

func TestSnappyXerial(t *testing.T) {
	for name, src := range testPayloads() {
		t.Run(name, func(t *testing.T) {
			got, err := Decompress(CompressionSnappy, xerialFrame(src, 32<<10))
			if err != nil || !bytes.Equal(got, src) {
				t.Fatalf("xerial decode: %v (got %d bytes, want %d)", err, len(got), len(src))
			}
		})
	}
	framed := xerialFrame(bytes.Repeat([]byte("abc"), 50_000), 32<<10)
	for _, tt := range []struct {
		name string
		in   []byte
	}{
		{"torn block", framed[:len(framed)-1]},
		{"torn length", framed[:xerialHeaderSize+2]},
		{"block length past end", binary.BigEndian.AppendUint32(append([]byte(nil), framed[:xerialHeaderSize]...), 1000)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Decompress(CompressionSnappy, tt.in); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error = %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestDecompressGarbage(t *testing.T) {
	garbage := []byte("this is not compressed data at all, not in any codec")
	for _, c := range allCodecs[1:] {
		if _, err := Decompress(c, garbage); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: error = %v, want ErrCorrupt", c, err)
		}
		valid, _ := Compress(c, nil, bytes.Repeat([]byte("x"), 10_000))
		if _, err := Decompress(c, valid[:len(valid)/2]); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s truncated: error = %v, want ErrCorrupt", c, err)
		}
	}
	for _, c := range []Compression{5, 6, 7, -1} {
		if _, err := Decompress(c, garbage); !errors.Is(err, ErrInvalid) {
			t.Errorf("codec %d: error = %v, want ErrInvalid", c, err)
		}
		if _, err := Compress(c, nil, garbage); !errors.Is(err, ErrInvalid) {
			t.Errorf("codec %d: Compress error = %v, want ErrInvalid", c, err)
		}
	}
}

// TestDecompressBounded checks that output beyond the limit is refused for every codec
// (a zip bomb), using a small limit so the test stays cheap.
func TestDecompressBounded(t *testing.T) {
	const limit = 64 << 10
	zeros := make([]byte, 4*limit)
	for _, c := range allCodecs[1:] {
		t.Run(c.String(), func(t *testing.T) {
			bomb, err := Compress(c, nil, zeros)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := decompress(c, bomb, limit); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decompressing %d bytes with limit %d: error = %v, want ErrCorrupt", len(zeros), limit, err)
			}
			exact, _ := Compress(c, nil, zeros[:limit])
			if got, err := decompress(c, exact, limit); err != nil || len(got) != limit {
				t.Fatalf("output exactly at the limit: %d bytes, %v", len(got), err)
			}
		})
	}
	t.Run("xerial", func(t *testing.T) {
		if _, err := decompress(CompressionSnappy, xerialFrame(zeros, 32<<10), limit); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error = %v, want ErrCorrupt", err)
		}
	})
}

func TestCompressConcurrent(t *testing.T) {
	src := testPayloads()["text"]
	var wg sync.WaitGroup
	errs := make(chan error, 4*len(allCodecs))
	for range 4 {
		for _, c := range allCodecs {
			wg.Go(func() {
				out, err := Compress(c, nil, src)
				if err == nil {
					var got []byte
					got, err = Decompress(c, out)
					if err == nil && !bytes.Equal(got, src) {
						err = fmt.Errorf("%s: round trip mismatch", c)
					}
				}
				errs <- err
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// TestLZ4FrameShape checks the frame descriptor Kafka's Java reader relies on:
// independent blocks of 64 KiB, as the Java producer writes them.
func TestLZ4FrameShape(t *testing.T) {
	out, err := Compress(CompressionLZ4, nil, bytes.Repeat([]byte("kafka"), 100_000))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(out, []byte{0x04, 0x22, 0x4d, 0x18}) {
		t.Fatalf("not an LZ4 frame: % x", out[:8])
	}
	flg, bd := out[4], out[5]
	if flg>>6 != 1 || flg&0x20 == 0 {
		t.Fatalf("FLG %08b: want version 01 and independent blocks", flg)
	}
	if bd>>4&7 != 4 {
		t.Fatalf("BD %08b: want 64 KiB blocks (4)", bd)
	}
}

func FuzzDecompress(f *testing.F) {
	for _, c := range allCodecs[1:] {
		out, _ := Compress(c, nil, []byte("some records some records some records"))
		f.Add(int8(c), out)
	}
	f.Add(int8(CompressionSnappy), xerialFrame([]byte("abcabcabcabc"), 4))
	f.Fuzz(func(t *testing.T, codec int8, src []byte) {
		c := Compression(codec & 7)
		out, err := decompress(c, src, 1<<20)
		if err == nil && len(out) > 1<<20 && c != CompressionNone {
			t.Fatalf("%s: %d bytes past the limit", c, len(out))
		}
	})
}
