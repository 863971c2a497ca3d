package storage

import (
	"math"

	"github.com/samsa-streaming/samsa/internal/record"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestRetentionByTime(t *testing.T) {
	one := int64(len(simple(t, 1, 0)))
	l := openTest(t, Config{SegmentBytes: 2 * one, RetentionMs: 1000, DeleteRetention: true, FileDeleteDelayMs: 5000})
	base := t0.UnixMilli()
	// Segments: [0,1] ts base, [2,3] ts base+500, [4,5] ts base+2000, [6] ts base+2000.
	for i, ts := range []int64{base, base, base + 500, base + 500, base + 2000, base + 2000, base + 2000} {
		_ = i
		l.mustAppend(simple(t, 1, ts))
	}
	if n := len(l.segs()); n != 4 {
		t.Fatalf("%d segments, want 4", n)
	}
	// Hold a read of the first segment across its deletion.
	res, err := l.Read(0, 1<<20, math.MaxInt64, true)
	if err != nil {
		t.Fatal(err)
	}
	n, err := l.EnforceRetention(time.UnixMilli(base + 1400))
	if err != nil || n != 1 {
		t.Fatalf("EnforceRetention: %d, %v; want 1 segment", n, err)
	}
	if l.LogStartOffset() != 2 {
		t.Fatalf("log start %d, want 2", l.LogStartOffset())
	}
	deleted := filepath.Join(l.Dir(), fileName(0, logSuffix)+deletedSuffix)
	if !fileExists(deleted) || fileExists(filepath.Join(l.Dir(), fileName(0, logSuffix))) {
		t.Fatal("segment 0 not renamed .deleted")
	}
	buf := make([]byte, res.Ranges[0].Len)
	if _, err := res.Ranges[0].File.ReadAt(buf, res.Ranges[0].Pos); err != nil {
		t.Fatalf("range of deleted segment unreadable before the delay: %v", err)
	}
	l.clock.Advance(5 * time.Second)
	if fileExists(deleted) {
		t.Fatal(".deleted file still there after file.delete.delay.ms")
	}
	// Everything expired: the active segment is rolled and everything goes.
	n, err = l.EnforceRetention(time.UnixMilli(base + 10000))
	if err != nil || n != 3 {
		t.Fatalf("EnforceRetention: %d, %v; want 3", n, err)
	}
	if l.LogStartOffset() != 7 || l.LogEndOffset() != 7 || len(l.segs()) != 1 || l.Size() != 0 {
		t.Fatalf("after full expiry: [%d,%d) %d segments size %d", l.LogStartOffset(), l.LogEndOffset(), len(l.segs()), l.Size())
	}
	if info := l.mustAppend(simple(t, 1, base+10000)); info.BaseOffset != 7 {
		t.Fatalf("append after full expiry at %d", info.BaseOffset)
	}
	// The new log start survives a restart.
	l.Close()
	l.reopen(true)
	if l.LogStartOffset() != 7 || l.LogEndOffset() != 8 {
		t.Fatalf("reopened: [%d,%d)", l.LogStartOffset(), l.LogEndOffset())
	}
}

func TestRetentionBySize(t *testing.T) {
	one := int64(len(simple(t, 1, 0)))
	tests := []struct {
		name           string
		retentionBytes int64
		deleteOn       bool
		wantDeleted    int
		wantStart      int64
	}{
		{"unlimited", -1, true, 0, 0},
		{"policy compact only", 1, false, 0, 0},
		{"keep everything that fits", 10 * one, true, 0, 0},
		{"over by less than a segment", 9 * one, true, 0, 0},
		{"over by one segment", 8 * one, true, 1, 2},
		{"tiny", 1, true, 4, 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := openTest(t, Config{SegmentBytes: 2 * one, RetentionMs: -1, RetentionBytes: tc.retentionBytes, DeleteRetention: tc.deleteOn, FileDeleteDelayMs: 0})
			for i := 0; i < 10; i++ {
				l.mustAppend(simple(t, 1, t0.UnixMilli()))
			}
			n, err := l.EnforceRetention(t0)
			if err != nil || n != tc.wantDeleted || l.LogStartOffset() != tc.wantStart {
				t.Fatalf("deleted %d (err %v) start %d; want %d, %d", n, err, l.LogStartOffset(), tc.wantDeleted, tc.wantStart)
			}
			if l.Size() != (10-tc.wantStart)*one {
				t.Fatalf("size %d", l.Size())
			}
		})
	}
}

