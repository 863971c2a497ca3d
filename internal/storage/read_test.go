package storage

import (
	"bytes"
	"math"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/record"
)

// ReadBytesInto returns exactly the bytes of the ranges Read names, for reads of
// every size from every offset, across segments and batches larger than the header
// walk's smallest buffer; a small read costs one read of the segment file (the
// walk's), where it took three (the index lookup's walk, the read's walk and the
// copy, which read the os.File beneath the FS), and a read of 16 KiB one read of each
// segment it walks, where it took two when it ran past a 16 KiB buffer.
func TestReadBytesIntoMatchesRead(t *testing.T) {
	l, reads := openReadLog(t, 256<<10, 300, func(i int) int {
		if i%37 == 5 {
			return 1000 // a 40 KiB batch: past the walk's 16 KiB buffer
		}
		return 20 + i%7*30 // small batches, several to an index entry
	})
	if len(l.segs()) < 3 {
		t.Fatalf("%d segments, want reads across several", len(l.segs()))
	}
	buf := make([]byte, 8<<10)
	for off := l.LogStartOffset(); off < l.LogEndOffset(); off += 97 {
		for _, maxBytes := range []int{1, 3000, 9000, 70_000, 600_000} {
			_, want := readWant(t, l, off, maxBytes)
			got, err := l.ReadBytesInto(buf, off, maxBytes, math.MaxInt64)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("ReadBytesInto(%d, %d): %d bytes, Read's ranges hold %d (or others)", off, maxBytes, len(got), len(want))
			}
		}
	}
	// A small read of small batches: one read of the file.
	off := int64(41) // inside the second batch: the index's first entry is the walk's start
	before := reads.Load()
	got, err := l.ReadBytesInto(buf, off, 3000, math.MaxInt64)
	if err != nil || len(got) == 0 {
		t.Fatalf("ReadBytesInto(%d): %d bytes, %v", off, len(got), err)
	}
	if n := reads.Load() - before; n != 1 {
		t.Fatalf("a read of %d bytes took %d reads of the segment file, want 1", len(got), n)
	}
	// A read of 16 KiB: one read of each segment file it walks (its buffer holds the
	// bytes wanted and the walk from the index entry before them): those it takes
	// batches from, and the next one when it took the last of a segment's.
	for off := int64(241); off < 1680; off += 40 { // batches of 1–8 KiB
		res, _ := readWant(t, l, off, 16<<10)
		files := map[*os.File]bool{}
		for _, r := range res.Ranges {
			files[r.File] = true
		}
		walked := len(files)
		if last := res.Ranges[len(res.Ranges)-1]; res.NextOffset < l.LogEndOffset() {
			if fi, err := last.File.Stat(); err == nil && last.Pos+last.Len == fi.Size() {
				walked++
			}
		}
		before := reads.Load()
		got, err := l.ReadBytesInto(make([]byte, 64<<10), off, 16<<10, math.MaxInt64)
		if err != nil || len(got) < 8<<10 {
			t.Fatalf("ReadBytesInto(%d, 16 KiB): %d bytes, %v", off, len(got), err)
		}
		if n := reads.Load() - before; n != int64(walked) {
			t.Fatalf("a read of %d bytes from offset %d took %d reads of the segment files, want one of each of the %d it walks", len(got), off, n, walked)
		}
	}
}

// TestReadBytesIntoPastItsBuffer: a copying read larger than its buffer
// (readIterMaxBuf) within one segment reads on from the batch that crossed the
// buffer's end, and returns what Read's ranges hold.
func TestReadBytesIntoPastItsBuffer(t *testing.T) {
	l, reads := openReadLog(t, 16<<20, 400, func(i int) int {
		return 50 + i%11*60 // batches of 2–28 KiB, several crossing the buffer's end
	})
	if len(l.segs()) != 1 {
		t.Fatalf("%d segments, want one", len(l.segs()))
	}
	crossed := false
	for off := l.LogStartOffset(); off < l.LogEndOffset(); off += 1013 {
		for _, maxBytes := range []int{readIterMaxBuf / 2, readIterMaxBuf + 5000, 3 * readIterMaxBuf} {
			_, want := readWant(t, l, off, maxBytes)
			before := reads.Load()
			got, err := l.ReadBytesInto(nil, off, maxBytes, math.MaxInt64)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("ReadBytesInto(%d, %d): %d bytes, Read's ranges hold %d (or others)", off, maxBytes, len(got), len(want))
			}
			n := reads.Load() - before
			// Each buffer's worth is one read, and the batch that crosses a buffer's
			// end is read again with what follows it: no more than one read more
			// than the buffers the bytes and the walk's start fill.
			if most := int64(len(got)+8<<10)/readIterMaxBuf + 2; n > most {
				t.Fatalf("a read of %d bytes from offset %d took %d reads of the segment file, want at most %d", len(got), off, n, most)
			}
			crossed = crossed || len(got) > readIterMaxBuf
		}
	}
	if !crossed {
		t.Fatal("no read went past its buffer")
	}
}

