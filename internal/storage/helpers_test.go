package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/record"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// batchSpec describes a test batch.
type batchSpec struct {
	n          int   // records
	ts         int64 // base timestamp (ms); records get ts, ts+1, ...
	valueSize  int
	pid        int64
	epoch      int16
	seq        int32
	txn        bool
	control    bool // a transaction marker: one commit control record (abort when abort is set)
	abort      bool
	compressed bool
}

func mkBatch(t testing.TB, s batchSpec) []byte {
	t.Helper()
	opts := record.DefaultBuildOptions()
	opts.BaseTimestamp = s.ts
	if s.pid != 0 {
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = s.pid, s.epoch, s.seq
	}
	opts.Transactional, opts.Control = s.txn, s.control
	if s.compressed {
		opts.Compression = record.CompressionZstd
	}
	n := max(s.n, 1)
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{
			OffsetDelta:    int32(i),
			TimestampDelta: int64(i),
			Key:            []byte(fmt.Sprintf("k%d", i)),
			Value:          bytes.Repeat([]byte{byte('a' + i%26)}, s.valueSize),
		}
	}
	if s.control {
		typ := record.ControlCommit
		if s.abort {
			typ = record.ControlAbort
		}
		recs = []record.Record{record.ControlRecord{Type: typ}.Record()}
	}
	b, err := record.Build(opts, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// simple builds a non-idempotent batch of n records at timestamp ts.
func simple(t testing.TB, n int, ts int64) []byte {
	return mkBatch(t, batchSpec{n: n, ts: ts, valueSize: 10})
}

type testLog struct {
	*Log
	t     testing.TB
	dir   string
	clock *clock.Fake
	opts  Options
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func openTest(t testing.TB, cfg Config) *testLog {
	t.Helper()
	dir := t.TempDir()
	fc := clock.NewFake(t0)
	opts := Options{Dir: dir, Topic: "orders", Partition: 3, Config: cfg, Clock: fc, Logger: testLogger(t)}
	l, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	tl := &testLog{Log: l, t: t, dir: dir, clock: fc, opts: opts}
	t.Cleanup(func() { tl.Log.Close() })
	return tl
}

// reopen opens the same directory again; the previous Log is abandoned (crash) unless
// the caller closed it.
func (tl *testLog) reopen(clean bool) {
	tl.t.Helper()
	opts := tl.opts
	opts.CleanShutdown = clean
	l, err := Open(opts)
	if err != nil {
		tl.t.Fatal(err)
	}
	old := tl.Log
	tl.Log = l
	tl.t.Cleanup(func() { l.Close() })
	_ = old
}

// crash abandons the log without flushing: only closes the file descriptors so that
// the test does not leak them (what is in the page cache stays, as after a process
// crash).
func (tl *testLog) crash() {
	tl.Log.closed.Store(true)
	tl.Log.background.Wait() // a process crash stops its goroutines too
	tl.Log.mu.Lock()
	tl.Log.closeFilesLocked()
	tl.Log.mu.Unlock()
}

func (tl *testLog) mustAppend(b []byte) AppendInfo {
	tl.t.Helper()
	info, err := tl.Append(b, AppendOptions{LeaderEpoch: 1})
	if err != nil {
		tl.t.Fatal(err)
	}
	return info
}

// eachBatch calls fn with every whole batch from offset from to the log end.
func (tl *testLog) eachBatch(from int64, fn func(h record.Header, batch []byte)) {
	tl.t.Helper()
	for from < tl.LogEndOffset() {
		b, err := tl.ReadBytes(from, 1<<20, 1<<62)
		if err != nil {
			tl.t.Fatalf("ReadBytes(%d): %v", from, err)
		}
		if len(b) == 0 {
			tl.t.Fatalf("ReadBytes(%d): nothing below log end %d", from, tl.LogEndOffset())
		}
		for len(b) > 0 {
			h, err := record.ParseHeader(b)
			if err != nil {
				tl.t.Fatal(err)
			}
			fn(h, b[:h.Size()])
			b = b[h.Size():]
			from = h.LastOffset() + 1
		}
	}
}

// readAll copies every batch from offset to the end.
func (tl *testLog) readAll(from int64) []record.Header {
	tl.t.Helper()
	var out []record.Header
	tl.eachBatch(from, func(h record.Header, batch []byte) {
		if !record.ChecksumOK(batch) {
			tl.t.Fatalf("batch at %d: bad CRC", h.BaseOffset)
		}
		out = append(out, h)
	})
	return out
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return !errors.Is(err, os.ErrNotExist)
}

func mkHeader(pid int64, epoch int16, seq int32, base int64) record.Header {
	return record.Header{BaseOffset: base, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, MaxTimestamp: base}
}

func parseAt(b []byte) (record.Header, error) { return record.ParseHeader(b) }
