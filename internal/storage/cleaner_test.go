package storage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/record"
)

func compactConfig() Config {
	return Config{Compact: true, SegmentBytes: 4096, FileDeleteDelayMs: 0}
}

// TestCleanerKeepsLatestValuePerKey: many updates to few keys; after one cleaning
// every key's latest value is there at its original offset, earlier ones are gone,
// the active segment is untouched, the log shrank, and a reopen (clean or after a
// crash) reads the same.
func TestCleanerKeepsLatestValuePerKey(t *testing.T) {
	tl := openTest(t, compactConfig())
	writeUpdates(tl, 1, 8, 2000, 10, tl.plainOpts)
	before := tl.readRecords()
	sizeBefore := tl.Size()
	activeBase := tl.active().base
	if len(tl.segs()) < 10 {
		t.Fatalf("only %d segments", len(tl.segs()))
	}

	c := newTestCleaner(tl)
	if n := cleanOnce(t, c); n != 1 {
		t.Fatalf("cleaned %d logs, want 1", n)
	}
	after := tl.readRecords()
	checkCompacted(t, before, after, activeBase)
	if tl.Size() >= sizeBefore/4 {
		t.Fatalf("size %d, was %d: not shrunk", tl.Size(), sizeBefore)
	}
	if got := tl.active().base; got != activeBase {
		t.Fatalf("active segment base %d, was %d", got, activeBase)
	}
	if tl.LogStartOffset() != 0 || tl.LogEndOffset() != 2000 {
		t.Fatalf("log [%d, %d), want [0, 2000)", tl.LogStartOffset(), tl.LogEndOffset())
	}
	if got := c.FirstDirtyOffset(tl.Log); got != activeBase {
		t.Fatalf("first dirty offset %d, want %d", got, activeBase)
	}
	// Reads starting inside a gap get the next surviving batch.
	for _, off := range []int64{0, 1, 500, activeBase - 1} {
		res, err := tl.Read(off, 1<<20, math.MaxInt64, true)
		if err != nil || res.FirstBatchOffset < 0 {
			t.Fatalf("Read(%d): %+v %v", off, res, err)
		}
	}
	// Nothing more to do right away.
	if n := cleanOnce(t, c); n != 0 {
		t.Fatalf("second pass cleaned %d logs", n)
	}
	for _, clean := range []bool{true, false} {
		if clean {
			if err := tl.Close(); err != nil {
				t.Fatal(err)
			}
		} else {
			tl.crash()
		}
		tl.reopen(clean)
		checkCompacted(t, before, tl.readRecords(), activeBase)
		if tl.LogEndOffset() != 2000 {
			t.Fatalf("log end %d after reopen", tl.LogEndOffset())
		}
	}
	assertNoCleanerFiles(t, tl.Log.dir)
}

func assertNoCleanerFiles(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), cleanedSuffix) || strings.HasSuffix(e.Name(), swapSuffix) {
			t.Fatalf("leftover %s", e.Name())
		}
	}
}

// TestCleanerRecompressesWithSameCodec: compressed batches are decompressed, filtered
// and written back with their codec.
func TestCleanerRecompressesWithSameCodec(t *testing.T) {
	for _, codec := range []record.Compression{record.CompressionGzip, record.CompressionSnappy, record.CompressionLZ4, record.CompressionZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			tl := openTest(t, compactConfig())
			opts := func() record.BuildOptions {
				o := tl.plainOpts()
				o.Compression = codec
				return o
			}
			writeUpdates(tl, 2, 5, 600, 20, opts)
			before := tl.readRecords()
			activeBase := tl.active().base
			cleanOnce(t, newTestCleaner(tl))
			after := tl.readRecords()
			checkCompacted(t, before, after, activeBase)
			if len(after) >= len(before)/2 {
				t.Fatalf("%d records left of %d", len(after), len(before))
			}
			rewritten := 0
			for _, r := range after {
				if got := r.batch.Compression(); got != codec {
					t.Fatalf("batch at %d compressed with %s, want %s", r.batch.BaseOffset, got, codec)
				}
				if r.batch.NumRecords < 20 {
					rewritten++
				}
			}
			if rewritten == 0 {
				t.Fatal("no batch was rewritten")
			}
		})
	}
}

