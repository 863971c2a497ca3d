package storage

import (
	"io"
	"os"
)

// FS opens a log's segment and index files (.log, .index, .timeindex). Tests substitute
// it to simulate crashes (only synced bytes survive) and I/O errors. The small metadata
// files (log-state, checkpoints, snapshots), which are replaced atomically, use the os
// package directly.
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
}

// File is an open segment or index file. All reads and writes use explicit offsets.
type File interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
	Truncate(size int64) error
	Stat() (os.FileInfo, error)
	Close() error
	// OS is the operating-system file that FileRange hands to readers (sendfile).
	OS() *os.File
}

// OSFS is the real file system.
type OSFS struct{}

func (OSFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

type osFile struct{ *os.File }

func (f osFile) OS() *os.File { return f.File }
