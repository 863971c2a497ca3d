package storage

import (
	"os"
	"syscall"
	"testing"
)

// diskBytes is how much disk a file holds, reserved blocks past its end included.
func diskBytes(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Blocks * 512
}

func roundUp4K(n int64) int64 { return (n + 4095) / 4096 * 4096 }

// canPreallocate reports whether dir's file system reserves blocks for Preallocate.
func canPreallocate(t *testing.T, dir string) bool {
	f, err := OSFS{}.OpenFile(dir+"/probe", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(dir + "/probe")
	defer f.Close()
	return f.(osFile).Preallocate(0, 1<<20) == nil
}

// reserveSlack bounds the file system's own blocks (an extent tree block, say) that a
// trimmed file may still hold past its data.
const reserveSlack = 8 << 10

// An active segment written in large batches keeps disk blocks reserved past its
// end; the file's length stays the data's length, so reads and crash recovery never
// see the reserve, and rolling or closing the segment gives the reserve back.
func TestPreallocatedSegmentKeepsLengthAndTrims(t *testing.T) {
	l := openTest(t, Config{SegmentBytes: 64 << 20, SegmentMs: 1000, Preallocate: true})
	if !canPreallocate(t, l.Dir()) {
		t.Skip("the file system of the test directory cannot preallocate")
	}
	ts := t0.UnixMilli()
	big := func() []byte { return mkBatch(t, batchSpec{n: 1100, valueSize: 1000, ts: ts}) } // ~1.1 MB
	path := l.active().path(logSuffix)
	length := func(path string) int64 {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	reserved := func(path string) int64 { return diskBytes(t, path) - roundUp4K(length(path)) }

	b := big()
	for range 3 {
		l.mustAppend(b)
	}
	if got, want := length(path), 3*int64(len(b)); got != want {
		t.Fatalf("segment length %d, want the batches' %d", got, want)
	}
	if r := reserved(path); r < minReserve/2 {
		t.Fatalf("%d bytes of disk reserved past the segment's end, want some", r)
	}

	// A crash leaves the reserve in place; recovery reads exactly what was written.
	l.crash()
	l.reopen(false)
	if got := l.LogEndOffset(); got != 3300 {
		t.Fatalf("log end %d after crash recovery, want 3300", got)
	}
	if got := len(l.readAll(0)); got != 3 {
		t.Fatalf("read %d batches after recovery, want 3", got)
	}

	// The reopened segment reserves again; rolling it (segment.ms) gives the reserve back.
	l.mustAppend(big())
	if r := reserved(path); r < minReserve/2 {
		t.Fatalf("%d bytes reserved after reopening, want some", r)
	}
	ts += 2000
	l.mustAppend(big())
	if n := len(l.segs()); n != 2 {
		t.Fatalf("%d segments, want a roll by segment.ms", n)
	}
	if r := reserved(path); r > reserveSlack {
		t.Fatalf("rolled segment still holds %d bytes of disk past its end", r)
	}

	// Close trims the active segment.
	active := l.active().path(logSuffix)
	if r := reserved(active); r < minReserve/2 {
		t.Fatalf("%d bytes reserved in the new active segment, want some", r)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if r := reserved(active); r > reserveSlack {
		t.Fatalf("closed segment still holds %d bytes of disk past its end", r)
	}
}

// With preallocate off the segment grows as written: no blocks past its end.
func TestSegmentWithoutPreallocateReservesNothing(t *testing.T) {
	l := openTest(t, Config{SegmentBytes: 64 << 20})
	if !canPreallocate(t, l.Dir()) {
		t.Skip("the file system of the test directory cannot preallocate")
	}
	b := mkBatch(t, batchSpec{n: 1100, valueSize: 1000, ts: t0.UnixMilli()})
	for range 5 {
		l.mustAppend(b)
	}
	path := l.active().path(logSuffix)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if r := diskBytes(t, path) - roundUp4K(st.Size()); r > reserveSlack {
		t.Fatalf("%d bytes of disk held past the end of a %d-byte segment with preallocate off", r, st.Size())
	}
}