// openReadLog opens a log of segments of segmentBytes over a faultFS, appends batches
// of 40 records of valueSize(i) bytes, and returns it with a count of the reads of its
// segment files from then on.
func openReadLog(t *testing.T, segmentBytes int64, batches int, valueSize func(i int) int) (*Log, *atomic.Int64) {
	t.Helper()
	dir := t.TempDir()
	ffs := newFaultFS(t, dir)
	l, err := Open(Options{Dir: dir, Topic: "r", Partition: 0, Clock: clock.NewFake(t0), Logger: testLogger(t), FS: ffs,
		Config: Config{SegmentBytes: segmentBytes}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for i := range batches {
		if _, err := l.Append(mkBatch(t, batchSpec{n: 40, ts: int64(i), valueSize: valueSize(i)}), AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	reads := new(atomic.Int64)
	ffs.setInject(func(c fsCall) error {
		if c.op == opRead && strings.HasSuffix(c.path, logSuffix) {
			reads.Add(1)
		}
		return nil
	})
	return l, reads
}

// readWant is what Read names from off: its ranges and their bytes.
func readWant(t *testing.T, l *Log, off int64, maxBytes int) (ReadResult, []byte) {
	t.Helper()
	res, err := l.Read(off, maxBytes, math.MaxInt64, true)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for _, r := range res.Ranges {
		b := make([]byte, r.Len)
		if _, err := r.File.ReadAt(b, r.Pos); err != nil {
			t.Fatal(err)
		}
		want = append(want, b...)
	}
	return res, want
}

// TestTimestampLookupsBoundMemory: a stored zstd batch of a few kilobytes whose
// record expands to 200 MiB (a record as a client may produce it: its batch is well
// within max.message.bytes) costs a lookup by timestamp (ListOffsets) far less than
// it expands to: its records are walked as they are decompressed, as Validate walks
// them, so concurrent lookups cannot each hold the batch's decompressed bytes.
func TestTimestampLookupsBoundMemory(t *testing.T) {
	tl := openTest(t, DefaultConfig())
	opts := record.DefaultBuildOptions()
	opts.BaseTimestamp, opts.Compression = 1000, record.CompressionZstd
	b, err := record.Build(opts, []record.Record{
		{Value: make([]byte, 200<<20)},
		{OffsetDelta: 1, TimestampDelta: 5, Value: []byte("after")},
	})
	if err != nil {
		t.Fatal(err)
	}
	tl.mustAppend(b)
	t.Logf("a batch of %d KiB holding 200 MiB", len(b)>>10)
	b = nil
	runtime.GC()
	var (
		off, rts int64
		ok       bool
	)
	n := allocatedBy(func() { off, rts, ok = tl.OffsetForTimestamp(1003) })
	if !ok || off != 1 || rts != 1005 {
		t.Fatalf("OffsetForTimestamp(1003) = %d, %d, %v; want 1, 1005", off, rts, ok)
	}
	if n > 32<<20 {
		t.Errorf("OffsetForTimestamp allocated %d MiB", n>>20)
	}
	n = allocatedBy(func() { rts, off = tl.MaxTimestamp() })
	if off != 1 || rts != 1005 {
		t.Fatalf("MaxTimestamp() = %d, %d; want 1005, 1", rts, off)
	}
	if n > 32<<20 {
		t.Errorf("MaxTimestamp allocated %d MiB", n>>20)
	}
}

// allocatedBy returns the bytes f allocates.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
