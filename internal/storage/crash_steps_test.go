package storage

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/record"
)

// A crash scenario is a multi-file operation (a roll, retention, DeleteRecords, a
// compaction swap, Close, creating or deleting a partition) on state built by setup.
// runCrashSteps runs it once to count its steps (every write, truncation, fsync,
// create, rename and removal, see faultFS), then, for every k, runs setup and the
// operation again with the process dying after k steps, and opens what each kind of
// crash leaves (crashProcess, crashOS, crashTorn) as the restarted node would. The
// scenario's verify checks the invariants there: the log opens, no offset is served
// twice, no gap inside [log start, end) (compacted logs may have gaps), every
// acknowledged record at its offset, every key's latest acknowledged value kept,
// ListOffsets by timestamp and the leader epoch cache right, appends continue.
type crashScenario struct {
	name  string
	setup func(w *world)
	op    func(w *world) error
	// verify checks the node reopened from dir after a crash in mode; completed says
	// the operation returned without error before the crash.
	verify func(t *testing.T, w *world, dir string, completed bool, mode crashMode)
}

// world is one run of a scenario: a faultFS over root, the logs opened on it and
// what was appended to them.
type world struct {
	t     *testing.T
	root  string
	fs    *faultFS
	clock *clock.Fake
	cfg   Config
	logs  map[PartitionKey]*Log
	ref   map[PartitionKey]*reference
	mgr   *Manager
	// before is the state of each log when the operation started.
	before map[PartitionKey]logPoint
	// offset and at are what setup computed for op and verify (an offset, a time).
	offset int64
	at     time.Time
}

// logPoint is where a log stood.
type logPoint struct {
	start, end, recoveryPoint int64
}

// reference is what was appended to one partition (Append returned), in offset order,
// and what an append that failed tried to write there (it may be in the log: a batch
// written, then its fsync failed).
type reference struct {
	recs  []refRecord
	maybe map[int64]refRecord
}

type refRecord struct {
	offset     int64
	key, value string
	ts         int64
}

func (r *reference) end() int64 {
	if len(r.recs) == 0 {
		return 0
	}
	return r.recs[len(r.recs)-1].offset + 1
}

var scenarioKey = PartitionKey{"t", 0}

func newWorld(t *testing.T, cfg Config) *world {
	root := modelDir(t)
	return &world{t: t, root: root, fs: newFaultFS(t, root), clock: clock.NewFake(t0), cfg: cfg,
		logs: map[PartitionKey]*Log{}, ref: map[PartitionKey]*reference{}, before: map[PartitionKey]logPoint{}}
}

// openLog opens a partition directly on the world's file system (no Manager).
func (w *world) openLog(k PartitionKey) *Log {
	w.t.Helper()
	l, err := Open(Options{Dir: w.root, Topic: k.Topic, Partition: k.Partition, Config: w.cfg, Clock: w.clock,
		Logger: testLogger(w.t), FS: w.fs})
	if err != nil {
		w.t.Fatal(err)
	}
	w.logs[k] = l
	if w.ref[k] == nil {
		w.ref[k] = &reference{}
	}
	return l
}

// append writes a batch of n records (keys k0…k<keys-1> in turn, timestamps growing
// with the offset) in leader epoch epoch, and records it when Append succeeds.
func (w *world) append(k PartitionKey, n, keys int, epoch int32) error {
	l, ref := w.logs[k], w.ref[k]
	next := l.LogEndOffset()
	recs := make([]refRecord, n)
	rs := make([]record.Record, n)
	for i := range n {
		off := next + int64(i)
		recs[i] = refRecord{offset: off, key: fmt.Sprintf("k%d", off%int64(keys)), value: fmt.Sprintf("v%d-%s", off, strings.Repeat("x", 40)),
			ts: t0.UnixMilli() + off*10}
		rs[i] = record.Record{OffsetDelta: int32(i), TimestampDelta: int64(i) * 10, Key: []byte(recs[i].key), Value: []byte(recs[i].value)}
	}
	opts := record.DefaultBuildOptions()
	opts.BaseTimestamp = recs[0].ts
	b, err := record.Build(opts, rs)
	if err != nil {
		w.t.Fatal(err)
	}
	info, err := l.Append(b, AppendOptions{LeaderEpoch: epoch})
	if err != nil {
		if ref.maybe == nil {
			ref.maybe = map[int64]refRecord{}
		}
		for _, r := range recs {
			ref.maybe[r.offset] = r
		}
		return err
	}
	if info.BaseOffset != next {
		w.t.Fatalf("appended at %d, log end was %d", info.BaseOffset, next)
	}
	ref.recs = append(ref.recs, recs...)
	return nil
}

