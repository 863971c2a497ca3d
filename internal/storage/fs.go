package storage

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"time"
)

// FS is every file-system operation the storage package does: segment, index and
// metadata files, partition and log directories. Production uses OSFS; tests
// substitute a file system that loses what was not made durable (file data not
// fsynced, directory entries not fsynced through their directory) as an operating
// system crash would, and that injects I/O errors (ENOSPC, EIO) at chosen operations.
//
// Durability contract the package follows: a file's data is durable after File.Sync;
// a created, renamed or removed name is durable after SyncDir of its directory.
type FS interface {
	// OpenFile opens or creates a file, as os.OpenFile.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	RemoveAll(name string) error
	MkdirAll(name string, perm os.FileMode) error
	ReadDir(name string) ([]os.DirEntry, error)
	Stat(name string) (os.FileInfo, error)
	Chtimes(name string, atime, mtime time.Time) error
	// SyncDir fsyncs a directory, making the names created, renamed or removed in it
	// durable.
	SyncDir(name string) error
}

// File is an open file. All reads and writes use explicit offsets.
type File interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
	Truncate(size int64) error
	Stat() (os.FileInfo, error)
	Close() error
	// OS is the operating-system file that FileRange hands to readers (sendfile) and
	// that the directory lock is taken on.
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

func (OSFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (OSFS) Remove(name string) error                     { return os.Remove(name) }
func (OSFS) RemoveAll(name string) error                  { return os.RemoveAll(name) }
func (OSFS) MkdirAll(name string, perm os.FileMode) error { return os.MkdirAll(name, perm) }
func (OSFS) ReadDir(name string) ([]os.DirEntry, error)   { return os.ReadDir(name) }
func (OSFS) Stat(name string) (os.FileInfo, error)        { return os.Stat(name) }
func (OSFS) Chtimes(name string, atime, mtime time.Time) error {
	return os.Chtimes(name, atime, mtime)
}

func (OSFS) SyncDir(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

type osFile struct{ *os.File }

func (f osFile) OS() *os.File { return f.File }

// readFile reads a whole (small) file.
func readFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, st.Size())
	n, err := f.ReadAt(b, 0)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(b)) {
		return nil, err
	}
	return b, nil
}

// writeFileAtomic replaces path with data through a temporary file and a rename, so a
// crash leaves either the old or the new content. With sync the new content is
// durable when it returns: the file is fsynced before the rename and its directory
// after it.
func writeFileAtomic(fsys FS, path string, data []byte, sync bool) error {
	tmp := path + tmpSuffix
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, 0)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err != nil {
		_ = fsys.Remove(tmp)
		return err
	}
	if sync {
		return fsys.SyncDir(filepath.Dir(path))
	}
	return nil
}

// tmpSuffix marks a metadata file being written (writeFileAtomic); the loader removes
// leftovers.
const tmpSuffix = ".tmp"
