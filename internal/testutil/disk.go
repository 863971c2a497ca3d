package testutil

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
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

// DyingDisk is a real disk that can fail: an ext4 file system in an image file,
// mounted through a loop device on a fresh directory.
type DyingDisk struct {
	Dir   string // the mount point
	image string
}

// NewDyingDisk makes and mounts a DyingDisk of the given size in MiB, unmounted when
// the test ends (after the brokers stopped: call it before starting them). The test
// is skipped when mounting is not allowed (not root, or no loop devices).
func NewDyingDisk(t testing.TB, mib int) *DyingDisk {
	t.Helper()
	d, err := TryDyingDisk(t, mib)
	if err != nil {
		t.Skipf("a failing disk needs mkfs.ext4 and a loop mount, which needs root: %v", err)
	}
	return d
}

// TryDyingDisk is NewDyingDisk returning the error instead of skipping the test. The
// file system keeps no blocks for root, so FillDisk fills it for root too.
func TryDyingDisk(t testing.TB, mib int) (*DyingDisk, error) {
	t.Helper()
	d := &DyingDisk{Dir: t.TempDir(), image: filepath.Join(t.TempDir(), "disk.img")}
	if err := os.WriteFile(d.image, nil, 0o644); err != nil {
		return nil, err
	}
	if err := os.Truncate(d.image, int64(mib)<<20); err != nil {
		return nil, err
	}
	if err := runQuiet("mkfs.ext4", "-q", "-F", "-m", "0", d.image); err != nil {
		return nil, err
	}
	if err := d.mount(); err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(d.Dir, 0); err != nil {
			_ = syscall.Unmount(d.Dir, syscall.MNT_DETACH)
		}
	})
	return d, nil
}

func (d *DyingDisk) mount() error { return runQuiet("mount", "-o", "loop", d.image, d.Dir) }

// runQuiet runs a command, its output only in the error.
func runQuiet(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err == nil {
		return nil
	}
	if out = bytes.TrimSpace(out); len(out) > 0 {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return fmt.Errorf("%s %s: %v", name, strings.Join(args, " "), err)
}

// CanFail reports whether Fail can kill the disk: a DyingDisk made as a plain struct
// around another directory (a tmpfs, where loop devices are missing) can only fill up.
func (d *DyingDisk) CanFail() bool { return d.image != "" }

// Fail shuts the file system down as a dying disk would: from now on every read,
// write, fsync and open under Dir fails with EIO, for the processes that have files
// open there too, and what was not yet committed to its journal is lost.
func (d *DyingDisk) Fail(t testing.TB) {
	t.Helper()
	f, err := os.Open(d.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const ext4IocShutdown = 0x8004587d   // EXT4_IOC_SHUTDOWN: _IOR('X', 125, __u32)
	const ext4GoingFlagsNoLogFlush = 0x2 // as a power cut: the journal is not flushed
	if err := unix.IoctlSetPointerInt(int(f.Fd()), ext4IocShutdown, ext4GoingFlagsNoLogFlush); err != nil {
		t.Fatalf("shutting down the file system on %s: %v", d.Dir, err)
	}
}

// Repair unmounts the failed file system and mounts it again (its journal
// replayed), so Dir works again with what the disk had committed. The processes that
// used it must have exited.
func (d *DyingDisk) Repair(t testing.TB) {
	t.Helper()
	if err := syscall.Unmount(d.Dir, 0); err != nil {
		t.Fatalf("unmounting the failed disk %s: %v", d.Dir, err)
	}
	if err := d.mount(); err != nil {
		t.Fatal(err)
	}
}
