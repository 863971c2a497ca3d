package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/samsa-streaming/samsa/internal/record"
)

// logBuffer collects log output for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func captureLogger() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo})), b
}

// damaged is the partition a fault is applied to: its directory and segments.
type damaged struct {
	t    *testing.T
	dir  string
	segs []int64 // base offsets, ascending; the last is the active segment
	rng  *rand.Rand
}

func (d *damaged) path(base int64, suffix string) string {
	return filepath.Join(d.dir, fileName(base, suffix))
}
func (d *damaged) active() int64 { return d.segs[len(d.segs)-1] }
func (d *damaged) old() int64    { return d.segs[0] }

func (d *damaged) read(p string) []byte {
	d.t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		d.t.Fatal(err)
	}
	return b
}

func (d *damaged) write(p string, b []byte) {
	d.t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		d.t.Fatal(err)
	}
}

func (d *damaged) remove(p string) {
	d.t.Helper()
	if err := os.Remove(p); err != nil {
		d.t.Fatal(err)
	}
}

func (d *damaged) garbage(n int) []byte {
	b := make([]byte, n)
	d.rng.Read(b)
	return b
}

// lastBatch returns the position and size of the active segment's last batch.
func (d *damaged) lastBatch() (pos, size int64) {
	b := d.read(d.path(d.active(), logSuffix))
	for pos < int64(len(b)) {
		h, err := record.ParseHeader(b[pos:])
		if err != nil {
			d.t.Fatal(err)
		}
		if pos+int64(h.Size()) == int64(len(b)) {
			return pos, int64(h.Size())
		}
		pos += int64(h.Size())
	}
	d.t.Fatal("active segment empty")
	return 0, 0
}

// fault is one kind of damage a disk or an operator does to a partition directory.
type fault struct {
	name  string
	apply func(d *damaged)
	// lost is how many records at the end of the log the damage destroys.
	lost int
	// logs is what the log output must mention (a file name), "" for nothing.
	logs string
	// cleanOnly: the damage only makes sense after a clean stop (after a crash the
	// active segment's index files are not expected to exist).
	cleanOnly bool
}