// TestCleanerTombstones: a tombstone removes the key's earlier values at once and is
// itself kept for delete.retention.ms after the cleaning that first saw it, then
// removed.
func TestCleanerTombstones(t *testing.T) {
	cfg := compactConfig()
	cfg.DeleteRetentionMs = time.Hour.Milliseconds()
	tl := openTest(t, cfg)
	tl.mustAppend(kvBatch(t, tl.plainOpts(), kv{k: "a", v: "1"}, kv{k: "b", v: "1"}))
	tl.mustAppend(kvBatch(t, tl.plainOpts(), kv{k: "a", del: true}, kv{k: "c", v: "1"}))
	tl.mustAppend(kvBatch(t, tl.plainOpts(), kv{k: "c", v: "2"}, kv{k: "b", del: true}, kv{k: "b", v: "2"}))
	forceRoll(tl)
	c := newTestCleaner(tl)
	if n := cleanOnce(t, c); n != 1 {
		t.Fatalf("cleaned %d", n)
	}
	want := []string{"a=<nil>@2", "c=2@4", "b=2@6"}
	if got := describe(tl.readRecords()); !equalStrings(got, want) {
		t.Fatalf("after first cleaning %v, want %v", got, want)
	}
	for _, r := range tl.readRecords() {
		if r.del && r.batch.Attributes&record.AttrDeleteHorizon == 0 {
			t.Fatalf("tombstone batch at %d has no delete horizon", r.batch.BaseOffset)
		}
		if r.del && r.batch.BaseTimestamp != t0.UnixMilli()+time.Hour.Milliseconds() {
			t.Fatalf("delete horizon %d", r.batch.BaseTimestamp)
		}
	}

	// A restart forgets nothing: the new cleaner finds the horizon in the batches.
	if err := tl.Close(); err != nil {
		t.Fatal(err)
	}
	tl.reopen(true)
	c = newTestCleaner(tl)

	tl.clock.Advance(time.Hour - time.Millisecond)
	if n := cleanOnce(t, c); n != 0 {
		t.Fatalf("cleaned %d logs before the delete horizon", n)
	}
	tl.clock.Advance(time.Millisecond)
	if n := cleanOnce(t, c); n != 1 {
		t.Fatalf("cleaned %d logs at the delete horizon, want 1", n)
	}
	want = []string{"c=2@4", "b=2@6"}
	if got := describe(tl.readRecords()); !equalStrings(got, want) {
		t.Fatalf("after the horizon %v, want %v", got, want)
	}
	if tl.LogEndOffset() != 7 {
		t.Fatalf("log end %d", tl.LogEndOffset())
	}
}

// forceRoll rolls the active segment, leaving everything before it cleanable.
func forceRoll(tl *testLog) {
	tl.t.Helper()
	segs := tl.segs()
	if err := tl.Log.rollAt(); err != nil {
		tl.t.Fatal(err)
	}
	if len(tl.segs()) != len(segs)+1 {
		tl.t.Fatal("did not roll")
	}
}

// rollAt rolls the active segment now (test helper).
func (l *Log) rollAt() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rollLocked(l.clock.Now(), l.logEnd.Load())
}

