package integration

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// segmentsOf lists the .log files of a partition directory, oldest first.
func segmentsOf(t testing.TB, dir string) []string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no segments in %s: %v", dir, err)
	}
	sort.Strings(logs)
	return logs
}

func mustRead(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustWrite(t testing.TB, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// lastBatchAt returns the position of the last batch of a segment file.
func lastBatchAt(t testing.TB, b []byte) int {
	t.Helper()
	pos := 0
	for {
		h, err := record.ParseHeader(b[pos:])
		if err != nil {
			t.Fatalf("segment unreadable at %d: %v", pos, err)
		}
		if pos+h.Size() >= len(b) {
			return pos
		}
		pos += h.Size()
	}
}

// diskFault damages one partition's directory while the broker is down.
type diskFault struct {
	name string
	// apply damages dir; it returns the first offset whose record the damage destroys
	// (math.MaxInt64 for none) given the partition's acknowledged records.
	apply func(t testing.TB, dir string, acked *ackedLog) int64
	// logs is what the broker's log must mention afterwards.
	logs []string
}

const noLoss = int64(1) << 62

var diskFaults = []diskFault{
	{name: "garbage after the last batch", logs: []string{"bytes_dropped"}, apply: func(t testing.TB, dir string, _ *ackedLog) int64 {
		seg := segmentsOf(t, dir)
		p := seg[len(seg)-1]
		garbage := make([]byte, 37)
		rand.New(rand.NewSource(1)).Read(garbage)
		mustWrite(t, p, append(mustRead(t, p), garbage...))
		return noLoss
	}},
	{name: "half a batch after the last one", logs: []string{"bytes_dropped"}, apply: func(t testing.TB, dir string, _ *ackedLog) int64 {
		seg := segmentsOf(t, dir)
		p := seg[len(seg)-1]
		b := mustRead(t, p)
		last := lastBatchAt(t, b)
		mustWrite(t, p, append(b, b[last:last+(len(b)-last)/2]...))
		return noLoss
	}},
	{name: "last batch torn", logs: []string{"bytes_dropped"}, apply: func(t testing.TB, dir string, _ *ackedLog) int64 {
		seg := segmentsOf(t, dir)
		p := seg[len(seg)-1]
		b := mustRead(t, p)
		h, _ := record.ParseHeader(b[lastBatchAt(t, b):])
		mustWrite(t, p, b[:len(b)-5])
		return h.BaseOffset
	}},
	{name: "index files deleted and garbage", logs: []string{"index files do not match"}, apply: func(t testing.TB, dir string, _ *ackedLog) int64 {
		seg := segmentsOf(t, dir)
		if len(seg) < 3 {
			t.Fatalf("need 3 segments in %s, have %d", dir, len(seg))
		}
		idx := func(s, suffix string) string { return strings.TrimSuffix(s, ".log") + suffix }
		os.Remove(idx(seg[0], ".index"))
		g := make([]byte, 48)
		rand.New(rand.NewSource(2)).Read(g)
		mustWrite(t, idx(seg[1], ".timeindex"), g)
		mustWrite(t, idx(seg[len(seg)-1], ".index"), g[:40])
		return noLoss
	}},
	{name: "state files garbage", logs: []string{"log-state", "leader-epoch-checkpoint", "partition.metadata"}, apply: func(t testing.TB, dir string, _ *ackedLog) int64 {
		for _, name := range []string{"log-state", "leader-epoch-checkpoint", "partition.metadata"} {
			mustWrite(t, filepath.Join(dir, name), []byte("\x00garbage\xff\n"))
		}
		snaps, _ := filepath.Glob(filepath.Join(dir, "*.snapshot"))
		for _, s := range snaps {
			mustWrite(t, s, []byte("garbage"))
		}
		return noLoss
	}},
	{name: "untouched", apply: func(testing.TB, string, *ackedLog) int64 { return noLoss }},
}

// TestDiskFaultsAfterCleanStopAndKill: one partition per fault; the broker is stopped
// cleanly (then, in a second round, killed with SIGKILL), the faults are applied to the
// files, and the restarted broker serves every acknowledged record the fault did not
// destroy, at its offset, once; logs what it found; answers ListOffsets by timestamp
// right at once; and the partitions take appends at the next offset.
func TestDiskFaultsAfterCleanStopAndKill(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t)
	const topic = "faults"
	n := int32(len(diskFaults))
	createTopicOrFail(t, newAdmin(t, b), topic, n, map[string]string{"segment.bytes": "16384"})
	acked := make([]*ackedLog, n)
	for p := range acked {
		acked[p] = newAckedLog()
	}
	lost := make([]int64, n)
	for p := range lost {
		lost[p] = noLoss
	}
	start := time.Now().Add(-time.Hour)
	for round, stop := range []string{"clean stop", "kill -9"} {
		c := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
		for p := range n {
			produceTracked(t, c, topic, p, fmt.Sprintf("r%d-p%d", round, p), 400, start.Add(time.Duration(round)*time.Minute), acked[p])
		}
		c.Close()
		if stop == "clean stop" {
			if err := b.Stop(); err != nil {
				t.Fatal(err)
			}
		} else {
			b.Kill()
		}
		for p, f := range diskFaults {
			lost[p] = min(lost[p], f.apply(t, filepath.Join(b.Dir, fmt.Sprintf("%s-%d", topic, p)), acked[p]))
		}
		b.StartAgain(t) // b.Log() is this process's log from here on
		for p, f := range diskFaults {
			end := checkPartition(t, b, topic, int32(p), acked[p], false, lost[p])
			if lost[p] == noLoss && end != acked[p].end() {
				t.Fatalf("%s after a %s: log end %d, want %d", f.name, stop, end, acked[p].end())
			}
			for _, want := range f.logs { // the log is read from the process's stderr
				testutil.WaitFor(t, 10*time.Second, func() bool { return strings.Contains(b.Log(), want) },
					fmt.Sprintf("%s after a %s: a log line mentioning %q", f.name, stop, want))
			}
		}
		checkListOffsetsByTime(t, b, topic, acked, lost)
		// The log continues at the next offset.
		c = newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
		for p := range n {
			r := &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("next-%d", round)), Timestamp: start.Add(time.Duration(round)*time.Minute + 30*time.Second)}
			produceSync(t, c, r)
			want := acked[p].end()
			if lost[p] != noLoss {
				want = lost[p]
				for o := range acked[p].values {
					if o >= lost[p] {
						delete(acked[p].values, o) // destroyed by the test; offsets reused
						delete(acked[p].ts, o)
					}
				}
				lost[p] = noLoss
			}
			if r.Offset != want {
				t.Fatalf("%s after a %s: next offset %d, want %d", diskFaults[p].name, stop, r.Offset, want)
			}
			acked[p].add(r)
		}
		c.Close()
	}
}