func (w *world) mustAppend(k PartitionKey, n, keys int, epoch int32) {
	w.t.Helper()
	if err := w.append(k, n, keys, epoch); err != nil {
		w.t.Fatal(err)
	}
}

// mark notes where every log stands, just before the operation.
func (w *world) mark() {
	for k, l := range w.logs {
		l.background.Wait()
		w.before[k] = logPoint{l.LogStartOffset(), l.LogEndOffset(), l.RecoveryPoint()}
	}
}

// abandon drops everything as a killed process would: descriptors closed, nothing
// flushed, renamed or removed, locks released.
func (w *world) abandon() {
	for _, l := range w.logs {
		abandon(l)
		l.background.Wait()
	}
	if w.mgr != nil {
		for _, l := range w.mgr.Logs() {
			abandon(l)
			l.background.Wait()
		}
		w.mgr.unlock()
	}
}

// runCrashSteps runs sc with a crash after every step of its operation.
func runCrashSteps(t *testing.T, cfg Config, sc crashScenario) {
	t.Helper()
	count := func() (int, string) {
		w := newWorld(t, cfg)
		sc.setup(w)
		w.mark()
		before := w.fs.steps()
		if err := sc.op(w); err != nil {
			t.Fatalf("%s without a crash: %v", sc.name, err)
		}
		w.mark() // waits for background flushes the operation started
		n := w.fs.steps() - before
		trace := w.fs.traceSince(before)
		w.abandon()
		return n, trace
	}
	n, trace := count()
	if n == 0 {
		t.Fatalf("%s: no steps", sc.name)
	}
	t.Logf("%s: %d steps", sc.name, n)
	for k := 0; k <= n; k++ {
		w := newWorld(t, cfg)
		sc.setup(w)
		w.mark()
		before := w.fs.steps()
		w.fs.crashAfter(k)
		err := sc.op(w)
		for _, l := range w.logs {
			l.background.Wait()
		}
		done := w.fs.traceSince(before)
		w.abandon()
		for _, mode := range []crashMode{crashProcess, crashOS, crashTorn} {
			dst := filepath.Join(modelDir(t), "after")
			w.fs.image(t, dst, mode, rand.New(rand.NewSource(int64(k*3)+int64(mode))))
			ok := t.Run(fmt.Sprintf("after-%d-of-%d-steps/%s", k, n, mode), func(t *testing.T) {
				sc.verify(t, w, dst, err == nil, mode)
			})
			if !ok {
				t.Fatalf("%s: crash after %d of %d steps (%s); steps done:\n%s\nall steps:\n%s", sc.name, k, n, mode, done, trace)
			}
		}
	}
}

// expect is what must hold of one reopened log.
type expect struct {
	minStart, maxStart int64 // bounds of the log start offset
	acked              int64 // every record below was acknowledged: it must be there
	compacted          bool  // records may be missing, but not a key's latest acknowledged one
}

// ackedEnd is the end of what the operation's caller could count on after a crash in
// mode: everything appended for a process crash, the recovery point at the start of
// the operation (or durableIfDone when it completed) for a machine crash.
func (w *world) ackedEnd(k PartitionKey, mode crashMode, completed bool, durableIfDone int64) int64 {
	if mode == crashProcess {
		return w.ref[k].end()
	}
	if completed {
		return max(durableIfDone, w.before[k].recoveryPoint)
	}
	return w.before[k].recoveryPoint
}

