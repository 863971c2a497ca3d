package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// SmallDisk mounts a tmpfs of the given size (e.g. "8m") on a fresh directory and
// unmounts it when the test ends (after the brokers stopped: call it before starting
// them). The test is skipped when mounting is not allowed (not root).
func SmallDisk(t testing.TB, size string) string {
	t.Helper()
	dir, err := TrySmallDisk(t, size)
	if err != nil {
		t.Skipf("a real full disk needs a small tmpfs, and mounting one needs root: %v", err)
	}
	return dir
}

// TrySmallDisk is SmallDisk returning the mount's error instead of skipping the test.
func TrySmallDisk(t testing.TB, size string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		return "", err
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir, nil
}

// FillDisk writes a ballast file leaving about leave bytes free on dir's file system,
// and returns its path (removing it frees the space).
func FillDisk(t testing.TB, dir string, leave int64) string {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	p := filepath.Join(dir, "ballast.test")
	if err := os.WriteFile(p, make([]byte, max(free-leave, 0)), 0o644); err != nil && !strings.Contains(err.Error(), "no space") {
		t.Fatal(err)
	}
	return p
}