func TestDeleteRecordsBefore(t *testing.T) {
	one := int64(len(simple(t, 2, 0)))
	l := openTest(t, Config{SegmentBytes: 2 * one, FileDeleteDelayMs: 0})
	for i := 0; i < 5; i++ { // segments [0-3], [4-7], [8-9]
		l.mustAppend(simple(t, 2, 0))
	}
	tests := []struct {
		offset    int64
		wantStart int64
		wantSegs  int
	}{
		{1, 1, 3}, // inside the first batch: nothing deleted
		{0, 1, 3}, // never moves back
		{5, 5, 2},
		{10, 10, 1}, // the active segment stays
	}
	for _, tc := range tests {
		got, err := l.DeleteRecordsBefore(tc.offset)
		if err != nil || got != tc.wantStart || len(l.segs()) != tc.wantSegs {
			t.Fatalf("DeleteRecordsBefore(%d) = %d, %v, %d segs; want %d, %d segs", tc.offset, got, err, len(l.segs()), tc.wantStart, tc.wantSegs)
		}
		if _, err := os.Stat(filepath.Join(l.Dir(), logStateFile)); err != nil {
			t.Fatal(err)
		}
		st, _ := readLogState(OSFS{}, l.Dir())
		if st.logStartOffset != tc.wantStart {
			t.Fatalf("persisted log start %d, want %d", st.logStartOffset, tc.wantStart)
		}
	}
	// Crash and reopen: the log start is kept.
	l.crash()
	l.reopen(false)
	if l.LogStartOffset() != 10 || l.LogEndOffset() != 10 {
		t.Fatalf("after reopen [%d,%d)", l.LogStartOffset(), l.LogEndOffset())
	}
}

