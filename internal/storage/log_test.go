package storage

import (
	"errors"
	"io"
	"math"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/record"
)

func TestAppendAssignsOffsetsAndReadsBack(t *testing.T) {
	l := openTest(t, Config{})
	counts := []int{1, 5, 3, 10, 1}
	var want int64
	for i, n := range counts {
		info := l.mustAppend(simple(t, n, t0.UnixMilli()+int64(i)))
		if info.BaseOffset != want || info.LastOffset != want+int64(n)-1 {
			t.Fatalf("batch %d: got [%d,%d], want [%d,%d]", i, info.BaseOffset, info.LastOffset, want, want+int64(n)-1)
		}
		if info.LogAppendTime != -1 || info.Duplicate || info.LogStartOffset != 0 {
			t.Fatalf("batch %d: unexpected info %+v", i, info)
		}
		want += int64(n)
	}
	if l.LogEndOffset() != want || l.LogStartOffset() != 0 {
		t.Fatalf("offsets [%d,%d), want [0,%d)", l.LogStartOffset(), l.LogEndOffset(), want)
	}
	hs := l.readAll(0)
	if len(hs) != len(counts) {
		t.Fatalf("read %d batches, want %d", len(hs), len(counts))
	}
	for _, h := range hs {
		if h.PartitionLeaderEpoch != 1 {
			t.Fatalf("batch %d: leader epoch %d, want 1", h.BaseOffset, h.PartitionLeaderEpoch)
		}
	}
	// Every offset reads from the batch containing it.
	var base int64
	for _, n := range counts {
		for off := base; off < base+int64(n); off++ {
			res, err := l.Read(off, 1<<20, math.MaxInt64, false)
			if err != nil {
				t.Fatal(err)
			}
			if res.FirstBatchOffset != base {
				t.Fatalf("Read(%d) starts at batch %d, want %d", off, res.FirstBatchOffset, base)
			}
		}
		base += int64(n)
	}
	if l.Size() == 0 {
		t.Fatal("size is zero")
	}
}

func TestReadLimits(t *testing.T) {
	l := openTest(t, Config{})
	var sizes []int64
	for i := 0; i < 5; i++ { // offsets 0-1, 2-3, 4-5, 6-7, 8-9
		b := simple(t, 2, t0.UnixMilli())
		sizes = append(sizes, int64(len(b)))
		l.mustAppend(b)
	}
	one := sizes[0]
	tests := []struct {
		name        string
		offset      int64
		maxBytes    int
		maxOffset   int64
		minOne      bool
		wantFirst   int64
		wantBatches int64
	}{
		{"all", 0, 1 << 20, math.MaxInt64, false, 0, 5},
		{"from middle of batch", 3, 1 << 20, math.MaxInt64, false, 2, 4},
		{"max bytes two batches", 0, int(2*one + one/2), math.MaxInt64, false, 0, 2},
		{"max bytes exact", 0, int(3 * one), math.MaxInt64, false, 0, 3},
		{"too small without minOne", 0, int(one - 1), math.MaxInt64, false, -1, 0},
		{"too small with minOne", 0, 1, math.MaxInt64, true, 0, 1},
		{"high watermark mid batch", 0, 1 << 20, 5, false, 0, 2},
		{"high watermark at batch end", 0, 1 << 20, 6, false, 0, 3},
		{"high watermark equals offset", 4, 1 << 20, 4, true, -1, 0},
		{"high watermark inside first batch", 4, 1 << 20, 5, true, -1, 0},
		{"log end", 10, 1 << 20, math.MaxInt64, true, -1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := l.Read(tc.offset, tc.maxBytes, tc.maxOffset, tc.minOne)
			if err != nil {
				t.Fatal(err)
			}
			if res.FirstBatchOffset != tc.wantFirst || res.Size != tc.wantBatches*one {
				t.Fatalf("got first %d size %d, want first %d size %d", res.FirstBatchOffset, res.Size, tc.wantFirst, tc.wantBatches*one)
			}
			var sum int64
			for _, r := range res.Ranges {
				sum += r.Len
			}
			if sum != res.Size {
				t.Fatalf("ranges sum %d != size %d", sum, res.Size)
			}
		})
	}
}

