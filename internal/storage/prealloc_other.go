//go:build !linux

package storage

// Preallocate is not available here: segments grow as written.
func (f osFile) Preallocate(off, n int64) error { return errPreallocateUnsupported }