func TestTruncateTo(t *testing.T) {
	one := int64(len(simple(t, 2, 0)))
	l := openTest(t, Config{SegmentBytes: 2 * one})
	for i := 0; i < 5; i++ { // batches at 0,2,4,6,8; segments [0-3], [4-7], [8-9]
		if _, err := l.Append(simple(t, 2, 0), AppendOptions{LeaderEpoch: int32(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.TruncateTo(5); err != nil { // inside batch 4-5: drop it
		t.Fatal(err)
	}
	if l.LogEndOffset() != 4 || len(l.segs()) != 2 || l.Size() != 2*one {
		t.Fatalf("after TruncateTo(5): end %d, %d segs, size %d", l.LogEndOffset(), len(l.segs()), l.Size())
	}
	if e := l.LatestEpoch(); e != 1 {
		t.Fatalf("latest epoch %d after truncation, want 1", e)
	}
	if info := l.mustAppend(simple(t, 1, 0)); info.BaseOffset != 4 {
		t.Fatalf("append after truncation at %d", info.BaseOffset)
	}
	if got := len(l.readAll(0)); got != 3 {
		t.Fatalf("read %d batches", got)
	}
	// Below the log start: empty log starting there.
	if _, err := l.DeleteRecordsBefore(2); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(1); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 1 || l.LogEndOffset() != 1 || l.Size() != 0 {
		t.Fatalf("after full truncation [%d,%d) size %d", l.LogStartOffset(), l.LogEndOffset(), l.Size())
	}
	if info := l.mustAppend(simple(t, 1, 0)); info.BaseOffset != 1 {
		t.Fatalf("append after full truncation at %d", info.BaseOffset)
	}
	l.Close()
	l.reopen(true)
	if l.LogStartOffset() != 1 || l.LogEndOffset() != 2 {
		t.Fatalf("reopened [%d,%d)", l.LogStartOffset(), l.LogEndOffset())
	}
}

// TestTruncateToLogEndDropsEmptyEpochs: a truncation at or past the log end removes no
// batch but forgets the epochs assigned at the log end without a batch in them (a
// replica that was leader for a moment and appended nothing), as Kafka's does, and
// the file says so after a reopen.
func TestTruncateToLogEndDropsEmptyEpochs(t *testing.T) {
	l := openTest(t, Config{})
	if _, err := l.Append(simple(t, 2, 0), AppendOptions{LeaderEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	if err := l.AssignLeaderEpoch(2); err != nil {
		t.Fatal(err)
	}
	if e, end := l.EndOffsetForEpoch(1); l.LatestEpoch() != 2 || e != 1 || end != 2 {
		t.Fatalf("latest epoch %d, epoch 1 ends at (%d, %d); want 2 and (1, 2)", l.LatestEpoch(), e, end)
	}
	for _, offset := range []int64{5, 2} {
		if err := l.TruncateTo(offset); err != nil {
			t.Fatal(err)
		}
		if got := l.EpochEntries(); len(got) != 1 || got[0] != (EpochEntry{Epoch: 1, StartOffset: 0}) || l.LogEndOffset() != 2 {
			t.Fatalf("after TruncateTo(%d): epochs %v, log end %d; want only epoch 1 from 0 and the batch kept", offset, got, l.LogEndOffset())
		}
	}
	l.Close()
	l.reopen(true)
	if got := l.EpochEntries(); len(got) != 1 || l.LatestEpoch() != 1 {
		t.Fatalf("reopened: epochs %v", got)
	}
}

func TestFollowerAppendKeepsOffsets(t *testing.T) {
	l := openTest(t, Config{})
	b := simple(t, 3, 0)
	copy(b, []byte{0, 0, 0, 0, 0, 0, 0, 10}) // base offset 10
	b[12], b[13], b[14], b[15] = 0, 0, 0, 7  // leader epoch 7
	info, err := l.Append(b, AppendOptions{Follower: true})
	if err != nil || info.BaseOffset != 10 || info.LastOffset != 12 {
		t.Fatalf("follower append: %+v %v", info, err)
	}
	if l.LatestEpoch() != 7 || l.LogEndOffset() != 13 {
		t.Fatalf("epoch %d end %d", l.LatestEpoch(), l.LogEndOffset())
	}
	if _, err := l.Append(b, AppendOptions{Follower: true}); err == nil {
		t.Fatal("follower append below the log end accepted")
	}
	// A batch far ahead (beyond what a relative index offset can hold) starts a segment.
	far := int64(1) << 33
	b2 := simple(t, 2, 0)
	record.SetBaseOffset(b2, far)
	if info, err := l.Append(b2, AppendOptions{Follower: true}); err != nil || info.BaseOffset != far {
		t.Fatalf("far follower append: %+v %v", info, err)
	}
	if segs := l.segs(); len(segs) != 2 || segs[1].base != far {
		t.Fatalf("no segment at %d", far)
	}
	for _, off := range []int64{10, 13, far + 1} {
		res, err := l.Read(off, 1<<20, math.MaxInt64, true)
		if err != nil || res.Size == 0 {
			t.Fatalf("Read(%d) across the gap: %+v %v", off, res, err)
		}
	}
	if res, _ := l.Read(13, 1<<20, math.MaxInt64, true); res.FirstBatchOffset != far {
		t.Fatalf("Read(13) starts at %d, want %d", res.FirstBatchOffset, far)
	}
}

func TestEndOffsetForEpoch(t *testing.T) {
	l := openTest(t, Config{})
	// epoch 1: offsets 0-1, epoch 3: 2-4, epoch 4: 5
	for _, e := range []int32{1, 1, 3, 3, 3, 4} {
		if _, err := l.Append(simple(t, 1, 0), AppendOptions{LeaderEpoch: e}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		epoch     int32
		wantEpoch int32
		wantEnd   int64
	}{
		{-1, -1, -1},
		{0, 0, 0},
		{1, 1, 2},
		{2, 1, 2},
		{3, 3, 5},
		{4, 4, 6},
		{5, -1, -1},
	}
	check := func(stage string) {
		for _, tc := range tests {
			e, end := l.EndOffsetForEpoch(tc.epoch)
			if e != tc.wantEpoch || end != tc.wantEnd {
				t.Errorf("%s: EndOffsetForEpoch(%d) = %d,%d want %d,%d", stage, tc.epoch, e, end, tc.wantEpoch, tc.wantEnd)
			}
		}
	}
	check("live")
	// New epochs reach the checkpoint with the next flush, not on the append path.
	if b, err := os.ReadFile(filepath.Join(l.Dir(), leaderEpochFile)); err == nil && len(b) > 0 && string(b) != "0\n0\n" {
		t.Fatalf("leader-epoch-checkpoint written before a flush: %q", b)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(l.Dir(), leaderEpochFile))
	if err != nil || string(b) != "0\n3\n1 0\n3 2\n4 5\n" {
		t.Fatalf("leader-epoch-checkpoint = %q, %v", b, err)
	}
	l.Close()
	l.reopen(true)
	check("reopened")
	// DeleteRecords moves the first epoch's start.
	if _, err := l.DeleteRecordsBefore(3); err != nil {
		t.Fatal(err)
	}
	if got := l.EpochEntries(); len(got) != 2 || got[0] != (EpochEntry{3, 3}) {
		t.Fatalf("entries after DeleteRecords: %v", got)
	}
}

// TestRetentionZero: retention.ms=0 and retention.bytes=0 are valid Kafka settings
// that keep nothing (Kafka's UnifiedLog.deleteRetentionMsBreachedSegments and
// deleteRetentionSizeBreachedSegments): every segment goes, the active one rolled
// first. A Config field's zero value means Kafka's default, so the broker passes them
// as RetainNothing.
func TestRetentionZero(t *testing.T) {
	one := int64(len(simple(t, 1, 0)))
	for _, cfg := range []Config{
		{RetentionMs: RetainNothing, RetentionBytes: -1},
		{RetentionMs: -1, RetentionBytes: RetainNothing},
	} {
		cfg.SegmentBytes, cfg.DeleteRetention = 2*one, true
		l := openTest(t, cfg)
		for range 5 {
			l.mustAppend(simple(t, 1, t0.UnixMilli()))
		}
		n, err := l.EnforceRetention(t0.Add(time.Millisecond))
		if err != nil || n != 3 || l.LogStartOffset() != 5 || l.Size() != 0 {
			t.Fatalf("retention.ms %d, retention.bytes %d: deleted %d (err %v), log start %d, size %d; want 3, 5, 0",
				cfg.RetentionMs, cfg.RetentionBytes, n, err, l.LogStartOffset(), l.Size())
		}
	}
}

// TestRetentionBelowHighWatermark: only segments wholly below the high watermark go,
// by time and by size (Kafka's UnifiedLog.deletableSegments).
func TestRetentionBelowHighWatermark(t *testing.T) {
	one := int64(len(simple(t, 1, 0)))
	for _, cfg := range []Config{{RetentionMs: 1000, RetentionBytes: -1}, {RetentionMs: -1, RetentionBytes: RetainNothing}} {
		cfg.SegmentBytes, cfg.DeleteRetention = 2*one, true
		l := openTest(t, cfg)
		for range 5 { // segments [0,1], [2,3], [4]
			l.mustAppend(simple(t, 1, t0.UnixMilli()))
		}
		if n, err := l.EnforceRetentionBelow(t0.Add(time.Hour), 3); err != nil || n != 1 || l.LogStartOffset() != 2 {
			t.Fatalf("%+v: deleted %d (err %v), log start %d; want 1, 2", cfg, n, err, l.LogStartOffset())
		}
		if n, err := l.EnforceRetentionBelow(t0.Add(time.Hour), 5); err != nil || n != 2 || l.LogStartOffset() != 5 {
			t.Fatalf("%+v: deleted %d (err %v), log start %d; want 2, 5", cfg, n, err, l.LogStartOffset())
		}
	}
}
