package storage

import (
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// faultFS is the storage tests' file system, in the spirit of pebble's strict MemFS
// and errorfs. Files live as real files under root (so FileRanges still hand out
// *os.File), and faultFS models durability itself:
//
//   - a file's durable content is what it held at its last Sync;
//   - a directory's durable entries are what it held at its last SyncDir (a created,
//     renamed or removed name is lost in a crash until then).
//
// image writes what a crash leaves (see crashMode) into another directory; the test
// then opens that directory as the restarted node would. Every operation that changes
// something is a step: crashAt = n makes the n-th step and everything after it fail
// with errCrashed (the process died there; nothing more reaches the disk). inject can
// fail any operation (ENOSPC, EIO); a failed write lands half its bytes, as a real
// partial write. Real fsyncs are skipped: durability is modelled, and tests stay fast.
type faultFS struct {
	root string

	mu      sync.Mutex
	top     *fnode
	step    int
	crashAt int // 0: never
	crashed bool
	inject  func(c fsCall) error
	trace   []string // the steps, for failure messages
}

// fsCall describes one operation, for inject.
type fsCall struct {
	op   fsOp
	path string
	step int // the step number of a changing operation, 0 for a read
}

type fsOp string

const (
	opOpen     fsOp = "open"
	opCreate   fsOp = "create"
	opRead     fsOp = "read"
	opWrite    fsOp = "write"
	opTruncate fsOp = "truncate"
	opSync     fsOp = "sync"
	opRename   fsOp = "rename"
	opRemove   fsOp = "remove"
	opMkdir    fsOp = "mkdir"
	opReadDir  fsOp = "readdir"
	opStat     fsOp = "stat"
	opSyncDir  fsOp = "syncdir"
	opChtimes  fsOp = "chtimes"
)

// changes reports whether an operation is a step (it may change what is on disk).
func (o fsOp) changes() bool {
	switch o {
	case opOpen, opRead, opReadDir, opStat:
		return false
	}
	return true
}

var errCrashed = errors.New("faultfs: the process crashed")

// fnode is a file or directory of the model.
type fnode struct {
	dir        bool
	durable    []byte            // file: content at the last Sync
	live       map[string]*fnode // dir: entries now
	durableDir map[string]*fnode // dir: entries at the last SyncDir
}

func newDirNode() *fnode {
	return &fnode{dir: true, live: map[string]*fnode{}, durableDir: map[string]*fnode{}}
}

// newFaultFS models the tree under root, all of it durable.
func newFaultFS(t testing.TB, root string) *faultFS {
	t.Helper()
	f := &faultFS{root: filepath.Clean(root)}
	top, err := scanTree(f.root)
	if err != nil {
		t.Fatal(err)
	}
	f.top = top
	return f
}

func scanTree(path string) (*fnode, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		b, err := os.ReadFile(path)
		return &fnode{durable: b}, err
	}
	n := newDirNode()
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		c, err := scanTree(filepath.Join(path, e.Name()))
		if err != nil {
			return nil, err
		}
		n.live[e.Name()], n.durableDir[e.Name()] = c, c
	}
	return n, nil
}

// rel splits a path under root into its components; ok is false outside root.
func (f *faultFS) rel(path string) ([]string, bool) {
	r, err := filepath.Rel(f.root, filepath.Clean(path))
	if err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return nil, false
	}
	if r == "." {
		return nil, true
	}
	return strings.Split(r, string(filepath.Separator)), true
}

// lookup returns the live node at path and its parent directory (nil when missing).
func (f *faultFS) lookup(path string) (node, parent *fnode, name string) {
	parts, ok := f.rel(path)
	if !ok {
		return nil, nil, ""
	}
	if len(parts) == 0 {
		return f.top, nil, ""
	}
	dir := f.top
	for _, p := range parts[:len(parts)-1] {
		dir = dir.live[p]
		if dir == nil || !dir.dir {
			return nil, nil, ""
		}
	}
	name = parts[len(parts)-1]
	return dir.live[name], dir, name
}

// begin accounts for an operation (f.mu held): it fails when the process crashed or
// when inject says so.
func (f *faultFS) begin(op fsOp, path string) error {
	if f.crashed {
		return errCrashed
	}
	c := fsCall{op: op, path: path}
	if op.changes() {
		f.step++
		c.step = f.step
		if f.crashAt > 0 && f.step >= f.crashAt {
			f.crashed = true
			return errCrashed
		}
		f.trace = append(f.trace, fmt.Sprintf("%d %s %s", f.step, op, f.short(path)))
	}
	if f.inject != nil {
		if err := f.inject(c); err != nil {
			return &os.PathError{Op: string(op), Path: path, Err: err}
		}
	}
	return nil
}