// checkListOffsetsByTime: for some acknowledged records, ListOffsets by their
// timestamp answers their offset.
func checkListOffsetsByTime(t testing.TB, b *testutil.Broker, topic string, acked []*ackedLog, lost []int64) {
	t.Helper()
	adm := newAdmin(t, b)
	for _, probe := range []int64{1, 137, 399, 401, 650} {
		var ts time.Time
		for _, a := range acked {
			if v, ok := a.ts[probe]; ok {
				ts = v
			}
		}
		if ts.IsZero() {
			continue
		}
		res, err := adm.ListOffsetsAfterMilli(ctxT(t, 10*time.Second), ts.UnixMilli(), topic)
		if err != nil {
			t.Fatal(err)
		}
		for p, a := range acked {
			if _, ok := a.ts[probe]; !ok || probe >= lost[p] || a.ts[probe] != ts {
				continue
			}
			o, _ := res.Lookup(topic, int32(p))
			if o.Err != nil || o.Offset != probe {
				t.Fatalf("%s/%d: ListOffsets at %v = %d (%v), want %d", topic, p, ts, o.Offset, o.Err, probe)
			}
		}
	}
}

// TestLogDirOwnership: a second process on the same log.dirs is refused with a clear
// message while the first keeps serving; a node with another node.id is refused
// naming both ids with no file changed; entries Samsa did not create are ignored,
// left as they are and logged.
func TestLogDirOwnership(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t)
	createTopicOrFail(t, newAdmin(t, b), "own", 1, nil)
	acked := newAckedLog()
	c := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	produceTracked(t, c, "own", 0, "a", 100, time.Now(), acked)

	out := runSamsa(t, "listeners=PLAINTEXT://127.0.0.1:0", "log.dirs="+b.Dir)
	if !strings.Contains(out, "locked by another process") || !strings.Contains(out, filepath.Join(b.Dir, ".lock")) {
		t.Fatalf("second process on the same log.dirs:\n%s", out)
	}
	produceTracked(t, c, "own", 0, "b", 100, time.Now(), acked)
	checkPartition(t, b, "own", 0, acked, false, noLoss)
	c.Close()
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}

	foreign := map[string]string{"notes.txt": "hello", "notes-1/readme": "mine", "foo/x": "y", "stray-0.1-delete/z": "z"}
	for p, content := range foreign {
		full := filepath.Join(b.Dir, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		mustWrite(t, full, []byte(content))
	}
	os.MkdirAll(filepath.Join(b.Dir, "empty-0"), 0o755)
	before := treeOf(t, b.Dir)
	out = runSamsa(t, "listeners=PLAINTEXT://127.0.0.1:0", "log.dirs="+b.Dir, "node.id=2")
	if !strings.Contains(out, "node.id=1") || !strings.Contains(out, "node.id is 2") || !strings.Contains(out, "meta.properties") {
		t.Fatalf("node.id mismatch refused without naming both ids and the file:\n%s", out)
	}
	if after := treeOf(t, b.Dir); after != before {
		t.Fatalf("a refused start changed the log directory:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	b.StartAgain(t)
	checkPartition(t, b, "own", 0, acked, false, noLoss)
	for _, name := range []string{"notes.txt", "notes-1", "foo", "stray-0.1-delete", "empty-0"} {
		testutil.WaitFor(t, 10*time.Second, func() bool { return strings.Contains(b.Log(), name) }, "a log line naming "+name)
	}
	// The broker removes the logs of topics that do not exist: not these.
	for p, content := range foreign {
		if got, err := os.ReadFile(filepath.Join(b.Dir, p)); err != nil || string(got) != content {
			t.Errorf("%s changed: %q %v", p, got, err)
		}
	}
	if _, err := os.Stat(filepath.Join(b.Dir, "empty-0")); err != nil {
		t.Errorf("empty-0 removed: %v", err)
	}
	if !strings.Contains(b.Log(), `msg="samsa ready"`) || strings.Contains(b.Log(), "panic") {
		t.Fatal(b.Log())
	}
}

// isStorageError reports a produce refused with KAFKA_STORAGE_ERROR.
func isStorageError(err error) bool { return errors.Is(err, kerr.KafkaStorageError) }
