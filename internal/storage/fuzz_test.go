package storage

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/samsa-streaming/samsa/internal/clock"
)

// FuzzRecover writes arbitrary bytes after some valid batches as a segment file and
// index files, then opens the log uncleanly: it must never panic, must keep the valid
// prefix, and must accept appends afterwards.
func FuzzRecover(f *testing.F) {
	f.Add([]byte{}, []byte{}, uint8(2))
	f.Add(simple(f, 3, 1), []byte{0, 0, 0, 1, 0, 0, 0, 5}, uint8(1))
	b := simple(f, 2, 7)
	f.Add(b[:40], []byte("junk"), uint8(0))
	f.Fuzz(func(t *testing.T, tail, index []byte, prefix uint8) {
		dir := t.TempDir()
		pdir := filepath.Join(dir, "f-0")
		if err := os.MkdirAll(pdir, 0o755); err != nil {
			t.Fatal(err)
		}
		var data []byte
		var wantEnd int64
		for i := 0; i < int(prefix%4); i++ {
			bb := simple(t, 2, int64(i))
			copy(bb, []byte{0, 0, 0, 0, 0, 0, 0, byte(2 * i)})
			data = append(data, bb...)
			wantEnd = int64(2*i + 2)
		}
		data = append(data, tail...)
		if err := os.WriteFile(filepath.Join(pdir, fileName(0, logSuffix)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pdir, fileName(0, indexSuffix)), index, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := Open(Options{Dir: dir, Topic: "f", Partition: 0, Clock: clock.NewFake(t0), Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if l.LogEndOffset() < wantEnd {
			t.Fatalf("log end %d lost the valid prefix ending at %d", l.LogEndOffset(), wantEnd)
		}
		for off := l.LogStartOffset(); off < l.LogEndOffset(); {
			res, err := l.Read(off, 1<<20, math.MaxInt64, true)
			if err != nil {
				t.Fatal(err)
			}
			if res.Size == 0 {
				break // a gap left by valid but offset-skipping fuzz batches
			}
			bs, err := l.ReadBytes(off, int(res.Size), math.MaxInt64)
			if err != nil || int64(len(bs)) != res.Size {
				t.Fatal(err)
			}
			h, err := parseAt(bs[len(bs)-int(lastBatchSize(bs)):])
			if err != nil || h.LastOffset() < off {
				t.Fatalf("Read(%d) returned unparsable or stale batches (%v)", off, err)
			}
			off = h.LastOffset() + 1
		}
		end := l.LogEndOffset()
		info, err := l.Append(simple(t, 1, 0), AppendOptions{})
		if err != nil || info.BaseOffset != end {
			t.Fatalf("append after recovery: %+v %v (end %d)", info, err, end)
		}
	})
}

func lastBatchSize(b []byte) int64 {
	var last int64
	for len(b) > 0 {
		h, err := parseAt(b)
		if err != nil {
			break
		}
		last = int64(h.Size())
		b = b[h.Size():]
	}
	return last
}
