package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// allocatedBy returns the bytes f allocates.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestSnappyStatedLengthNotTrusted: a snappy block of a few bytes stating 200 MiB of
// output (more than its elements can expand to: at most 64 bytes per 3) is refused
// before anything near that is allocated, raw and xerial-framed.
func TestSnappyStatedLengthNotTrusted(t *testing.T) {
	for name, src := range hugeSnappyBlocks() {
		expectRefusedWithin(t, name, CompressionSnappy, src, 64<<10)
	}
	// A block at the bound still decodes: 3-byte copies of 64 bytes each.
	ok, err := Compress(CompressionSnappy, nil, make([]byte, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := Decompress(CompressionSnappy, ok); err != nil || len(out) != 1<<20 {
		t.Fatalf("1 MiB of zeros: %d bytes, %v", len(out), err)
	}
}

// hugeSnappyBlocks returns a 9-byte snappy block stating 200 MiB of output, raw and
// xerial-framed.
func hugeSnappyBlocks() map[string][]byte {
	block := binary.AppendUvarint(nil, 200<<20)
	block = append(block, 0x0c, 'a', 'b', 'c', 'd') // one 4-byte literal
	framed := append(append([]byte(nil), xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1)
	framed = binary.BigEndian.AppendUint32(framed, uint32(len(block)))
	framed = append(framed, block...)
	return map[string][]byte{"raw": block, "xerial": framed}
}

// TestZstdStatedSizeNotTrusted: a zstd frame whose header states 200 MiB of content
// is refused without allocating anything near it, whether its 17 bytes cannot hold
// that much (refused before decoding) or its 8 KiB could (decoded as output arrives,
// then found to hold less than it states; the decoder had allocated the 200 MiB), or
// it follows an honest frame.
// Frames stating their true size, or none (as the Java client writes them), decode.
func TestZstdStatedSizeNotTrusted(t *testing.T) {
	frameHeader := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0} // magic; single segment, 8-byte content size
	frameHeader = binary.LittleEndian.AppendUint64(frameHeader, 200<<20)
	tiny := append(bytes.Clone(frameHeader), 0x09, 0, 0, 'x') // last block, raw, 1 byte
	rawBlock := binary.LittleEndian.AppendUint32(nil, 8<<10<<3|1)[:3]
	big := append(append(bytes.Clone(frameHeader), rawBlock...), make([]byte, 8<<10)...)
	honest := append([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x20, 1}, 0x09, 0, 0, 'x')
	second := append(bytes.Clone(honest), big...) // the second frame's size is the lie
	for name, frame := range map[string][]byte{"17 bytes": tiny, "8 KiB": big, "second frame": second} {
		expectRefusedWithin(t, name, CompressionZstd, frame, 256<<10)
	}
	if out, err := Decompress(CompressionZstd, honest); err != nil || string(out) != "x" {
		t.Fatalf("honest frame: %q, %v", out, err)
	}
	if out, err := Decompress(CompressionZstd, append(bytes.Clone(honest), honest...)); err != nil || string(out) != "xx" {
		t.Fatalf("two honest frames: %q, %v", out, err)
	}
	// Highly compressible content: the stated size is far above 4x the input, so the
	// frame is decoded with its size removed from the header, and checked against it.
	src := bytes.Repeat([]byte("a record value that repeats "), 40000)
	for name, enc := range map[string]func() []byte{
		"stating its size": func() []byte { return mustCompress(t, CompressionZstd, src) },
		"stating no size": func() []byte {
			var buf bytes.Buffer
			w, err := zstd.NewWriter(&buf)
			if err != nil {
				t.Fatal(err)
			}
			w.Write(src)
			w.Close()
			return buf.Bytes()
		},
	} {
		frame := enc()
		if out, err := Decompress(CompressionZstd, frame); err != nil || !bytes.Equal(out, src) {
			t.Errorf("%s (%d bytes for %d): %d bytes, %v", name, len(frame), len(src), len(out), err)
		}
	}
}

// expectRefusedWithin checks that Decompress refuses src as ErrCorrupt having
// allocated at most bound bytes.
func expectRefusedWithin(t *testing.T, name string, c Compression, src []byte, bound uint64) {
	t.Helper()
	var err error
	n := allocatedBy(func() { _, err = Decompress(c, src) })
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("%s: Decompress = %v, want ErrCorrupt", name, err)
	}
	if n > bound {
		t.Errorf("%s: Decompress allocated %d bytes for %d bytes of input", name, n, len(src))
	}
}