func (f *faultFS) short(path string) string {
	if r, err := filepath.Rel(f.root, path); err == nil {
		return r
	}
	return path
}

// steps returns how many changing operations ran so far.
func (f *faultFS) steps() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.step
}

// crashAfter makes step n+1 and everything after it fail (0 ≤ n; the process dies
// after n more steps).
func (f *faultFS) crashAfter(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.crashAt = f.step + n + 1
}

func (f *faultFS) setInject(fn func(fsCall) error) {
	f.mu.Lock()
	f.inject = fn
	f.mu.Unlock()
}

func (f *faultFS) traceSince(step int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, t := range f.trace {
		var n int
		fmt.Sscanf(t, "%d", &n)
		if n > step {
			out = append(out, t)
		}
	}
	return strings.Join(out, "\n")
}

func (f *faultFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	node, parent, base := f.lookup(name)
	op := opOpen
	if node == nil && flag&os.O_CREATE != 0 {
		op = opCreate
	} else if flag&(os.O_TRUNC) != 0 {
		op = opTruncate
	}
	if err := f.begin(op, name); err != nil {
		return nil, err
	}
	if flag&os.O_WRONLY != 0 { // Sync reads the file back to record its content
		flag = flag&^os.O_WRONLY | os.O_RDWR
	}
	real, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if node == nil && parent != nil {
		node = &fnode{}
		parent.live[base] = node
	}
	return &faultFile{fs: f, f: real, node: node, path: name}, nil
}

func (f *faultFS) Rename(oldpath, newpath string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(opRename, oldpath); err != nil {
		return err
	}
	if err := os.Rename(oldpath, newpath); err != nil {
		return err
	}
	node, oldParent, oldBase := f.lookup(oldpath)
	_, newParent, newBase := f.lookup(newpath)
	if node != nil && oldParent != nil && newParent != nil {
		delete(oldParent.live, oldBase)
		newParent.live[newBase] = node
	}
	return nil
}

func (f *faultFS) Remove(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(opRemove, name); err != nil {
		return err
	}
	if err := os.Remove(name); err != nil {
		return err
	}
	if _, parent, base := f.lookup(name); parent != nil {
		delete(parent.live, base)
	}
	return nil
}

func (f *faultFS) RemoveAll(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(opRemove, name); err != nil {
		return err
	}
	if err := os.RemoveAll(name); err != nil {
		return err
	}
	if _, parent, base := f.lookup(name); parent != nil {
		delete(parent.live, base)
	}
	return nil
}

func (f *faultFS) MkdirAll(name string, perm os.FileMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n, _, _ := f.lookup(name); n != nil && n.dir {
		return nil
	}
	if err := f.begin(opMkdir, name); err != nil {
		return err
	}
	if err := os.MkdirAll(name, perm); err != nil {
		return err
	}
	parts, ok := f.rel(name)
	if !ok {
		return nil
	}
	dir := f.top
	for _, p := range parts {
		next := dir.live[p]
		if next == nil {
			next = newDirNode()
			dir.live[p] = next
		}
		dir = next
	}
	return nil
}

func (f *faultFS) ReadDir(name string) ([]os.DirEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(opReadDir, name); err != nil {
		return nil, err
	}
	return os.ReadDir(name)
}

func (f *faultFS) Stat(name string) (os.FileInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(opStat, name); err != nil {
		return nil, err
	}
	return os.Stat(name)
}

func (f *faultFS) Chtimes(name string, atime, mtime time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(opChtimes, name); err != nil {
		return err
	}
	return os.Chtimes(name, atime, mtime)
}

func (f *faultFS) SyncDir(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(opSyncDir, name); err != nil {
		return err
	}
	if n, _, _ := f.lookup(name); n != nil && n.dir {
		n.durableDir = make(map[string]*fnode, len(n.live))
		for k, v := range n.live {
			n.durableDir[k] = v
		}
	}
	return nil
}

// faultFile is an open file of a faultFS.
type faultFile struct {
	fs   *faultFS
	f    *os.File
	node *fnode // nil outside root
	path string
}

