package record

import (
	"encoding/binary"
	"errors"
	"runtime"
	"testing"
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
		var err error
		n := allocatedBy(func() { _, err = Decompress(CompressionSnappy, src) })
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Decompress = %v, want ErrCorrupt", name, err)
		}
		if n > 64<<10 {
			t.Errorf("%s: Decompress allocated %d bytes for a %d-byte block", name, n, len(src))
		}
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

// TestZstdStatedSizeNotTrusted: a zstd frame of 17 bytes whose header states 200 MiB
// of content (more than 17 bytes of blocks can produce) is refused without allocating
// anything near it.
func TestZstdStatedSizeNotTrusted(t *testing.T) {
	frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0} // magic; single segment, 8-byte content size
	frame = binary.LittleEndian.AppendUint64(frame, 200<<20)
	frame = append(frame, 0x09, 0, 0, 'x') // last block, raw, 1 byte
	var err error
	n := allocatedBy(func() { _, err = Decompress(CompressionZstd, frame) })
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("Decompress = %v, want ErrCorrupt", err)
	}
	if n > 64<<10 {
		t.Errorf("Decompress allocated %d bytes for a %d-byte frame", n, len(frame))
	}
	// A frame stating its true size decodes.
	honest := append([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x20, 1}, 0x09, 0, 0, 'x')
	if out, err := Decompress(CompressionZstd, honest); err != nil || string(out) != "x" {
		t.Fatalf("honest frame: %q, %v", out, err)
	}
}