var faults = []fault{
	{name: "garbage after the last batch", logs: "bytes_dropped", apply: func(d *damaged) {
		p := d.path(d.active(), logSuffix)
		d.write(p, append(d.read(p), d.garbage(37)...))
	}},
	{name: "half of a batch after the last one", logs: "bytes_dropped", apply: func(d *damaged) {
		p := d.path(d.active(), logSuffix)
		b := d.read(p)
		pos, size := d.lastBatch()
		d.write(p, append(b, b[pos:pos+size/2]...))
	}},
	{name: "zeros after the last batch", logs: "bytes_dropped", apply: func(d *damaged) {
		p := d.path(d.active(), logSuffix)
		d.write(p, append(d.read(p), make([]byte, 4096)...))
	}},
	{name: "last batch torn", lost: 1, logs: "bytes_dropped", apply: func(d *damaged) {
		p := d.path(d.active(), logSuffix)
		b := d.read(p)
		d.write(p, b[:len(b)-7])
	}},
	{name: "last batch cut off whole", lost: 1, apply: func(d *damaged) {
		p := d.path(d.active(), logSuffix)
		pos, _ := d.lastBatch()
		d.write(p, d.read(p)[:pos])
	}},
	{name: "active .index missing", cleanOnly: true, apply: func(d *damaged) { d.remove(d.path(d.active(), indexSuffix)) }},
	{name: "old .index missing", logs: fileName(0, logSuffix), apply: func(d *damaged) { d.remove(d.path(d.old(), indexSuffix)) }},
	{name: "old .timeindex missing", logs: fileName(0, logSuffix), apply: func(d *damaged) { d.remove(d.path(d.old(), timeIndexSuffix)) }},
	{name: "old .index of an odd size", logs: fileName(0, logSuffix), apply: func(d *damaged) {
		p := d.path(d.old(), indexSuffix)
		b := d.read(p)
		d.write(p, b[:len(b)-3])
	}},
	{name: "old .index cut by one entry", logs: fileName(0, logSuffix), apply: func(d *damaged) {
		p := d.path(d.old(), indexSuffix)
		b := d.read(p)
		d.write(p, b[:len(b)-offsetEntrySize])
	}},
	{name: "old .timeindex cut to nothing", logs: fileName(0, logSuffix), apply: func(d *damaged) {
		d.write(d.path(d.old(), timeIndexSuffix), nil)
	}},
	{name: "old .timeindex cut by one entry", apply: func(d *damaged) {
		p := d.path(d.old(), timeIndexSuffix)
		b := d.read(p)
		d.write(p, b[:len(b)-timeEntrySize])
	}},
	{name: "old .index garbage", logs: fileName(0, logSuffix), apply: func(d *damaged) {
		p := d.path(d.old(), indexSuffix)
		d.write(p, d.garbage(len(d.read(p))))
	}},
	{name: "old .timeindex garbage", logs: fileName(0, logSuffix), apply: func(d *damaged) {
		p := d.path(d.old(), timeIndexSuffix)
		d.write(p, d.garbage(len(d.read(p))))
	}},
	{name: "old .index zeros", logs: fileName(0, logSuffix), apply: func(d *damaged) {
		p := d.path(d.old(), indexSuffix)
		d.write(p, make([]byte, len(d.read(p))))
	}},
	{name: "old .index entry pointing at another batch", logs: fileName(0, logSuffix), apply: func(d *damaged) {
		p := d.path(d.old(), indexSuffix)
		b := d.read(p)
		if len(b) < 2*offsetEntrySize {
			d.t.Fatal("need two index entries")
		}
		// The last entry gets the position of the one before (offsets unchanged).
		last := len(b) - offsetEntrySize
		copy(b[last+4:last+8], b[last-4:last])
		binary.BigEndian.PutUint32(b[last+4:], binary.BigEndian.Uint32(b[last+4:])+1)
		d.write(p, b)
	}},
	{name: "active .index garbage", cleanOnly: true, logs: "checking the active segment", apply: func(d *damaged) {
		p := d.path(d.active(), indexSuffix)
		d.write(p, d.garbage(len(d.read(p))+offsetEntrySize))
	}},
	{name: "log-state missing", logs: logStateFile, apply: func(d *damaged) { d.remove(filepath.Join(d.dir, logStateFile)) }},
	{name: "log-state garbage", logs: logStateFile, apply: func(d *damaged) { d.write(filepath.Join(d.dir, logStateFile), d.garbage(64)) }},
	{name: "log-state of version 1", apply: func(d *damaged) {
		st, err := readLogState(OSFS{}, d.dir)
		if err != nil {
			d.t.Fatal(err)
		}
		d.write(filepath.Join(d.dir, logStateFile), fmt.Appendf(nil, "version 1\nlog_start_offset %d\nrecovery_point %d\n", st.logStartOffset, st.recoveryPoint))
	}},
	{name: "producer snapshot garbage", logs: snapshotSuffix, apply: func(d *damaged) {
		snaps, _ := filepath.Glob(filepath.Join(d.dir, "*"+snapshotSuffix))
		for _, s := range snaps {
			d.write(s, d.garbage(40))
		}
	}},
	{name: "producer snapshots missing", apply: func(d *damaged) {
		snaps, _ := filepath.Glob(filepath.Join(d.dir, "*"+snapshotSuffix))
		for _, s := range snaps {
			d.remove(s)
		}
	}},
	{name: "leader-epoch-checkpoint missing", logs: leaderEpochFile, apply: func(d *damaged) { d.remove(filepath.Join(d.dir, leaderEpochFile)) }},
	{name: "leader-epoch-checkpoint garbage", logs: leaderEpochFile, apply: func(d *damaged) {
		d.write(filepath.Join(d.dir, leaderEpochFile), d.garbage(30))
	}},
	{name: "leader-epoch-checkpoint stale", logs: leaderEpochFile, apply: func(d *damaged) {
		d.write(filepath.Join(d.dir, leaderEpochFile), []byte("0\n1\n1 0\n"))
	}},
	{name: "partition.metadata garbage", logs: partitionMetaFile, apply: func(d *damaged) {
		d.write(filepath.Join(d.dir, partitionMetaFile), d.garbage(50))
	}},
	{name: "partition.metadata missing", apply: func(d *damaged) { d.remove(filepath.Join(d.dir, partitionMetaFile)) }},
}