func TestOffsetOutOfRange(t *testing.T) {
	l := openTest(t, Config{})
	for i := 0; i < 4; i++ {
		l.mustAppend(simple(t, 1, 0))
	}
	if _, err := l.DeleteRecordsBefore(2); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{-1, 0, 1, 5, 100} {
		if _, err := l.Read(off, 100, math.MaxInt64, true); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Errorf("Read(%d): err %v, want ErrOffsetOutOfRange", off, err)
		}
	}
	for _, off := range []int64{2, 3, 4} {
		if _, err := l.Read(off, 100, math.MaxInt64, true); err != nil {
			t.Errorf("Read(%d): %v", off, err)
		}
	}
	if _, err := l.DeleteRecordsBefore(5); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Errorf("DeleteRecordsBefore beyond end: %v", err)
	}
}

func TestRejectsBadBatches(t *testing.T) {
	l := openTest(t, Config{SegmentBytes: 200})
	good := simple(t, 1, 0)
	if _, err := l.Append(good[:len(good)-1], AppendOptions{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("short batch: %v", err)
	}
	big := mkBatch(t, batchSpec{n: 1, valueSize: 300})
	if _, err := l.Append(big, AppendOptions{}); !errors.Is(err, ErrRecordTooLarge) {
		t.Errorf("large batch: %v", err)
	}
	if l.LogEndOffset() != 0 {
		t.Fatalf("log end %d after rejected appends", l.LogEndOffset())
	}
}

func TestRollBySize(t *testing.T) {
	one := int64(len(simple(t, 1, 0)))
	l := openTest(t, Config{SegmentBytes: 3 * one})
	for i := 0; i < 10; i++ {
		l.mustAppend(simple(t, 1, 0))
	}
	segs := l.segs()
	if len(segs) != 4 { // 3+3+3+1
		t.Fatalf("%d segments, want 4", len(segs))
	}
	for i, s := range segs {
		if s.base != int64(3*i) {
			t.Errorf("segment %d base %d, want %d", i, s.base, 3*i)
		}
		if !fileExists(filepath.Join(l.Dir(), fileName(s.base, logSuffix))) {
			t.Errorf("segment file %d missing", s.base)
		}
	}
	if got := len(l.readAll(0)); got != 10 {
		t.Fatalf("read %d batches, want 10", got)
	}
	// A roll leaves a producer snapshot at the new base offset and, once the rolled
	// segments are flushed in the background, moves the recovery point.
	if !fileExists(filepath.Join(l.Dir(), fileName(9, snapshotSuffix))) {
		t.Error("no snapshot at the last roll")
	}
	l.background.Wait()
	if rp := l.RecoveryPoint(); rp != l.LogEndOffset() {
		t.Errorf("recovery point %d, want the log end %d", rp, l.LogEndOffset())
	}
}

func TestRollByTime(t *testing.T) {
	l := openTest(t, Config{SegmentMs: 1000})
	ts := t0.UnixMilli()
	l.mustAppend(simple(t, 1, ts))
	l.mustAppend(simple(t, 1, ts+1000)) // exactly segment.ms later: no roll
	if n := len(l.segs()); n != 1 {
		t.Fatalf("%d segments, want 1", n)
	}
	l.mustAppend(simple(t, 1, ts+1001))
	if n := len(l.segs()); n != 2 {
		t.Fatalf("%d segments after segment.ms, want 2", n)
	}
	// Batches without timestamps fall back on the clock.
	l.mustAppend(simple(t, 1, -1))
	l.clock.Advance(2 * time.Second)
	l2 := openTest(t, Config{SegmentMs: 1000})
	l2.mustAppend(simple(t, 1, -1))
	l2.clock.Advance(1500 * time.Millisecond)
	l2.mustAppend(simple(t, 1, -1))
	if n := len(l2.segs()); n != 2 {
		t.Fatalf("%d segments with clock-based roll, want 2", n)
	}
}

// TestRollJitter: with segment.jitter.ms, each segment rolls a random amount (below the
// jitter and below segment.ms) earlier than segment.ms, and exactly then.
func TestRollJitter(t *testing.T) {
	ts := t0.UnixMilli()
	jitters := map[int64]bool{}
	for range 20 {
		l := openTest(t, Config{SegmentMs: 1000, SegmentJitterMs: 5000})
		l.mustAppend(simple(t, 1, ts))
		l.mustAppend(simple(t, 1, ts+1)) // the first age check draws the jitter
		j := l.active().rollJitterMs
		if j < 0 || j >= 1000 {
			t.Fatalf("jitter %d ms, want within [0, segment.ms=1000)", j)
		}
		jitters[j] = true
		l.mustAppend(simple(t, 1, ts+1000-j)) // exactly segment.ms - jitter: no roll
		if n := len(l.segs()); n != 1 {
			t.Fatalf("jitter %d: %d segments at segment.ms - jitter, want 1", j, n)
		}
		l.mustAppend(simple(t, 1, ts+1001-j))
		if n := len(l.segs()); n != 2 {
			t.Fatalf("jitter %d: %d segments after segment.ms - jitter, want 2", j, n)
		}
	}
	if len(jitters) < 2 {
		t.Fatalf("20 segments all drew the jitter %v: not random", jitters)
	}
}

func TestRollWhenIndexFull(t *testing.T) {
	l := openTest(t, Config{IndexIntervalBytes: 1, SegmentIndexBytes: 3 * offsetEntrySize})
	for i := 0; i < 12; i++ {
		l.mustAppend(simple(t, 1, t0.UnixMilli()+int64(i)))
	}
	if n := len(l.segs()); n < 3 {
		t.Fatalf("%d segments, want rolls on full index", n)
	}
	for _, s := range l.segs() {
		s.idx.RLock()
		n := len(s.idx.x.offsets)
		s.idx.RUnlock()
		if n*offsetEntrySize > 3*offsetEntrySize {
			t.Fatalf("segment %d has %d index entries", s.base, n)
		}
	}
	if got := len(l.readAll(0)); got != 12 {
		t.Fatalf("read %d batches, want 12", got)
	}
}

// TestSegmentIndexBytesBelowOneEntry: segment.index.bytes may be as small as 4, as
// in Kafka (LogConfig: atLeast(4)); no entry fits, so every append to a non-empty
// segment rolls it.
func TestSegmentIndexBytesBelowOneEntry(t *testing.T) {
	l := openTest(t, Config{SegmentIndexBytes: 4})
	for i := range 3 {
		l.mustAppend(simple(t, 1, t0.UnixMilli()+int64(i)))
	}
	if n := len(l.segs()); n != 3 {
		t.Fatalf("%d segments, want 3", n)
	}
}

// TestIndexLookupMatchesScan compares the index-assisted position of every offset with
// a linear walk of the segment, before and after a clean reopen (lazily loaded index)
// and after an unclean one (rebuilt index).
func TestIndexLookupMatchesScan(t *testing.T) {
	one := len(simple(t, 3, 0))
	l := openTest(t, Config{IndexIntervalBytes: 2 * one, SegmentBytes: int64(40 * one)})
	for i := 0; i < 100; i++ {
		l.mustAppend(simple(t, 1+i%3, t0.UnixMilli()+int64(i)))
	}
	check := func(stage string) {
		t.Helper()
		for _, s := range l.segs() {
			type batch struct {
				pos        int64
				base, last int64
			}
			var all []batch
			it := newBatchIter(s.file, 0, s.size.Load(), 4096)
			for {
				h, pos, err := it.next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, batch{pos, h.BaseOffset, h.LastOffset()})
			}
			if len(all) == 0 {
				continue
			}
			for off := s.base; off <= all[len(all)-1].last; off++ {
				var want batch
				for _, b := range all {
					if b.last >= off {
						want = b
						break
					}
				}
				pos, h, found, err := s.find(off, l.config().IndexIntervalBytes)
				if err != nil || !found || pos != want.pos || h.BaseOffset != want.base {
					t.Fatalf("%s: find(%d) = %d/%d/%v/%v, want pos %d base %d", stage, off, pos, h.BaseOffset, found, err, want.pos, want.base)
				}
			}
			s.idx.RLock()
			entries := len(s.idx.x.offsets)
			s.idx.RUnlock()
			if entries == 0 {
				t.Fatalf("%s: segment %d has no index entries", stage, s.base)
			}
		}
	}
	check("live")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l.reopen(true)
	check("clean reopen")
	l.crash()
	l.reopen(false)
	check("unclean reopen")
}

