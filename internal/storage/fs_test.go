package storage

import (
	"bytes"
	"errors"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/clock"
)

// TestCrashKeepsFlushedData: after an operating-system crash (unsynced bytes of
// segment files lost), everything below the recovery point at the time of the crash
// is still there, byte for byte, and the log continues after what survived.
func TestCrashKeepsFlushedData(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	for iter := 0; iter < 12; iter++ {
		dir := t.TempDir()
		cfs := newFaultFS(t, dir)
		opts := Options{Dir: dir, Topic: "c", Partition: 0, Clock: clock.NewFake(t0), Logger: testLogger(t), FS: cfs,
			Config: Config{SegmentBytes: 2500, FlushIntervalMessages: int64(1 + rng.Intn(12))}}
		l, err := Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		var appended [][]byte
		for i := 0; i < 40+rng.Intn(30); i++ {
			if _, err := l.Append(mkBatch(t, batchSpec{n: 1 + rng.Intn(3), valueSize: rng.Intn(150), ts: int64(i)}), AppendOptions{}); err != nil {
				t.Fatal(err)
			}
			if rng.Intn(15) == 0 {
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		for off := int64(0); off < l.LogEndOffset(); {
			b, err := l.ReadBytes(off, 1, math.MaxInt64)
			if err != nil {
				t.Fatal(err)
			}
			h, _ := parseAt(b)
			appended = append(appended, b)
			off = h.LastOffset() + 1
		}
		durable := l.RecoveryPoint()
		// Crash: no Close; the descriptors go with the process, unsynced bytes with the OS.
		l.closed.Store(true)
		l.mu.Lock()
		l.closeFilesLocked()
		l.mu.Unlock()
		l.background.Wait() // a flush of a rolled segment, cut short by the closed files
		opts.Dir = filepath.Join(t.TempDir(), "after")
		cfs.image(t, opts.Dir, crashOS, nil)

		opts.FS = nil
		l2, err := Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		if l2.LogEndOffset() < durable {
			t.Fatalf("iter %d: log end %d after crash, but %d was flushed", iter, l2.LogEndOffset(), durable)
		}
		for _, want := range appended {
			h, _ := parseAt(want)
			if h.LastOffset() >= l2.LogEndOffset() {
				break
			}
			got, err := l2.ReadBytes(h.BaseOffset, 1, math.MaxInt64)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("iter %d: batch %d differs after crash (%v)", iter, h.BaseOffset, err)
			}
		}
		end := l2.LogEndOffset()
		if info, err := l2.Append(simple(t, 1, 0), AppendOptions{}); err != nil || info.BaseOffset != end {
			t.Fatalf("iter %d: append after crash %+v %v", iter, info, err)
		}
		l2.Close()
	}
}

func TestIOErrorsLeaveLogConsistent(t *testing.T) {
	dir := t.TempDir()
	ffs := newFaultFS(t, dir)
	one := int64(len(simple(t, 1, 0)))
	opts := Options{Dir: dir, Topic: "e", Partition: 0, Clock: clock.NewFake(t0), Logger: testLogger(t), FS: ffs,
		Config: Config{SegmentBytes: 3 * one}}
	l, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Append(simple(t, 1, 0), AppendOptions{})
	l.Append(simple(t, 1, 0), AppendOptions{})

	steps := []struct {
		name   string
		inject func(fsCall) error
	}{
		{"write fails", failWhen(opWrite, logSuffix, errIO)},
		{"new segment cannot be created", failWhen(opCreate, logSuffix, errIO)},
	}
	for _, st := range steps {
		end, size := l.LogEndOffset(), l.Size()
		if st.name != "write fails" {
			// Fill the segment so that the next append rolls.
			for l.segs()[len(l.segs())-1].size.Load()+one <= 3*one {
				if _, err := l.Append(simple(t, 1, 0), AppendOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			end, size = l.LogEndOffset(), l.Size()
		}
		ffs.setInject(st.inject)
		if _, err := l.Append(simple(t, 1, 0), AppendOptions{}); !errors.Is(err, errIO) {
			t.Fatalf("%s: append error %v", st.name, err)
		}
		ffs.setInject(nil)
		if l.LogEndOffset() != end || l.Size() != size {
			t.Fatalf("%s: log end %d size %d after failed append, want %d %d", st.name, l.LogEndOffset(), l.Size(), end, size)
		}
		if got := len(l.readAllLog(t)); int64(got) != end {
			t.Fatalf("%s: %d readable batches, want %d", st.name, got, end)
		}
		info, err := l.Append(simple(t, 1, 0), AppendOptions{})
		if err != nil || info.BaseOffset != end {
			t.Fatalf("%s: append after the fault: %+v %v", st.name, info, err)
		}
	}
}

func (l *Log) readAllLog(t *testing.T) [][]byte {
	t.Helper()
	var out [][]byte
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		b, err := l.ReadBytes(off, 1, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		h, err := parseAt(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
		off = h.LastOffset() + 1
	}
	return out
}

// gateFS, once armed, holds every fsync of a segment file until gate is closed,
// reporting each one it holds on held.
type gateFS struct {
	OSFS
	armed atomic.Bool
	gate  chan struct{}
	held  chan struct{}
}

func (g *gateFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := g.OSFS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, logSuffix) {
		return f, err
	}
	return &gateFile{File: f, fs: g}, nil
}

type gateFile struct {
	File
	fs *gateFS
}

func (f *gateFile) Sync() error {
	if !f.fs.armed.Load() {
		return f.File.Sync()
	}
	select {
	case f.fs.held <- struct{}{}:
	default:
	}
	<-f.fs.gate
	return f.File.Sync()
}

// TestRollFlushesInBackground: an append that rolls the segment returns while the
// rolled segment's fsync is still running (as Kafka flushes on roll, off the append
// path), and the recovery point moves only once that fsync is done.
func TestRollFlushesInBackground(t *testing.T) {
	gfs := &gateFS{gate: make(chan struct{}), held: make(chan struct{}, 16)}
	one := int64(len(simple(t, 1, 0)))
	l, err := Open(Options{Dir: t.TempDir(), Topic: "g", Partition: 0, Clock: clock.NewFake(t0), Logger: testLogger(t),
		FS: gfs, Config: Config{SegmentBytes: 3 * one}})
	if err != nil {
		t.Fatal(err)
	}
	gfs.armed.Store(true)
	opened := false
	defer func() {
		if !opened {
			close(gfs.gate)
		}
		l.Close()
	}()

	appended := make(chan error, 1)
	go func() {
		for range 4 { // the fourth append rolls the segment
			if _, err := l.Append(simple(t, 1, 0), AppendOptions{}); err != nil {
				appended <- err
				return
			}
		}
		appended <- nil
	}()
	deadline := time.After(10 * time.Second)
	select {
	case err := <-appended:
		if err != nil {
			t.Fatal(err)
		}
	case <-deadline:
		t.Fatal("the append that rolled the segment waited for its fsync")
	}
	select {
	case <-gfs.held:
	case <-deadline:
		t.Fatal("the rolled segment was never flushed")
	}
	if n := len(l.segs()); n != 2 {
		t.Fatalf("%d segments after the roll, want 2", n)
	}
	if rp := l.RecoveryPoint(); rp != 0 {
		t.Fatalf("recovery point %d while the rolled segment's fsync is held, want 0", rp)
	}

	close(gfs.gate)
	opened = true
	l.background.Wait()
	if rp, end := l.RecoveryPoint(), l.LogEndOffset(); rp != end {
		t.Fatalf("recovery point %d after the background flush, want the log end %d", rp, end)
	}
}

// TestFailedFlushRefusesAppends: when the background fsync of a rolled segment fails,
// the recovery point stays where it was and every later append fails with that error
// (the broker then takes the directory offline), rather than acknowledging records in
// a log whose earlier bytes may never reach the disk.
func TestFailedFlushRefusesAppends(t *testing.T) {
	dir := t.TempDir()
	ffs := newFaultFS(t, dir)
	one := int64(len(simple(t, 1, 0)))
	l, err := Open(Options{Dir: dir, Topic: "f", Partition: 0, Clock: clock.NewFake(t0), Logger: testLogger(t),
		FS: ffs, Config: Config{SegmentBytes: 3 * one}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	ffs.setInject(failWhen(opSync, logSuffix, errIO))
	for i := range 4 { // the fourth append rolls; the append path does not fsync
		if _, err := l.Append(simple(t, 1, 0), AppendOptions{}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	l.background.Wait()
	if rp := l.RecoveryPoint(); rp != 0 {
		t.Fatalf("recovery point %d after a failed fsync, want 0", rp)
	}
	end := l.LogEndOffset()
	if _, err := l.Append(simple(t, 1, 0), AppendOptions{}); !errors.Is(err, errIO) {
		t.Fatalf("append after the failed fsync: %v, want the fsync error", err)
	}
	ffs.setInject(nil)
	if _, err := l.Append(simple(t, 1, 0), AppendOptions{}); !errors.Is(err, errIO) {
		t.Fatalf("append once fsyncs work again: %v, want the earlier fsync error still", err)
	}
	if l.LogEndOffset() != end {
		t.Fatalf("log end %d, want %d: refused appends must not change the log", l.LogEndOffset(), end)
	}
}