// TestFaultMatrix applies each fault to a partition after a clean stop and after a
// crash, reopens it and checks that it serves every record the fault did not destroy
// (at its offset, once, no gaps), ListOffsets by timestamp, the leader epochs and the
// idempotent producer's state, that the damage is logged by file name, and that
// appends continue. The topic id is given (as the broker's reconcile does) or not
// (as its start-up does).
func TestFaultMatrix(t *testing.T) {
	t.Parallel()
	topicID := [16]byte{7}
	for _, f := range faults {
		for _, clean := range []bool{true, false} {
			if f.cleanOnly && !clean {
				continue
			}
			state := "after a crash"
			if clean {
				state = "after a clean stop"
			}
			t.Run(f.name+"/"+state, func(t *testing.T) {
				t.Parallel()
				cfg := crashConfig()
				w := newWorld(t, cfg)
				l, err := Open(Options{Dir: w.root, Topic: "t", Partition: 0, TopicID: topicID, Config: cfg, Clock: w.clock, Logger: testLogger(t)})
				if err != nil {
					t.Fatal(err)
				}
				w.logs[scenarioKey], w.ref[scenarioKey] = l, &reference{}
				w.fillSegments(scenarioKey, 3, 5)
				w.mustAppend(scenarioKey, 2, 5, 3)
				seq := w.appendIdempotent(scenarioKey, 0, 2, 3)
				ended := w.ref[scenarioKey].end()
				var segs []int64
				for _, s := range l.segs() {
					segs = append(segs, s.base)
				}
				l.background.Wait()
				if clean {
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
				} else {
					abandon(l)
				}
				f.apply(&damaged{t: t, dir: l.Dir(), segs: segs, rng: rand.New(rand.NewSource(int64(len(f.name))))})

				logger, logs := captureLogger()
				l2, err := Open(Options{Dir: w.root, Topic: "t", Partition: 0, Config: cfg, Clock: w.clock, Logger: logger, CleanShutdown: clean})
				if err != nil {
					t.Fatalf("open after %s %s: %v", f.name, state, err)
				}
				defer l2.Close()
				checkLogContent(t, l2, w.ref[scenarioKey], expect{acked: ended - int64(f.lost)})
				if f.logs != "" && !strings.Contains(logs.String(), f.logs) {
					t.Errorf("the log does not mention %q:\n%s", f.logs, logs.String())
				}
				if f.lost == 0 {
					checkProducer(t, l2, seq)
				}
				// partition.metadata: written again once the topic id is known.
				if err := l2.AdoptTopicID(topicID); err != nil {
					t.Fatal(err)
				}
				if id, err := readPartitionMetadata(OSFS{}, l2.Dir()); err != nil || id != topicID || l2.TopicID() != topicID {
					t.Fatalf("partition.metadata %v %v, log's topic id %v", id, err, l2.TopicID())
				}
				verifyLog(t, l2, w.ref[scenarioKey], expect{acked: ended - int64(f.lost)})
			})
		}
	}
}

// appendIdempotent appends n batches of one record from producer 7, sequence numbers
// from seq on, and returns the next sequence number.
func (w *world) appendIdempotent(k PartitionKey, seq int32, n int, epoch int32) int32 {
	w.t.Helper()
	l, ref := w.logs[k], w.ref[k]
	for range n {
		off := l.LogEndOffset()
		r := refRecord{offset: off, key: fmt.Sprintf("p%d", seq), value: fmt.Sprintf("seq%d", seq), ts: t0.UnixMilli() + off*10}
		opts := record.DefaultBuildOptions()
		opts.BaseTimestamp, opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = r.ts, 7, 0, seq
		b, err := record.Build(opts, []record.Record{{Key: []byte(r.key), Value: []byte(r.value)}})
		if err != nil {
			w.t.Fatal(err)
		}
		if _, err := l.Append(b, AppendOptions{LeaderEpoch: epoch}); err != nil {
			w.t.Fatal(err)
		}
		ref.recs = append(ref.recs, r)
		seq++
	}
	return seq
}

// checkProducer: the idempotent producer's state survived: its last batch is known as
// a duplicate and a batch out of sequence is refused.
func checkProducer(t *testing.T, l *Log, next int32) {
	t.Helper()
	batch := func(seq int32) []byte {
		opts := record.DefaultBuildOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 7, 0, seq
		b, err := record.Build(opts, []record.Record{{Value: []byte("x")}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if info, err := l.Append(batch(next-1), AppendOptions{}); err != nil || !info.Duplicate {
		t.Fatalf("the producer's last batch again: %+v %v, want a duplicate", info, err)
	}
	if _, err := l.Append(batch(next+1), AppendOptions{}); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("a batch skipping a sequence number: %v, want ErrOutOfOrderSequence", err)
	}
}

// TestCleanerCheckpointGarbage: a garbage cleaner-offset-checkpoint is logged by name,
// the logs are cleaned from their start, and the file is written again, valid.
func TestCleanerCheckpointGarbage(t *testing.T) {
	t.Parallel()
	cfg := crashConfig()
	cfg.Compact, cfg.DeleteRetention, cfg.MinCleanableDirtyRatio = true, false, 0.01
	w := newWorld(t, cfg)
	l := w.openLog(scenarioKey)
	w.fillSegments(scenarioKey, 4, 4)
	path := filepath.Join(w.root, cleanerCheckpointFile)
	if err := os.WriteFile(path, []byte("\x00garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	logger, logs := captureLogger()
	c := NewCleaner(CleanerOptions{Clock: w.clock, Logger: logger}, func() []*Log { return []*Log{l} })
	if n, err := c.CleanOnce(t.Context()); err != nil || n != 1 {
		t.Fatalf("cleaning with a garbage checkpoint: %d %v", n, err)
	}
	if !strings.Contains(logs.String(), path) {
		t.Fatalf("the log does not name %s:\n%s", path, logs.String())
	}
	if m, err := readCleanerCheckpoint(OSFS{}, path); err != nil || m[scenarioKey] == 0 {
		t.Fatalf("checkpoint after cleaning: %v %v", m, err)
	}
	checkLogContent(t, l, w.ref[scenarioKey], expect{acked: w.ref[scenarioKey].end(), compacted: true})
}
