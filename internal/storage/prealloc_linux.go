package storage

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Preallocate reserves disk blocks for [off, off+n) without changing the file's
// length (FALLOC_FL_KEEP_SIZE), so readers, recovery and sendfile never see the
// reserved bytes. It returns errPreallocateUnsupported where the file system cannot.
func (f osFile) Preallocate(off, n int64) error {
	err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, off, n)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return errPreallocateUnsupported
	}
	return err
}
