package controller

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// fullDisk writes half of what it is given, then fails with ENOSPC, as a write on a
// full disk does.
type fullDisk struct{ appendFile }

func (f fullDisk) Write(b []byte) (int, error) {
	n, _ := f.appendFile.Write(b[:len(b)/2])
	return n, &os.PathError{Op: "write", Path: "segment", Err: syscall.ENOSPC}
}

// TestFullDiskLeavesTheMetadataLogWhole: a metadata write that meets a full disk is
// reported (ENOSPC) and cut, so the segment still ends with a whole frame: writes
// continue once space is freed and the log reloads with every saved entry.
func TestFullDiskLeavesTheMetadataLogWhole(t *testing.T) {
	dir := t.TempDir()
	logger := slog.New(slog.DiscardHandler)
	l, _, _, err := openDiskLog(dir, logger, raft.NewMemoryStorage())
	if err != nil {
		t.Fatal(err)
	}
	save := func(index uint64) error {
		return l.save(nil, []*pb.Entry{testEntry(1, index, []byte("entry"))}, true)
	}
	for i := uint64(1); i <= 3; i++ {
		if err := save(i); err != nil {
			t.Fatal(err)
		}
	}
	seg := filepath.Join(dir, segmentName(l.segments[len(l.segments)-1].seq))
	before, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	real := l.active
	l.active = fullDisk{real}
	if err := save(4); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("save on a full disk: %v, want ENOSPC", err)
	}
	if after, _ := os.Stat(seg); after.Size() != before.Size() {
		t.Fatalf("segment of %d bytes after the failed write, was %d: the partial frame was not cut", after.Size(), before.Size())
	}
	l.active = real
	if err := save(4); err != nil {
		t.Fatalf("save once space is freed: %v", err)
	}
	if err := l.close(); err != nil {
		t.Fatal(err)
	}
	storage := raft.NewMemoryStorage()
	l2, _, _, err := openDiskLog(dir, logger, storage)
	if err != nil {
		t.Fatalf("reopening: %v", err)
	}
	defer l2.close()
	if last, _ := storage.LastIndex(); last != 4 {
		t.Fatalf("last index %d after reopening, want 4", last)
	}
}
