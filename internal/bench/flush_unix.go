//go:build unix

package bench

import (
	"os"
	"syscall"
)

// flushDirtyPages asks the kernel to write back dirty pages (sync(2)) so that one
// scenario's writes do not throttle the next one's.
func flushDirtyPages() { syscall.Sync() }

// dropPageCache writes back dirty pages and asks Linux to drop the clean page cache
// (/proc/sys/vm/drop_caches = 1; needs root). It affects every process on the machine.
func dropPageCache() error {
	syscall.Sync()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("1\n"), 0)
}