func (ff *faultFile) ReadAt(b []byte, off int64) (int, error) {
	ff.fs.mu.Lock()
	err := ff.fs.begin(opRead, ff.path)
	ff.fs.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return ff.f.ReadAt(b, off)
}

func (ff *faultFile) WriteAt(b []byte, off int64) (int, error) {
	ff.fs.mu.Lock()
	defer ff.fs.mu.Unlock()
	if err := ff.fs.begin(opWrite, ff.path); err != nil {
		if errors.Is(err, errCrashed) {
			return 0, err
		}
		n, _ := ff.f.WriteAt(b[:len(b)/2], off) // a partial write
		return n, err
	}
	return ff.f.WriteAt(b, off)
}

func (ff *faultFile) Truncate(size int64) error {
	ff.fs.mu.Lock()
	defer ff.fs.mu.Unlock()
	if err := ff.fs.begin(opTruncate, ff.path); err != nil {
		return err
	}
	return ff.f.Truncate(size)
}

func (ff *faultFile) Sync() error {
	ff.fs.mu.Lock()
	defer ff.fs.mu.Unlock()
	if err := ff.fs.begin(opSync, ff.path); err != nil {
		return err
	}
	if ff.node == nil {
		return nil
	}
	st, err := ff.f.Stat()
	if err != nil {
		return err
	}
	b := make([]byte, st.Size())
	if _, err := ff.f.ReadAt(b, 0); err != nil && err != io.EOF {
		return err
	}
	ff.node.durable = b
	return nil
}

func (ff *faultFile) Stat() (os.FileInfo, error) { return ff.f.Stat() }
func (ff *faultFile) Close() error               { return ff.f.Close() }
func (ff *faultFile) OS() *os.File               { return ff.f }

// crashMode says what survives a crash.
type crashMode int

const (
	// crashProcess: the process dies (kill -9); everything written stays (page cache).
	crashProcess crashMode = iota
	// crashOS: the machine dies; only what was made durable stays.
	crashOS
	// crashTorn: the machine dies while writing back: the durable content plus a
	// random part of what was written after it (a torn tail), durable names only.
	crashTorn
)

func (m crashMode) String() string { return [...]string{"process", "os", "torn"}[m] }

// image writes into dst (an empty or missing directory) what a crash of the given
// mode leaves of root.
func (f *faultFS) image(t testing.TB, dst string, mode crashMode, rng *rand.Rand) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if mode == crashProcess {
		if err := copyTree(f.root, dst); err != nil {
			t.Fatal(err)
		}
		return
	}
	livePaths := map[*fnode]string{}
	var walk func(n *fnode, path string)
	walk = func(n *fnode, path string) {
		livePaths[n] = path
		for name, c := range n.live {
			walk(c, filepath.Join(path, name))
		}
	}
	walk(f.top, f.root)
	var write func(n *fnode, path string) error
	write = func(n *fnode, path string) error {
		if n.dir {
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
			names := make([]string, 0, len(n.durableDir))
			for name := range n.durableDir {
				names = append(names, name)
			}
			sort.Strings(names) // the random choices stay reproducible
			for _, name := range names {
				if err := write(n.durableDir[name], filepath.Join(path, name)); err != nil {
					return err
				}
			}
			return nil
		}
		data := n.durable
		if mode == crashTorn {
			if lp, ok := livePaths[n]; ok {
				if live, err := os.ReadFile(lp); err == nil && len(live) > len(data) && string(live[:len(data)]) == string(data) {
					data = live[:len(data)+rng.Intn(len(live)-len(data)+1)]
				}
			}
		}
		return os.WriteFile(path, data, 0o644)
	}
	if err := write(f.top, dst); err != nil {
		t.Fatal(err)
	}
}

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, r)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

// modelDir returns a fresh directory for a faultFS, removed when the test ends. It is
// on /dev/shm when there is one: faultFS models durability itself, and creating a
// file there costs microseconds, not the milliseconds of some disks.
func modelDir(t testing.TB) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "samsa-storage-test-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// errNoSpace and errIO are what tests inject.
var (
	errNoSpace = syscall.ENOSPC
	errIO      = syscall.EIO
)

// failWhen returns an inject function failing the operations op on paths ending in
// suffix ("" for every path) with err.
func failWhen(op fsOp, suffix string, err error) func(fsCall) error {
	return func(c fsCall) error {
		if c.op == op && strings.HasSuffix(c.path, suffix) {
			return err
		}
		return nil
	}
}