func describe(recs []kvRecord) []string {
	var out []string
	for _, r := range recs {
		v := r.value
		if r.del {
			v = "<nil>"
		}
		out = append(out, r.key+"="+v+"@"+itoa(r.offset))
	}
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestCleanerLeavesActiveSegment: a log with only an active segment is never touched.
func TestCleanerLeavesActiveSegment(t *testing.T) {
	cfg := compactConfig()
	cfg.SegmentBytes = 1 << 20
	tl := openTest(t, cfg)
	writeUpdates(tl, 3, 2, 200, 10, tl.plainOpts)
	before := tl.readRecords()
	if n := cleanOnce(t, newTestCleaner(tl)); n != 0 {
		t.Fatalf("cleaned %d logs", n)
	}
	if got := tl.readRecords(); len(got) != len(before) {
		t.Fatalf("%d records, want %d", len(got), len(before))
	}
}

// TestCleanerMinCompactionLag: records younger than min.compaction.lag.ms stay until
// they are old enough.
func TestCleanerMinCompactionLag(t *testing.T) {
	cfg := compactConfig()
	cfg.MinCompactionLagMs = time.Hour.Milliseconds()
	tl := openTest(t, cfg)
	writeUpdates(tl, 4, 4, 500, 10, tl.plainOpts)
	before := tl.readRecords()
	activeBase := tl.active().base
	c := newTestCleaner(tl)
	if n := cleanOnce(t, c); n != 0 {
		t.Fatalf("cleaned %d logs within min.compaction.lag.ms", n)
	}
	tl.clock.Advance(30 * time.Minute)
	writeUpdates(tl, 5, 4, 500, 10, tl.plainOpts) // younger segments
	tl.clock.Advance(31 * time.Minute)
	// The first 500 records are now old enough, the next 500 are not.
	if n := cleanOnce(t, c); n != 1 {
		t.Fatalf("cleaned %d logs, want 1", n)
	}
	after := tl.readRecords()
	first := c.FirstDirtyOffset(tl.Log)
	if first < activeBase || first > 500 {
		t.Fatalf("cleaned up to %d; the old records end at %d", first, activeBase)
	}
	var young int
	for _, r := range after {
		if r.offset >= first {
			young++
		}
	}
	if young != int(tl.LogEndOffset()-first) {
		t.Fatalf("%d records at or above %d, want all %d", young, first, tl.LogEndOffset()-first)
	}
	if len(after) >= len(before)+500 {
		t.Fatal("nothing was cleaned")
	}
}

// TestCleanerDirtyRatioAndMaxLag: a log below min.cleanable.dirty.ratio waits, unless
// its dirty records are older than max.compaction.lag.ms.
func TestCleanerDirtyRatioAndMaxLag(t *testing.T) {
	cfg := compactConfig()
	cfg.MinCleanableDirtyRatio = 0.9
	tl := openTest(t, cfg)
	// Many distinct keys: cleaning keeps nearly everything, so the clean part is large.
	writeUpdates(tl, 6, 100000, 600, 10, tl.plainOpts)
	c := newTestCleaner(tl)
	if n := cleanOnce(t, c); n != 1 {
		t.Fatalf("first cleaning: %d", n)
	}
	writeUpdates(tl, 7, 100000, 150, 10, tl.plainOpts)
	if n := cleanOnce(t, c); n != 0 {
		t.Fatalf("cleaned %d logs below the dirty ratio", n)
	}
	cfg.MaxCompactionLagMs = time.Minute.Milliseconds()
	tl.UpdateConfig(cfg)
	if n := cleanOnce(t, c); n != 0 {
		t.Fatalf("cleaned %d logs before max.compaction.lag.ms", n)
	}
	tl.clock.Advance(2 * time.Minute)
	if n := cleanOnce(t, c); n != 1 {
		t.Fatalf("cleaned %d logs after max.compaction.lag.ms, want 1", n)
	}
}

// TestCleanerKeepsProducerState: an idempotent producer whose records are all
// superseded keeps its last batch (empty), so its sequence state survives a reload
// from the log alone.
func TestCleanerKeepsProducerState(t *testing.T) {
	tl := openTest(t, compactConfig())
	idem := func(seq int32) record.BuildOptions {
		o := tl.plainOpts()
		o.ProducerID, o.ProducerEpoch, o.BaseSequence = 7, 2, seq
		return o
	}
	tl.mustAppend(kvBatch(t, idem(0), kv{k: "a", v: "1"}, kv{k: "b", v: "1"}))
	tl.mustAppend(kvBatch(t, idem(2), kv{k: "a", v: "2"}, kv{k: "b", v: "2"}, kv{k: "c", v: "2"}))
	// Producer 8's only batch loses its last two records: its last offset delta (and
	// so its last sequence) stays.
	other := tl.plainOpts()
	other.ProducerID, other.ProducerEpoch, other.BaseSequence = 8, 0, 0
	tl.mustAppend(kvBatch(t, other, kv{k: "x", v: "1"}, kv{k: "a", v: "8"}, kv{k: "b", v: "8"}))
	tl.mustAppend(kvBatch(t, tl.plainOpts(), kv{k: "a", v: "3"}, kv{k: "b", v: "3"}, kv{k: "c", v: "3"}))
	forceRoll(tl)
	cleanOnce(t, newTestCleaner(tl))
	batches := tl.readAll(0)
	if len(batches) != 3 {
		t.Fatalf("%d batches, want producer 7's last (empty), producer 8's and the plain one", len(batches))
	}
	if h := batches[0]; h.ProducerID != 7 || h.BaseOffset != 2 || h.LastOffsetDelta != 2 || h.NumRecords != 0 || h.BaseSequence != 2 {
		t.Fatalf("kept producer batch %+v", h)
	}
	if h := batches[1]; h.ProducerID != 8 || h.BaseOffset != 5 || h.LastOffsetDelta != 2 || h.NumRecords != 1 || h.BaseSequence != 0 {
		t.Fatalf("filtered producer batch %+v", h)
	}
	// Reload producer state from the log alone.
	if err := tl.Close(); err != nil {
		t.Fatal(err)
	}
	snaps, _ := filepath.Glob(filepath.Join(tl.Log.dir, "*"+snapshotSuffix))
	for _, s := range snaps {
		os.Remove(s)
	}
	tl.reopen(false)
	ps := tl.Producers()
	if len(ps) != 2 || ps[0].ProducerID != 7 || ps[0].LastSequence != 4 || ps[0].Epoch != 2 ||
		ps[1].ProducerID != 8 || ps[1].LastSequence != 2 {
		t.Fatalf("producers %+v", ps)
	}
	if _, err := tl.Append(kvBatch(t, idem(5), kv{k: "d", v: "1"}), AppendOptions{LeaderEpoch: 1}); err != nil {
		t.Fatalf("next sequence after reload: %v", err)
	}
	other.BaseSequence = 3
	if _, err := tl.Append(kvBatch(t, other, kv{k: "d", v: "2"}), AppendOptions{LeaderEpoch: 1}); err != nil {
		t.Fatalf("next sequence of producer 8 after reload: %v", err)
	}
}

// TestCleanerTransactions: as Kafka's cleaner does, an aborted transaction's records
// go (they never shadow committed ones), a marker stays while a batch of its
// transaction is left, then gets a delete horizon and goes after it with its
// transaction index entry; nothing from an open transaction on is cleaned.
func TestCleanerTransactions(t *testing.T) {
	cfg := compactConfig()
	cfg.DeleteRetentionMs = time.Hour.Milliseconds()
	cfg.MinCleanableDirtyRatio = 0.01
	tl := openTest(t, cfg)
	txn := func(pid int64, seq int32) record.BuildOptions {
		o := tl.plainOpts()
		o.ProducerID, o.ProducerEpoch, o.BaseSequence, o.Transactional = pid, 0, seq, true
		return o
	}
	marker := func(pid int64, typ record.ControlType) []byte {
		o := tl.plainOpts()
		o.ProducerID, o.ProducerEpoch, o.Transactional, o.Control = pid, 0, true, true
		b, err := record.Build(o, []record.Record{record.ControlRecord{Type: typ}.Record()})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	const (
		commitMark = "\x00\x00\x00\x01=\x00\x00\x00\x00\x00\x00"
		abortMark  = "\x00\x00\x00\x00=\x00\x00\x00\x00\x00\x00"
	)
	tl.mustAppend(kvBatch(t, txn(9, 0), kv{k: "a", v: "committed"})) // 0
	tl.mustAppend(marker(9, record.ControlCommit))                   // 1
	tl.mustAppend(kvBatch(t, txn(9, 1), kv{k: "a", v: "aborted"}))   // 2
	tl.mustAppend(marker(9, record.ControlAbort))                    // 3
	tl.mustAppend(kvBatch(t, tl.plainOpts(), kv{k: "b", v: "old"}))  // 4
	tl.mustAppend(kvBatch(t, txn(9, 2), kv{k: "b", v: "committed"})) // 5
	tl.mustAppend(marker(9, record.ControlCommit))                   // 6
	forceRoll(tl)
	tl.mustAppend(kvBatch(t, txn(10, 0), kv{k: "c", v: "open"})) // 7, open transaction
	forceRoll(tl)
	tl.mustAppend(kvBatch(t, tl.plainOpts(), kv{k: "c", v: "plain"})) // 8
	forceRoll(tl)
	if got := tl.AbortedTransactions(0, 9, nil); len(got) != 1 || got[0].FirstOffset != 2 || got[0].LastOffset != 3 {
		t.Fatalf("aborted transactions before cleaning: %+v", got)
	}
	expect := func(when string, want ...string) {
		t.Helper()
		if got := describe(tl.readRecords()); !equalStrings(got, want) {
			t.Fatalf("%s\n%q\nwant\n%q", when, got, want)
		}
	}
	cleanOnce(t, newTestCleaner(tl))
	expect("after cleaning", "a=committed@0", commitMark+"@1", abortMark+"@3", "b=committed@5", commitMark+"@6", "c=open@7", "c=plain@8")
	if got := tl.AbortedTransactions(0, 9, nil); len(got) != 1 || got[0].LastOffset != 3 {
		t.Fatalf("aborted transactions after cleaning: %+v", got)
	}

	// Close the open transaction and dirty the log: the abort marker has no batch left,
	// so it gets a delete horizon; it goes with its index entry once that passed. The
	// commit markers stay: their transactions' records are still there.
	tl.mustAppend(marker(10, record.ControlCommit))                   // 9
	tl.mustAppend(kvBatch(t, tl.plainOpts(), kv{k: "d", v: "plain"})) // 10
	forceRoll(tl)
	c := newTestCleaner(tl)
	if n := cleanOnce(t, c); n != 1 {
		t.Fatalf("second cleaning cleaned %d logs", n)
	}
	expect("after the second cleaning", "a=committed@0", commitMark+"@1", abortMark+"@3", "b=committed@5", commitMark+"@6",
		"c=plain@8", commitMark+"@9", "d=plain@10")
	tl.clock.Advance(time.Hour + time.Millisecond)
	if n := cleanOnce(t, c); n != 1 {
		t.Fatalf("cleaning after the horizon cleaned %d logs", n)
	}
	expect("after the delete horizon", "a=committed@0", commitMark+"@1", "b=committed@5", commitMark+"@6",
		"c=plain@8", commitMark+"@9", "d=plain@10")
	if got := tl.AbortedTransactions(0, 11, nil); len(got) != 0 {
		t.Fatalf("aborted transactions after the marker went: %+v", got)
	}
}

// TestCleanerCheckpointSurvivesRestart: the "cleaned up to" offset is persisted, so a
// new cleaner does not redo a clean log.
func TestCleanerCheckpointSurvivesRestart(t *testing.T) {
	tl := openTest(t, compactConfig())
	writeUpdates(tl, 8, 4, 400, 10, tl.plainOpts)
	c := newTestCleaner(tl)
	cleanOnce(t, c)
	first := c.FirstDirtyOffset(tl.Log)
	if first == 0 {
		t.Fatal("nothing cleaned")
	}
	b, err := os.ReadFile(filepath.Join(tl.dir, cleanerCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	if want := "0\n1\norders 3 " + itoa(first) + "\n"; string(b) != want {
		t.Fatalf("checkpoint %q, want %q", b, want)
	}
	if err := tl.Close(); err != nil {
		t.Fatal(err)
	}
	tl.reopen(true)
	c2 := newTestCleaner(tl)
	if got := c2.FirstDirtyOffset(tl.Log); got != first {
		t.Fatalf("first dirty after restart %d, want %d", got, first)
	}
	if n := cleanOnce(t, c2); n != 0 {
		t.Fatalf("restarted cleaner cleaned %d logs", n)
	}
}

// TestCleanerReadersKeepReplacedSegments: ranges handed out before a cleaning stay
// readable until file.delete.delay.ms.
func TestCleanerReadersKeepReplacedSegments(t *testing.T) {
	cfg := compactConfig()
	cfg.FileDeleteDelayMs = 60000
	tl := openTest(t, cfg)
	writeUpdates(tl, 9, 3, 300, 10, tl.plainOpts)
	res, err := tl.Read(0, 1<<20, math.MaxInt64, true)
	if err != nil {
		t.Fatal(err)
	}
	want := make([][]byte, len(res.Ranges))
	for i, r := range res.Ranges {
		want[i] = make([]byte, r.Len)
		if _, err := r.File.ReadAt(want[i], r.Pos); err != nil {
			t.Fatal(err)
		}
	}
	cleanOnce(t, newTestCleaner(tl))
	for i, r := range res.Ranges {
		got := make([]byte, r.Len)
		if _, err := r.File.ReadAt(got, r.Pos); err != nil {
			t.Fatalf("range %d after cleaning: %v", i, err)
		}
		if string(got) != string(want[i]) {
			t.Fatalf("range %d changed", i)
		}
	}
	tl.clock.Advance(time.Minute)
	if _, err := res.Ranges[0].File.ReadAt(make([]byte, 1), res.Ranges[0].Pos); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("old segment still open after file.delete.delay.ms: %v", err)
	}
	matches, _ := filepath.Glob(filepath.Join(tl.Log.dir, "*"+deletedSuffix))
	if len(matches) != 0 {
		t.Fatalf("left %v", matches)
	}
}

// TestCleanerRun: the background loop cleans a dirty log and stops with its context.
func TestCleanerRun(t *testing.T) {
	tl := openTest(t, compactConfig())
	writeUpdates(tl, 10, 3, 500, 10, tl.plainOpts)
	size := tl.Size()
	c := NewCleaner(CleanerOptions{Threads: 2, Clock: tl.clock, Logger: testLogger(t)}, func() []*Log { return []*Log{tl.Log} })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		c.Run(ctx)
		close(done)
	}()
	waitFor(t, "cleaning", func() bool { return tl.Size() < size/2 })
	cancel()
	<-done
}

// TestCleanerSkipsNonCompacted: cleanup.policy=delete logs are left alone.
func TestCleanerSkipsNonCompacted(t *testing.T) {
	cfg := compactConfig()
	cfg.Compact = false
	tl := openTest(t, cfg)
	writeUpdates(tl, 11, 3, 500, 10, tl.plainOpts)
	if n := cleanOnce(t, newTestCleaner(tl)); n != 0 {
		t.Fatalf("cleaned %d logs", n)
	}
}

// TestCleanerDedupeBufferLimit: a small offset map cleans the log in several passes
// that each cover whole segments; the result is the same.
func TestCleanerDedupeBufferLimit(t *testing.T) {
	tl := openTest(t, compactConfig())
	writeUpdates(tl, 12, 300, 1500, 10, tl.plainOpts)
	before := tl.readRecords()
	activeBase := tl.active().base
	c := NewCleaner(CleanerOptions{Clock: tl.clock, Logger: testLogger(t), DedupeBufferSize: 100 * dedupeBytesPerEntry},
		func() []*Log { return []*Log{tl.Log} })
	for pass := 0; c.FirstDirtyOffset(tl.Log) < activeBase; pass++ {
		if pass > 50 {
			t.Fatal("no progress")
		}
		prev := c.FirstDirtyOffset(tl.Log)
		if _, err := c.CleanOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		if c.FirstDirtyOffset(tl.Log) <= prev {
			// The ratio may fall below 0.5; force the rest.
			cfg := tl.config()
			cfg.MinCleanableDirtyRatio = 0.0001
			tl.UpdateConfig(cfg)
		}
	}
	after := tl.readRecords()
	for k, want := range latestByKey(before) {
		if got := latestByKey(after)[k]; got.offset != want.offset {
			t.Fatalf("key %s at %d, want %d", k, got.offset, want.offset)
		}
	}
}

// TestThrottler: the pause keeps bytes at or below the rate.
func TestThrottler(t *testing.T) {
	tests := []struct {
		name  string
		steps []struct {
			at    time.Duration
			bytes int
			pause time.Duration
		}
	}{
		{"under the rate", []struct {
			at    time.Duration
			bytes int
			pause time.Duration
		}{{0, 5, 0}, {time.Second, 900, 0}, {2 * time.Second, 900, 0}, {3 * time.Second, 1000, 0}}},
		{"burst", []struct {
			at    time.Duration
			bytes int
			pause time.Duration
		}{{0, 1000, time.Second}, {time.Second, 500, 500 * time.Millisecond}}},
		{"small excess carried", []struct {
			at    time.Duration
			bytes int
			pause time.Duration
		}{{0, 5, 0}, {0, 4, 0}, {0, 1000, 1009 * time.Millisecond}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			th := &throttler{rate: 1000}
			for i, s := range tt.steps {
				if got := th.record(t0.Add(s.at), s.bytes); got != s.pause {
					t.Fatalf("step %d: pause %v, want %v", i, got, s.pause)
				}
			}
		})
	}
	if (&throttler{}).record(t0, 1<<30) != 0 {
		t.Fatal("unlimited throttler paused")
	}
}

// TestCompactionConfig: defaults and validation of the compaction fields.
func TestCompactionConfig(t *testing.T) {
	d := Config{}.withDefaults()
	if d.DeleteRetentionMs != 86400000 || d.MinCompactionLagMs != 0 || d.MaxCompactionLagMs != math.MaxInt64 || d.MinCleanableDirtyRatio != 0.5 {
		t.Fatalf("defaults %+v", d)
	}
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{MinCleanableDirtyRatio: 1.5}, "min.cleanable.dirty.ratio"},
		{Config{DeleteRetentionMs: -1}, "delete.retention.ms"},
		{Config{MinCompactionLagMs: -1}, "min.compaction.lag.ms"},
		{Config{MinCompactionLagMs: 10, MaxCompactionLagMs: 5}, "must not exceed max.compaction.lag.ms"},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.cfg, err, tt.want)
		}
	}
}