// reopenLog opens one partition of a crash image as the restarted node would.
func (w *world) reopenLog(t *testing.T, dir string, k PartitionKey, clean bool) *Log {
	t.Helper()
	l, err := Open(Options{Dir: dir, Topic: k.Topic, Partition: k.Partition, Config: w.cfg, Clock: w.clock,
		Logger: testLogger(t), CleanShutdown: clean})
	if err != nil {
		t.Fatalf("reopening %v: %v", k, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// verifyLog checks the invariants of a reopened log against what was appended, then
// that appends continue and that a clean close and reopen keep everything.
func verifyLog(t *testing.T, l *Log, ref *reference, exp expect) {
	t.Helper()
	checkLogContent(t, l, ref, exp)
	end := l.LogEndOffset()
	next := refRecord{offset: end, key: "after", value: "recovery", ts: t0.UnixMilli() + end*10}
	opts0 := record.DefaultBuildOptions()
	opts0.BaseTimestamp = next.ts
	b, err := record.Build(opts0, []record.Record{{Key: []byte(next.key), Value: []byte(next.value)}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := l.Append(b, AppendOptions{LeaderEpoch: 9})
	if err != nil || info.BaseOffset != end {
		t.Fatalf("append after recovery: %+v %v, want offset %d", info, err, end)
	}
	var kept []refRecord
	for off := range end {
		if r, ok := ref.maybe[off]; ok {
			kept = append(kept, r)
		}
	}
	for _, r := range ref.recs {
		if r.offset < end {
			kept = append(kept, r)
		}
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].offset < kept[j].offset })
	ref = &reference{recs: append(kept, next)}
	start := l.LogStartOffset()
	opts := Options{Dir: filepath.Dir(l.Dir()), Topic: l.topic, Partition: l.partition, Config: l.config(), Clock: l.clock,
		Logger: l.logger, CleanShutdown: true}
	if err := l.Close(); err != nil {
		t.Fatalf("closing the recovered log: %v", err)
	}
	again, err := Open(opts)
	if err != nil {
		t.Fatalf("clean reopen of the recovered log: %v", err)
	}
	defer again.Close()
	if again.LogStartOffset() != start || again.LogEndOffset() != end+1 {
		t.Fatalf("clean reopen: log [%d, %d), want [%d, %d)", again.LogStartOffset(), again.LogEndOffset(), start, end+1)
	}
	checkLogContent(t, again, ref, expect{minStart: start, maxStart: start, compacted: exp.compacted})
}

// presentRecord is a record read back, with its batch's leader epoch.
type presentRecord struct {
	refRecord
	epoch int32
	batch int64 // base offset of its batch
}

// checkLogContent is verifyLog's read-only part.
func checkLogContent(t *testing.T, l *Log, ref *reference, exp expect) {
	t.Helper()
	start, end := l.LogStartOffset(), l.LogEndOffset()
	if start < exp.minStart || start > exp.maxStart {
		t.Fatalf("log start %d, want within [%d, %d]", start, exp.minStart, exp.maxStart)
	}
	refEnd := ref.end()
	if end < exp.acked {
		t.Fatalf("log end %d, but records up to %d were acknowledged", end, exp.acked)
	}
	byOffset := map[int64]refRecord{}
	for _, r := range ref.maybe {
		byOffset[r.offset] = r
		refEnd = max(refEnd, r.offset+1)
	}
	for _, r := range ref.recs {
		byOffset[r.offset] = r
	}
	var got []presentRecord
	for off := start; off < end; {
		b, err := l.ReadBytes(off, 1<<20, 1<<62)
		if err != nil {
			t.Fatalf("reading offset %d of [%d, %d): %v", off, start, end, err)
		}
		if len(b) == 0 {
			t.Fatalf("nothing to read at offset %d below the log end %d", off, end)
		}
		for len(b) > 0 {
			h, err := record.ParseHeader(b)
			if err != nil {
				t.Fatalf("batch read at offset %d: %v", off, err)
			}
			_, recs, err := record.Records(b[:h.Size()])
			if err != nil {
				t.Fatalf("batch read at offset %d: %v", off, err)
			}
			for _, r := range recs {
				o := h.BaseOffset + int64(r.OffsetDelta)
				if o < start {
					continue
				}
				got = append(got, presentRecord{refRecord{o, string(r.Key), string(r.Value), h.BaseTimestamp + r.TimestampDelta}, h.PartitionLeaderEpoch, h.BaseOffset})
			}
			b = b[h.Size():]
			off = h.LastOffset() + 1
		}
	}
	for i, r := range got {
		want, ok := byOffset[r.offset]
		if !ok || want != r.refRecord {
			t.Fatalf("offset %d holds %+v, was %+v (appended: %v)", r.offset, r.refRecord, want, ok)
		}
		if i > 0 && r.offset <= got[i-1].offset {
			t.Fatalf("offset %d served after %d", r.offset, got[i-1].offset)
		}
		if !exp.compacted && r.offset != start+int64(i) {
			t.Fatalf("gap: offset %d where %d was expected (log [%d, %d))", r.offset, start+int64(i), start, end)
		}
	}
	if !exp.compacted && int64(len(got)) != end-start {
		t.Fatalf("%d records in [%d, %d)", len(got), start, end)
	}
	if end > refEnd {
		t.Fatalf("log end %d beyond anything appended (%d)", end, refEnd)
	}
	if exp.compacted {
		present := map[string]int64{}
		for _, r := range got {
			present[r.key] = r.offset
		}
		for _, r := range ref.recs {
			if r.offset >= start && r.offset < exp.acked {
				if p, ok := present[r.key]; !ok || p < r.offset {
					t.Fatalf("key %s: acknowledged value at offset %d lost (latest present: %d, %v)", r.key, r.offset, p, ok)
				}
			}
		}
	}
	// ListOffsets by timestamp: the first offset whose record's timestamp is ≥ ts.
	for i, r := range got {
		if i%7 != 0 && i != len(got)-1 {
			continue
		}
		for _, ts := range []int64{r.ts, r.ts - 5} {
			off, rts, ok := l.OffsetForTimestamp(ts)
			if !ok || off != r.offset || rts != r.ts {
				t.Fatalf("OffsetForTimestamp(%d) = %d, %d, %v; want %d, %d", ts, off, rts, ok, r.offset, r.ts)
			}
		}
	}
	if len(got) > 0 {
		last := got[len(got)-1]
		if _, _, ok := l.OffsetForTimestamp(last.ts + 1); ok {
			t.Fatalf("OffsetForTimestamp after the newest record found one")
		}
		if ts, _ := l.MaxTimestamp(); ts != last.ts {
			t.Fatalf("MaxTimestamp %d, want %d", ts, last.ts)
		}
	}
	// OffsetForLeaderEpoch: the epoch cache is where each epoch's batches start.
	if !exp.compacted && len(got) > 0 {
		var want []EpochEntry
		for _, r := range got {
			if n := len(want); n == 0 || r.epoch > want[n-1].Epoch {
				want = append(want, EpochEntry{r.epoch, max(r.batch, start)})
			}
		}
		if have := l.EpochEntries(); fmt.Sprint(have) != fmt.Sprint(want) {
			t.Fatalf("leader epoch cache %v, the batches say %v", have, want)
		}
	}
}

// logConfig is small segments and index intervals, so that a few records make
// several segments and index entries.
func crashConfig() Config {
	return Config{SegmentBytes: 1100, IndexIntervalBytes: 150, FileDeleteDelayMs: 0}
}

// fillSegments appends batches of two records until the log has n segments, the
// first half in epoch 1, then epoch 2.
func (w *world) fillSegments(k PartitionKey, n, keys int) {
	for i := 0; len(w.logs[k].segs()) < n; i++ {
		epoch := int32(1)
		if len(w.logs[k].segs()) > n/2 {
			epoch = 2
		}
		w.mustAppend(k, 2, keys, epoch)
	}
}

// logScenario verifies one log opened directly from the image.
func logVerify(exp func(w *world, completed bool, mode crashMode) expect) func(*testing.T, *world, string, bool, crashMode) {
	return func(t *testing.T, w *world, dir string, completed bool, mode crashMode) {
		l := w.reopenLog(t, dir, scenarioKey, false)
		verifyLog(t, l, w.ref[scenarioKey], exp(w, completed, mode))
	}
}

// logStartMovesTo is what holds after an operation moving the log start up to
// w.offset: the log start is between the old and the new one (the new one once the
// operation completed), and every acknowledged record above it is there.
func logStartMovesTo(w *world, completed bool, mode crashMode) expect {
	exp := expect{maxStart: w.offset, acked: w.ackedEnd(scenarioKey, mode, completed, 0)}
	if completed {
		exp.minStart = w.offset
	}
	return exp
}

// TestCrashAtEveryStepOfARoll: an append that rolls the segment (new segment,
// producer snapshot, index files of the old one, the background flush and log-state),
// with the default flush policy and with flush.messages=1 (every acknowledged record
// durable).
func TestCrashAtEveryStepOfARoll(t *testing.T) {
	t.Parallel()
	for _, flushMessages := range []int64{0, 1} {
		cfg := crashConfig()
		cfg.FlushIntervalMessages = flushMessages
		t.Run(fmt.Sprintf("flush.messages=%d", flushMessages), func(t *testing.T) {
			runCrashSteps(t, cfg, crashScenario{
				name: "roll",
				setup: func(w *world) {
					l := w.openLog(scenarioKey)
					w.fillSegments(scenarioKey, 2, 5)
					for l.active().size.Load()+300 < cfg.SegmentBytes {
						w.mustAppend(scenarioKey, 2, 5, 2)
					}
				},
				op: func(w *world) error {
					segs := len(w.logs[scenarioKey].segs())
					if err := w.append(scenarioKey, 4, 5, 3); err != nil {
						return err
					}
					if len(w.logs[scenarioKey].segs()) == segs {
						w.t.Fatal("the append did not roll")
					}
					return nil
				},
				verify: logVerify(func(w *world, completed bool, mode crashMode) expect {
					durable := int64(0)
					if flushMessages == 1 {
						durable = w.ref[scenarioKey].end() // acknowledged = flushed
					}
					return expect{acked: w.ackedEnd(scenarioKey, mode, completed, durable)}
				}),
			})
		})
	}
}

// TestCrashAtEveryStepOfRetention: retention.ms deletes the two oldest segments
// (log-state first, then the renames and removals), with the files removed at once
// and with file.delete.delay.ms.
func TestCrashAtEveryStepOfRetention(t *testing.T) {
	t.Parallel()
	for _, delay := range []int64{0, 60000} {
		cfg := crashConfig()
		cfg.RetentionMs, cfg.DeleteRetention, cfg.FileDeleteDelayMs = 1000, true, delay
		t.Run(fmt.Sprintf("file.delete.delay.ms=%d", delay), func(t *testing.T) {
			runCrashSteps(t, cfg, crashScenario{
				name: "retention",
				setup: func(w *world) {
					l := w.openLog(scenarioKey)
					w.fillSegments(scenarioKey, 4, 5)
					w.mustAppend(scenarioKey, 2, 5, 2)
					if err := l.Flush(); err != nil {
						w.t.Fatal(err)
					}
					ts, _, err := l.segs()[1].maxTimestamp(cfg.IndexIntervalBytes)
					if err != nil {
						w.t.Fatal(err)
					}
					w.at = time.UnixMilli(ts + cfg.RetentionMs + 1) // segments 0 and 1 expire then
					w.offset = l.segs()[2].base
				},
				op: func(w *world) error {
					n, err := w.logs[scenarioKey].EnforceRetention(w.at)
					if err == nil && n != 2 {
						w.t.Fatalf("retention deleted %d segments, want 2", n)
					}
					return err
				},
				verify: logVerify(logStartMovesTo),
			})
		})
	}
}

// TestCrashAtEveryStepOfDeleteRecords: DeleteRecords to an offset inside the third
// segment (log-state, then the two segments below it go).
func TestCrashAtEveryStepOfDeleteRecords(t *testing.T) {
	t.Parallel()
	runCrashSteps(t, crashConfig(), crashScenario{
		name: "DeleteRecords",
		setup: func(w *world) {
			l := w.openLog(scenarioKey)
			w.fillSegments(scenarioKey, 4, 5)
			w.offset = l.segs()[2].base + 3
		},
		op: func(w *world) error {
			got, err := w.logs[scenarioKey].DeleteRecordsBefore(w.offset)
			if err == nil && got != w.offset {
				w.t.Fatalf("log start %d after DeleteRecords(%d)", got, w.offset)
			}
			return err
		},
		verify: logVerify(logStartMovesTo),
	})
}

// TestCrashAtEveryStepOfCompaction: a cleaning that rewrites several groups of
// segments (.cleaned files written and fsynced, renamed .swap, the old segments
// renamed .deleted, .swap stripped, the cleaner checkpoint), with the old files
// removed at once and after file.delete.delay.ms.
func TestCrashAtEveryStepOfCompaction(t *testing.T) {
	t.Parallel()
	for _, delay := range []int64{0, 60000} {
		cfg := crashConfig()
		cfg.Compact, cfg.DeleteRetention, cfg.FileDeleteDelayMs = true, false, delay
		cfg.MinCleanableDirtyRatio = 0.01
		t.Run(fmt.Sprintf("file.delete.delay.ms=%d", delay), func(t *testing.T) {
			runCrashSteps(t, cfg, crashScenario{
				name: "compaction",
				setup: func(w *world) {
					w.openLog(scenarioKey)
					w.fillSegments(scenarioKey, 5, 4)
				},
				op: func(w *world) error {
					l := w.logs[scenarioKey]
					c := NewCleaner(CleanerOptions{Clock: w.clock, Logger: testLogger(w.t)}, func() []*Log { return []*Log{l} })
					n, err := c.CleanOnce(context.Background())
					if err == nil && n != 1 {
						w.t.Fatalf("cleaned %d logs", n)
					}
					return err
				},
				verify: func(t *testing.T, w *world, dir string, completed bool, mode crashMode) {
					l := w.reopenLog(t, dir, scenarioKey, false)
					assertNoCleanerFiles(t, l.Dir())
					verifyLog(t, l, w.ref[scenarioKey], expect{acked: w.ackedEnd(scenarioKey, mode, completed, 0), compacted: true})
				},
			})
		})
	}
}

// managerWorld opens a Manager over dirs log directories under the world's root.
func (w *world) openManager(dirs int) *Manager {
	w.t.Helper()
	var ds []string
	for i := range dirs {
		ds = append(ds, filepath.Join(w.root, fmt.Sprintf("dir%d", i)))
	}
	m, err := NewManager(ManagerOptions{Dirs: ds, Clock: w.clock, Logger: testLogger(w.t), FS: w.fs})
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := m.EnsureMetaProperties(1); err != nil {
		w.t.Fatal(err)
	}
	w.mgr = m
	return m
}

func (w *world) create(k PartitionKey) error {
	l, err := w.mgr.GetOrCreate(k.Topic, k.Partition, [16]byte{7}, w.cfg)
	if err != nil {
		return err
	}
	w.logs[k] = l
	if w.ref[k] == nil {
		w.ref[k] = &reference{}
	}
	return nil
}

// reopenManager opens the log directories of a crash image with a new Manager and
// loads every partition found, as a restarted broker does.
func (w *world) reopenManager(t *testing.T, dir string, dirs int) *Manager {
	t.Helper()
	var ds []string
	for i := range dirs {
		ds = append(ds, filepath.Join(dir, fmt.Sprintf("dir%d", i)))
	}
	m, err := NewManager(ManagerOptions{Dirs: ds, Clock: w.clock, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if _, err := m.EnsureMetaProperties(1); err != nil {
		t.Fatal(err)
	}
	if err := m.LoadExisting(func(PartitionKey) Config { return w.cfg }); err != nil {
		t.Fatalf("loading the partitions: %v", err)
	}
	m.removeDeletedDirs()
	return m
}

// TestCrashAtEveryStepOfClose: Manager.Close of two partitions (flush, producer
// snapshot, index files, log-state, then the clean-shutdown marker). A crash at any
// point leaves either no marker (recovery) or files that match what Close recorded.
func TestCrashAtEveryStepOfClose(t *testing.T) {
	t.Parallel()
	keys := []PartitionKey{{"a", 0}, {"b", 1}}
	runCrashSteps(t, crashConfig(), crashScenario{
		name: "Close",
		setup: func(w *world) {
			w.openManager(1)
			for _, k := range keys {
				if err := w.create(k); err != nil {
					w.t.Fatal(err)
				}
				w.fillSegments(k, 2, 5)
			}
			if err := w.logs[keys[0]].Flush(); err != nil {
				w.t.Fatal(err)
			}
			w.mustAppend(keys[0], 2, 5, 2)
		},
		op: func(w *world) error {
			w.logs = map[PartitionKey]*Log{} // the Manager closes them
			return w.mgr.Close()
		},
		verify: func(t *testing.T, w *world, dir string, completed bool, mode crashMode) {
			m := w.reopenManager(t, dir, 1)
			for _, k := range keys {
				l := m.Get(k.Topic, k.Partition)
				if l == nil {
					t.Fatalf("%v not loaded", k)
				}
				verifyLog(t, l, w.ref[k], expect{acked: w.ackedEnd(k, mode, completed, w.ref[k].end())})
			}
		},
	})
}

// TestCrashAtEveryStepOfCreate: creating a partition (its directory, partition.metadata,
// the first segment) and a first flushed append, in the second of two log directories.
func TestCrashAtEveryStepOfCreate(t *testing.T) {
	t.Parallel()
	cfg := crashConfig()
	cfg.FlushIntervalMessages = 1
	old, fresh := PartitionKey{"old", 0}, PartitionKey{"new", 0}
	runCrashSteps(t, cfg, crashScenario{
		name: "create",
		setup: func(w *world) {
			w.openManager(2)
			if err := w.create(old); err != nil {
				w.t.Fatal(err)
			}
			w.mustAppend(old, 2, 5, 1)
		},
		op: func(w *world) error {
			if err := w.create(fresh); err != nil {
				return err
			}
			return w.append(fresh, 2, 5, 1)
		},
		verify: func(t *testing.T, w *world, dir string, completed bool, mode crashMode) {
			m := w.reopenManager(t, dir, 2)
			verifyLog(t, m.Get(old.Topic, old.Partition), w.ref[old], expect{acked: w.ref[old].end()})
			l, err := m.GetOrCreate(fresh.Topic, fresh.Partition, [16]byte{7}, cfg)
			if err != nil {
				t.Fatalf("creating the partition again: %v", err)
			}
			ref := w.ref[fresh]
			if ref == nil {
				ref = &reference{}
			}
			acked := int64(0)
			if completed || mode == crashProcess {
				acked = ref.end()
			}
			verifyLog(t, l, ref, expect{acked: acked})
		},
	})
}

// TestCrashAtEveryStepOfDelete: deleting a partition (renamed -delete, the log
// directory fsynced, removed) leaves it either whole or gone, never half there, and
// the other partition untouched.
func TestCrashAtEveryStepOfDelete(t *testing.T) {
	t.Parallel()
	gone, kept := PartitionKey{"gone", 0}, PartitionKey{"kept", 0}
	runCrashSteps(t, crashConfig(), crashScenario{
		name: "delete",
		setup: func(w *world) {
			w.openManager(1)
			for _, k := range []PartitionKey{gone, kept} {
				if err := w.create(k); err != nil {
					w.t.Fatal(err)
				}
				w.fillSegments(k, 2, 5)
				if err := w.logs[k].Flush(); err != nil {
					w.t.Fatal(err)
				}
			}
		},
		op: func(w *world) error {
			delete(w.logs, gone)
			return w.mgr.Delete(gone.Topic, gone.Partition)
		},
		verify: func(t *testing.T, w *world, dir string, completed bool, mode crashMode) {
			m := w.reopenManager(t, dir, 1)
			verifyLog(t, m.Get(kept.Topic, kept.Partition), w.ref[kept], expect{acked: w.ref[kept].end()})
			l := m.Get(gone.Topic, gone.Partition)
			if completed && l != nil {
				t.Fatal("a deleted partition came back")
			}
			if l != nil {
				verifyLog(t, l, w.ref[gone], expect{acked: w.ref[gone].end()})
			}
			for _, e := range mustReadDir(t, filepath.Join(dir, "dir0")) {
				if strings.HasSuffix(e, deleteDirSuffix) {
					t.Fatalf("%s left after the restart", e)
				}
			}
		},
	})
}

func mustReadDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := OSFS{}.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}