func TestLogAppendTime(t *testing.T) {
	l := openTest(t, Config{LogAppendTime: true})
	b := simple(t, 3, 12345)
	info, err := l.Append(b, AppendOptions{LeaderEpoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	if info.LogAppendTime != t0.UnixMilli() {
		t.Fatalf("LogAppendTime %d, want %d", info.LogAppendTime, t0.UnixMilli())
	}
	hs := l.readAll(0)
	if !hs[0].LogAppendTime() || hs[0].MaxTimestamp != t0.UnixMilli() {
		t.Fatalf("stored header %+v", hs[0])
	}
	if off, ts, ok := l.OffsetForTimestamp(t0.UnixMilli()); !ok || off != 0 || ts != t0.UnixMilli() {
		t.Fatalf("OffsetForTimestamp = %d %d %v", off, ts, ok)
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	one := len(simple(t, 4, 0))
	l := openTest(t, Config{IndexIntervalBytes: one, SegmentBytes: int64(5 * one)})
	// Batch i holds offsets 4i..4i+3 with timestamps 100i+0..3, except batch 5 which
	// is out of order (timestamps 50..53); batch 7 is compressed.
	for i := 0; i < 12; i++ {
		ts := int64(100 * i)
		if i == 5 {
			ts = 50
		}
		l.mustAppend(mkBatch(t, batchSpec{n: 4, ts: ts, valueSize: 5, compressed: i == 7}))
	}
	tests := []struct {
		ts      int64
		wantOff int64
		wantTs  int64
		ok      bool
	}{
		{-5, 0, 0, true},
		{0, 0, 0, true},
		{2, 2, 2, true},
		{4, 4, 100, true},
		{51, 4, 100, true}, // batch 1 (100..) precedes batch 5 (50..53) in offset order
		{403, 19, 403, true},
		{404, 24, 600, true},
		{701, 29, 701, true}, // inside the compressed batch
		{1103, 47, 1103, true},
		{1104, -1, -1, false},
	}
	run := func(stage string) {
		for _, tc := range tests {
			off, ts, ok := l.OffsetForTimestamp(tc.ts)
			if off != tc.wantOff || ts != tc.wantTs || ok != tc.ok {
				t.Errorf("%s: OffsetForTimestamp(%d) = %d,%d,%v want %d,%d,%v", stage, tc.ts, off, ts, ok, tc.wantOff, tc.wantTs, tc.ok)
			}
		}
		if ts, off := l.MaxTimestamp(); ts != 1103 || off != 47 {
			t.Errorf("%s: MaxTimestamp = %d@%d, want 1103@47", stage, ts, off)
		}
	}
	run("live")
	l.Close()
	l.reopen(true)
	run("reopened")
	// Deleted records are not answered.
	if _, err := l.DeleteRecordsBefore(30); err != nil {
		t.Fatal(err)
	}
	if off, _, ok := l.OffsetForTimestamp(0); !ok || off != 30 {
		t.Errorf("after DeleteRecords: OffsetForTimestamp(0) = %d,%v, want 30", off, ok)
	}
}

func TestMaxTimestampEmpty(t *testing.T) {
	l := openTest(t, Config{})
	if ts, off := l.MaxTimestamp(); ts != -1 || off != -1 {
		t.Fatalf("empty log MaxTimestamp = %d@%d", ts, off)
	}
	if _, _, ok := l.OffsetForTimestamp(0); ok {
		t.Fatal("empty log answered a timestamp")
	}
}

func TestConcurrentReadersAndAppender(t *testing.T) {
	one := len(simple(t, 2, 0))
	l := openTest(t, Config{SegmentBytes: int64(10 * one), IndexIntervalBytes: one})
	const batches = 300
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var next int64
			for {
				select {
				case <-stop:
					return
				default:
				}
				b, err := l.ReadBytes(next, 4096, math.MaxInt64)
				if err != nil {
					t.Error(err)
					return
				}
				for len(b) > 0 {
					h, err := record.ParseHeader(b)
					if err != nil || h.BaseOffset != next || !record.ChecksumOK(b[:h.Size()]) {
						t.Errorf("reader at %d got batch %d (err %v)", next, h.BaseOffset, err)
						return
					}
					next = h.LastOffset() + 1
					b = b[h.Size():]
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // flushes and timestamp lookups race with appends and rolls
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := l.Flush(); err != nil {
				t.Error(err)
				return
			}
			l.MaxTimestamp()
			l.OffsetForTimestamp(100)
		}
	}()
	for i := 0; i < batches; i++ {
		l.mustAppend(simple(t, 2, int64(i)))
	}
	close(stop)
	wg.Wait()
	if l.LogEndOffset() != 2*batches {
		t.Fatalf("log end %d", l.LogEndOffset())
	}
}

func TestFlushIntervalMessagesAndMs(t *testing.T) {
	l := openTest(t, Config{FlushIntervalMessages: 3})
	l.mustAppend(simple(t, 2, 0))
	if rp := l.RecoveryPoint(); rp != 0 {
		t.Fatalf("recovery point %d after 2 messages", rp)
	}
	l.mustAppend(simple(t, 1, 0))
	if rp := l.RecoveryPoint(); rp != 3 {
		t.Fatalf("recovery point %d after 3 messages, want 3", rp)
	}
	// Persisted lazily.
	if st, _ := readLogState(OSFS{}, l.Dir()); st.recoveryPoint != 0 {
		t.Fatalf("recovery point written synchronously: %d", st.recoveryPoint)
	}
	if err := l.CheckpointState(); err != nil {
		t.Fatal(err)
	}
	if st, _ := readLogState(OSFS{}, l.Dir()); st.recoveryPoint != 3 {
		t.Fatalf("checkpointed recovery point %d, want 3", st.recoveryPoint)
	}
	l2 := openTest(t, Config{FlushIntervalMs: 1000})
	l2.mustAppend(simple(t, 1, 0))
	if err := l2.MaybeFlush(t0.Add(999 * time.Millisecond)); err != nil || l2.RecoveryPoint() != 0 {
		t.Fatalf("flushed too early: rp %d err %v", l2.RecoveryPoint(), err)
	}
	if err := l2.MaybeFlush(t0.Add(time.Second)); err != nil || l2.RecoveryPoint() != 1 {
		t.Fatalf("not flushed after flush.ms: rp %d err %v", l2.RecoveryPoint(), err)
	}
}

func TestClosedLog(t *testing.T) {
	l := openTest(t, Config{})
	l.mustAppend(simple(t, 1, 0))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(simple(t, 1, 0), AppendOptions{}); !errors.Is(err, ErrLogClosed) {
		t.Errorf("append after close: %v", err)
	}
	if _, err := l.Read(0, 100, math.MaxInt64, true); !errors.Is(err, ErrLogClosed) {
		t.Errorf("read after close: %v", err)
	}
}

// BenchmarkAppend appends a 10-record batch over and over (go test -run '^$' -bench
// BenchmarkAppend -benchtime 200000x ./internal/storage/): the append path's cost and
// allocations.
func BenchmarkAppend(b *testing.B) {
	l, err := Open(Options{Dir: b.TempDir(), Topic: "b", Partition: 0, Config: Config{SegmentBytes: 64 << 20}})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := mkBatch(b, batchSpec{n: 10, valueSize: 100})
	b.ReportAllocs()
	b.SetBytes(int64(len(batch)))
	b.ResetTimer()
	for range b.N {
		if _, err := l.Append(batch, AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