// TestCleanerConcurrentWithAppendsAndReads: cleanings run while a producer appends
// (rolling segments) and a consumer reads from the start; reads never fail or go
// backwards and, at the end, every key's latest value is there.
func TestCleanerConcurrentWithAppendsAndReads(t *testing.T) {
	cfg := compactConfig()
	cfg.FileDeleteDelayMs = 1 // removal on the next clock advance, after readers moved on
	tl := openTest(t, cfg)
	c := newTestCleaner(tl)
	stop := make(chan struct{})
	readErr := make(chan error, 1)
	go func() {
		defer close(readErr)
		for {
			select {
			case <-stop:
				return
			default:
			}
			from := tl.LogStartOffset()
			for from < tl.LogEndOffset() {
				b, err := tl.ReadBytes(from, 64<<10, math.MaxInt64)
				if err != nil {
					readErr <- err
					return
				}
				for len(b) > 0 {
					h, err := record.ParseHeader(b)
					if err != nil || h.LastOffset() < from {
						readErr <- fmt.Errorf("batch at %d read from %d: %v", h.BaseOffset, from, err)
						return
					}
					from = h.LastOffset() + 1
					b = b[h.Size():]
				}
			}
		}
	}()
	// The producer appends while the cleaner runs.
	latest := map[string]int64{}
	appendErr := make(chan error, 1)
	go func() {
		defer close(appendErr)
		rng := rand.New(rand.NewSource(30))
		for n := 0; n < 2400; n += 10 {
			var pairs []kv
			for i := 0; i < 10; i++ {
				pairs = append(pairs, kv{k: fmt.Sprintf("key-%d", rng.Intn(20)), v: pad})
			}
			b, err := record.Build(tl.plainOpts(), kvRecords(pairs))
			if err != nil {
				appendErr <- err
				return
			}
			info, err := tl.Append(b, AppendOptions{LeaderEpoch: 1})
			if err != nil {
				appendErr <- err
				return
			}
			for i, p := range pairs {
				latest[p.k] = info.BaseOffset + int64(i)
			}
		}
	}()
	for appending := true; appending; {
		select {
		case err := <-appendErr:
			if err != nil {
				t.Fatal(err)
			}
			appending = false
		default:
		}
		if _, err := c.CleanOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-readErr; err != nil {
		t.Fatal(err)
	}
	got := latestByKey(tl.readRecords())
	for k, off := range latest {
		if got[k].offset != off {
			t.Fatalf("key %s latest at %d, want %d", k, got[k].offset, off)
		}
	}
	tl.clock.Advance(time.Second)
}

// TestCleanerRandomHistory drives a log through random appends (keys, tombstones,
// codecs, an idempotent producer), rolls, clock advances, cleanings and reopens, and
// checks after each cleaning that every record is the one written at its offset, each
// key's latest value is there (or, for a deleted key, nothing of it is), and below the
// cleaned point each key appears at most once.
func TestCleanerRandomHistory(t *testing.T) {
	cfg := compactConfig()
	cfg.SegmentBytes = 2048
	cfg.DeleteRetentionMs = (3 * time.Minute).Milliseconds()
	tl := openTest(t, cfg)
	c := newTestCleaner(tl)
	rng := rand.New(rand.NewSource(99))
	written := map[int64]kv{}
	latest := map[string]int64{}
	codecs := []record.Compression{record.CompressionNone, record.CompressionNone, record.CompressionZstd, record.CompressionLZ4}
	var seq int32
	for round := 0; round < 90; round++ {
		for b := 0; b < 1+rng.Intn(8); b++ {
			opts := tl.plainOpts()
			opts.Compression = codecs[rng.Intn(len(codecs))]
			var pairs []kv
			for i := 0; i < 1+rng.Intn(5); i++ {
				p := kv{k: fmt.Sprintf("k%d", rng.Intn(15)), v: fmt.Sprintf("r%d-%s", round, pad)}
				p.del = rng.Intn(5) == 0
				pairs = append(pairs, p)
			}
			if rng.Intn(3) == 0 {
				opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 5, 0, seq
				seq += int32(len(pairs))
			}
			info := tl.mustAppend(kvBatch(t, opts, pairs...))
			for i, p := range pairs {
				written[info.BaseOffset+int64(i)] = p
				latest[p.k] = info.BaseOffset + int64(i)
			}
		}
		switch rng.Intn(6) {
		case 0:
			forceRoll(tl)
		case 1:
			tl.clock.Advance(time.Duration(rng.Intn(6)) * time.Minute)
		case 2:
			if err := tl.Close(); err != nil {
				t.Fatal(err)
			}
			tl.reopen(true)
		case 3:
			abandon(tl.Log)
			tl.reopen(false)
		}
		if round%3 != 2 {
			continue
		}
		cleanOnce(t, c)
		recs := tl.readRecords()
		present := map[string]bool{}
		seen := map[string]bool{}
		cleanedTo := c.FirstDirtyOffset(tl.Log)
		for _, r := range recs {
			w, ok := written[r.offset]
			if !ok || w.k != r.key || w.del != r.del || (!r.del && w.v != r.value) {
				t.Fatalf("round %d: record at %d is %+v, written %+v", round, r.offset, r, w)
			}
			present[r.key] = true
			if r.offset < cleanedTo {
				if seen[r.key] {
					t.Fatalf("round %d: key %s twice below the cleaned point %d", round, r.key, cleanedTo)
				}
				seen[r.key] = true
			}
		}
		byKey := latestByKey(recs)
		for k, off := range latest {
			got, ok := byKey[k]
			switch {
			case ok && got.offset == off:
			case !ok && written[off].del:
				// A deleted key whose tombstone expired: nothing of it may be left.
			default:
				t.Fatalf("round %d: key %s: latest written at %d (%+v), log has %+v", round, k, off, written[off], got)
			}
		}
	}
	// Finally every tombstone gets a horizon, then expires: deleted keys are gone,
	// the others hold their latest value.
	forceRoll(tl)
	cleanOnce(t, c)
	tl.clock.Advance(4 * time.Minute)
	if n := cleanOnce(t, c); n != 1 {
		t.Fatalf("final cleaning after the horizon: %d", n)
	}
	byKey := latestByKey(tl.readRecords())
	deleted := 0
	for k, off := range latest {
		got, ok := byKey[k]
		if written[off].del {
			deleted++
			if ok {
				t.Fatalf("deleted key %s still has %+v", k, got)
			}
		} else if !ok || got.offset != off {
			t.Fatalf("key %s: %+v, want offset %d", k, got, off)
		}
	}
	if deleted == 0 {
		t.Fatal("no key ended deleted; the history does not exercise tombstone expiry")
	}
}

// TestCleanerMaxCleanableOffset: nothing in a segment reaching the bound the broker
// gives (high watermark) is cleaned.
func TestCleanerMaxCleanableOffset(t *testing.T) {
	tl := openTest(t, compactConfig())
	writeUpdates(tl, 13, 5, 1000, 10, tl.plainOpts)
	before := tl.readRecords()
	c := NewCleaner(CleanerOptions{Clock: tl.clock, Logger: testLogger(t),
		MaxCleanableOffset: func(*Log) int64 { return 500 }}, func() []*Log { return []*Log{tl.Log} })
	if n := cleanOnce(t, c); n != 1 {
		t.Fatalf("cleaned %d", n)
	}
	first := c.FirstDirtyOffset(tl.Log)
	if first > 500 || first == 0 {
		t.Fatalf("cleaned up to %d with bound 500", first)
	}
	checkCompacted(t, before, tl.readRecords(), first)
}

// TestGroupSegments: groups fit segment.bytes and 32-bit relative offsets.
func TestGroupSegments(t *testing.T) {
	mk := func(base, size int64) *segment {
		s := &segment{base: base}
		s.size.Store(size)
		return s
	}
	tests := []struct {
		name    string
		segs    []*segment
		end     int64
		maxSize int64
		want    []int // group lengths
	}{
		{"all fit", []*segment{mk(0, 10), mk(10, 10), mk(20, 10)}, 30, 100, []int{3}},
		{"by size", []*segment{mk(0, 60), mk(10, 30), mk(20, 30), mk(30, 50)}, 40, 100, []int{2, 2}},
		{"big segment alone", []*segment{mk(0, 200), mk(10, 10)}, 20, 100, []int{1, 1}},
		{"offset range", []*segment{mk(0, 1), mk(1<<30, 1), mk(1<<31, 1)}, 1<<31 + 5, 100, []int{2, 1}},
		{"last bounded by end", []*segment{mk(0, 1), mk(10, 1)}, math.MaxInt32 + 2, 100, []int{1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int
			for _, g := range groupSegments(tt.segs, tt.end, tt.maxSize) {
				got = append(got, len(g))
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("groups %v, want %v", got, tt.want)
			}
		})
	}
}

// TestCleanerTxnTombstoneWithMarkerInLaterSegment: a committed transaction deletes a
// key and its commit marker lands in the next segment (still active when the data's
// segment is cleaned). The transaction's records count in the offset map as soon as
// they are below the last stable offset (Kafka: a batch not in the aborted list is
// committed), so the older value goes; it must not come back once the tombstone's
// delete horizon passed.
func TestCleanerTxnTombstoneWithMarkerInLaterSegment(t *testing.T) {
	cfg := compactConfig()
	cfg.DeleteRetentionMs = time.Hour.Milliseconds()
	cfg.MinCleanableDirtyRatio = 0.01
	tl := openTest(t, cfg)
	txn := tl.plainOpts()
	txn.ProducerID, txn.ProducerEpoch, txn.BaseSequence, txn.Transactional = 9, 0, 0, true
	marker := tl.plainOpts()
	marker.ProducerID, marker.ProducerEpoch, marker.Transactional, marker.Control = 9, 0, true, true
	commit, err := record.Build(marker, []record.Record{record.ControlRecord{Type: record.ControlCommit}.Record()})
	if err != nil {
		t.Fatal(err)
	}
	tl.mustAppend(kvBatch(t, tl.plainOpts(), kv{k: "a", v: "old"})) // 0
	tl.mustAppend(kvBatch(t, txn, kv{k: "a", del: true}))           // 1, deletes a
	forceRoll(tl)
	tl.mustAppend(commit) // 2, in the active segment
	c := newTestCleaner(tl)
	cleanOnce(t, c)
	tl.mustAppend(kvBatch(t, tl.plainOpts(), kv{k: "b", v: "x"})) // 3
	forceRoll(tl)
	cleanOnce(t, c)
	tl.clock.Advance(time.Hour + time.Millisecond)
	for range 3 {
		if _, err := c.CleanOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		tl.clock.Advance(time.Hour + time.Millisecond)
	}
	for _, r := range tl.readRecords() {
		if r.key == "a" && r.value == "old" {
			t.Fatalf("the deleted key came back: %v", describe(tl.readRecords()))
		}
	}
}
