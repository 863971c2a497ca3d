package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/clock"
)

func newTestManager(t testing.TB, dirs []string, fc *clock.Fake) *Manager {
	t.Helper()
	m, err := NewManager(ManagerOptions{Dirs: dirs, Clock: fc, Logger: testLogger(t),
		RetentionCheckInterval: time.Minute, FlushCheckInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func TestManagerLockRefusesSecondBroker(t *testing.T) {
	dir := t.TempDir()
	m := newTestManager(t, []string{dir}, clock.NewFake(t0))
	_, err := NewManager(ManagerOptions{Dirs: []string{dir}})
	if !errors.Is(err, ErrDirLocked) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second manager: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2, err := NewManager(ManagerOptions{Dirs: []string{dir}})
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	m2.Close()
}

// TestDirFailedBeforeStart: a log directory that cannot be locked at start-up (its
// disk failed while the node was down; here the path is a file) is offline and the
// manager starts on the others, opening their partitions; a partition found in none
// of them is not created (it may be on the failed disk: a new, empty log must not
// stand in for it). When no directory can be locked, the start is refused.
func TestDirFailedBeforeStart(t *testing.T) {
	good := t.TempDir()
	bad := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(bad, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	m := newTestManager(t, []string{good}, clock.NewFake(t0))
	if _, err := m.GetOrCreate("t", 0, [16]byte{1}, Config{}); err != nil {
		t.Fatal(err)
	}
	m.Close()

	m = newTestManager(t, []string{good, bad}, clock.NewFake(t0))
	if !m.Offline(bad) || m.Offline(good) || m.AllOffline() {
		t.Fatalf("offline: %s %v, %s %v", bad, m.Offline(bad), good, m.Offline(good))
	}
	if _, err := m.EnsureMetaProperties(1); err != nil {
		t.Fatalf("meta.properties with a failed directory: %v", err)
	}
	if err := m.LoadExisting(func(PartitionKey) Config { return Config{} }); err != nil {
		t.Fatal(err)
	}
	if l, err := m.GetOrCreate("t", 0, [16]byte{1}, Config{}); err != nil || l == nil {
		t.Fatalf("t-0, in the working directory: %v", err)
	}
	_, err := m.GetOrCreate("t", 1, [16]byte{1}, Config{})
	if !errors.Is(err, ErrLogDirOffline) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("t-1, in no working directory: %v, want ErrLogDirOffline naming %s", err, bad)
	}
	if _, err := os.Stat(filepath.Join(good, "t-1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("t-1 was created in the working directory: %v", err)
	}

	for _, dirs := range [][]string{{bad}, {bad, filepath.Join(bad, "x")}} {
		if m, err := NewManager(ManagerOptions{Dirs: dirs}); err == nil || !strings.Contains(err.Error(), bad) {
			if m != nil {
				m.Close()
			}
			t.Fatalf("%v: a start with no working directory: %v, want an error naming %s", dirs, err, bad)
		}
	}
}

func TestMetaProperties(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	m := newTestManager(t, dirs, clock.NewFake(t0))
	id, err := m.EnsureMetaProperties(7)
	if err != nil || len(id) != 22 {
		t.Fatalf("cluster id %q, %v", id, err)
	}
	props, err := readMetaProperties(OSFS{}, dirs[1])
	if err != nil || props.clusterID != id || props.nodeID != "7" {
		t.Fatalf("meta.properties %v %v", props, err)
	}
	if again, err := m.EnsureMetaProperties(7); err != nil || again != id {
		t.Fatalf("second call: %q %v", again, err)
	}
	// A fresh extra directory gets the existing cluster id.
	m.opts.Dirs = append(m.opts.Dirs, t.TempDir())
	if again, err := m.EnsureMetaProperties(7); err != nil || again != id {
		t.Fatalf("with a new dir: %q %v", again, err)
	}
	if _, err := m.EnsureMetaProperties(8); !errors.Is(err, ErrNodeIDMismatch) {
		t.Fatalf("node id mismatch: %v", err)
	}
}

func TestManagerExistingAndCleanRestart(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	fc := clock.NewFake(t0)
	m := newTestManager(t, dirs, fc)
	id := [16]byte{1, 2, 3}
	keys := []PartitionKey{{"a", 0}, {"a", 1}, {"my-topic", 0}, {"x.y_z", 12}}
	for _, k := range keys {
		l, err := m.GetOrCreate(k.Topic, k.Partition, id, Config{})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i <= int(k.Partition); i++ {
			l.mustAppendT(t, simple(t, 1, 0))
		}
	}
	// Placement spreads partitions over both directories.
	for _, d := range dirs {
		ents, _ := os.ReadDir(d)
		n := 0
		for _, e := range ents {
			if e.IsDir() {
				n++
			}
		}
		if n != 2 {
			t.Errorf("%s holds %d partitions, want 2", d, n)
		}
	}
	// Things Existing must ignore.
	os.MkdirAll(filepath.Join(dirs[0], metadataLogDir), 0o755)
	os.MkdirAll(filepath.Join(dirs[0], "gone-3.0123456789abcdef0123456789abcdef-delete"), 0o755)
	os.MkdirAll(filepath.Join(dirs[0], "notes-delete"), 0o755) // not Samsa's: stays
	os.MkdirAll(filepath.Join(dirs[1], "b-1.deleted"), 0o755)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !fileExists(filepath.Join(d, cleanShutdownFile)) {
			t.Fatalf("no clean shutdown marker in %s", d)
		}
	}

	m2 := newTestManager(t, dirs, fc)
	if !m2.CleanShutdown(dirs[0]) {
		t.Fatal("clean shutdown marker not detected")
	}
	got := m2.Existing()
	if fmt.Sprint(got) != fmt.Sprint(keys) {
		t.Fatalf("Existing() = %v, want %v", got, keys)
	}
	if err := m2.LoadExisting(func(PartitionKey) Config { return Config{} }); err != nil {
		t.Fatal(err)
	}
	if fileExists(filepath.Join(dirs[0], cleanShutdownFile)) {
		t.Fatal("clean shutdown marker not removed once logs are opened")
	}
	for _, k := range keys {
		l := m2.Get(k.Topic, k.Partition)
		if l == nil || l.LogEndOffset() != int64(k.Partition)+1 || l.TopicID() != id {
			t.Fatalf("%v after restart: %+v", k, l)
		}
	}
	// Run removes leftovers of deletes and enforces retention on schedule.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m2.Run(ctx); close(done) }()
	waitFor(t, "removal of the -delete dir", func() bool {
		return !fileExists(filepath.Join(dirs[0], "gone-3.0123456789abcdef0123456789abcdef-delete"))
	})
	cancel()
	<-done
	if !fileExists(filepath.Join(dirs[0], "notes-delete")) {
		t.Fatal("a directory Samsa did not create was removed")
	}
}

func TestManagerUncleanRestartRecovers(t *testing.T) {
	dir := t.TempDir()
	fc := clock.NewFake(t0)
	m, err := NewManager(ManagerOptions{Dirs: []string{dir}, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.GetOrCreate("t", 0, [16]byte{}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	l.mustAppendT(t, simple(t, 3, 0))
	size := l.Size()
	// Crash: the lock goes with the process, no marker is written; a torn half batch
	// is left at the end.
	l.closed.Store(true)
	l.mu.Lock()
	l.closeFilesLocked()
	l.mu.Unlock()
	m.unlock()
	f, _ := os.OpenFile(filepath.Join(dir, "t-0", fileName(0, logSuffix)), os.O_WRONLY|os.O_APPEND, 0)
	f.Write(simple(t, 1, 0)[:30])
	f.Close()

	m2 := newTestManager(t, []string{dir}, fc)
	if m2.CleanShutdown(dir) {
		t.Fatal("unclean shutdown taken for clean")
	}
	l2, err := m2.GetOrCreate("t", 0, [16]byte{}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if l2.LogEndOffset() != 3 || l2.Size() != size {
		t.Fatalf("recovered end %d size %d, want 3 %d", l2.LogEndOffset(), l2.Size(), size)
	}
}

func TestManagerDeleteAndRetention(t *testing.T) {
	dir := t.TempDir()
	fc := clock.NewFake(t0)
	m := newTestManager(t, []string{dir}, fc)
	one := int64(len(simple(t, 1, 0)))
	cfg := Config{SegmentBytes: one, RetentionMs: 1000, DeleteRetention: true, FileDeleteDelayMs: 1000}
	l, err := m.GetOrCreate("r", 0, [16]byte{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		l.mustAppendT(t, simple(t, 1, t0.UnixMilli()))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	// Advance the fake clock until the retention pass has run.
	waitFor(t, "retention", func() bool {
		fc.Advance(time.Minute)
		return l.LogStartOffset() == 3
	})

	d, err := m.GetOrCreate("gone", 0, [16]byte{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	d.mustAppendT(t, simple(t, 1, 0))
	res, err := d.Read(0, 1000, 1<<62, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Delete("gone", 0); err != nil {
		t.Fatal(err)
	}
	if m.Get("gone", 0) != nil || fileExists(filepath.Join(dir, "gone-0")) {
		t.Fatal("deleted partition still visible")
	}
	buf := make([]byte, res.Size)
	if _, err := res.Ranges[0].File.ReadAt(buf, res.Ranges[0].Pos); err != nil {
		t.Fatalf("in-flight read broken by delete: %v", err)
	}
	for _, k := range m.Existing() {
		if k.Topic == "gone" {
			t.Fatal("Existing lists a deleted partition")
		}
	}
	waitFor(t, "removal of the deleted partition", func() bool {
		fc.Advance(time.Second)
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "gone-0") {
				return false
			}
		}
		return true
	})
	cancel()
	<-done
}

func (l *Log) mustAppendT(t testing.TB, b []byte) AppendInfo {
	t.Helper()
	info, err := l.Append(b, AppendOptions{LeaderEpoch: 0})
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// BenchmarkOpenManyPartitions measures a clean start-up with many small partitions
// (go test -bench OpenManyPartitions -benchtime 1x ./internal/storage/).
func BenchmarkOpenManyPartitions(b *testing.B) {
	const partitions = 2000
	dir := b.TempDir()
	m, err := NewManager(ManagerOptions{Dirs: []string{dir}})
	if err != nil {
		b.Fatal(err)
	}
	batch := simple(b, 10, 0)
	for p := 0; p < partitions; p++ {
		l, err := m.GetOrCreate("bench", int32(p), [16]byte{9}, Config{})
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < 5; i++ {
			l.mustAppendT(b, append([]byte(nil), batch...))
		}
	}
	if err := m.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m, err := NewManager(ManagerOptions{Dirs: []string{dir}})
		if err != nil {
			b.Fatal(err)
		}
		if err := m.LoadExisting(nil); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(partitions), "partitions")
}

func TestManagerReplacesLogOfRecreatedTopic(t *testing.T) {
	dir := t.TempDir()
	fc := clock.NewFake(t0)
	m := newTestManager(t, []string{dir}, fc)
	oldID, newID := [16]byte{1}, [16]byte{2}
	l, err := m.GetOrCreate("re", 0, oldID, Config{FileDeleteDelayMs: 0})
	if err != nil {
		t.Fatal(err)
	}
	l.mustAppendT(t, simple(t, 1, 0))
	// While open.
	l2, err := m.GetOrCreate("re", 0, newID, Config{})
	if err != nil || l2 == l || l2.LogEndOffset() != 0 || l2.TopicID() != newID {
		t.Fatalf("recreated topic got the old log: %v", err)
	}
	l2.mustAppendT(t, simple(t, 1, 0))
	// After a restart, found on disk with the old id.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := newTestManager(t, []string{dir}, fc)
	if err := m2.LoadExisting(nil); err != nil {
		t.Fatal(err)
	}
	l3, err := m2.GetOrCreate("re", 0, [16]byte{3}, Config{})
	if err != nil || l3.LogEndOffset() != 0 || l3.TopicID() != ([16]byte{3}) {
		t.Fatalf("stray log not replaced: %v", err)
	}
	m2.Close()
	m3 := newTestManager(t, []string{dir}, fc)
	if _, err := m3.GetOrCreate("re", 0, [16]byte{4}, Config{}); err != nil {
		t.Fatalf("stray log on disk not replaced: %v", err)
	}
}
