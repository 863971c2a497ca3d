package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/samsa-streaming/samsa/internal/clock"
)

// treeState lists every file and directory under root with its size and content, to
// tell whether anything changed.
func treeState(t *testing.T, root string) string {
	t.Helper()
	var out []string
	err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(root, p)
		if info.IsDir() {
			out = append(out, r+"/")
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s %d %x %s", r, info.Size(), b[:min(len(b), 64)], info.ModTime()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// usedDirs returns log directories a node 1 has used and shut down cleanly, with a
// partition in each.
func usedDirs(t *testing.T, n int) []string {
	t.Helper()
	var dirs []string
	for range n {
		dirs = append(dirs, t.TempDir())
	}
	m, err := NewManager(ManagerOptions{Dirs: dirs, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.EnsureMetaProperties(1); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		l, err := m.GetOrCreate("t", int32(i), [16]byte{1}, Config{})
		if err != nil {
			t.Fatal(err)
		}
		l.mustAppendT(t, simple(t, 1, 0))
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	return dirs
}

// TestRefusedStartTouchesNothing: a start refused because of meta.properties (another
// node.id, directories of two clusters, a garbage file) names the file, the values
// and what to do, and leaves every file as it was (the clean-shutdown marker too, so
// the correct start after it is a clean one).
func TestRefusedStartTouchesNothing(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, dirs []string)
		nodeID int32
		is     error
		says   []string
	}{
		{name: "node.id mismatch", nodeID: 2, is: ErrNodeIDMismatch,
			says: []string{"node.id=1", "node.id is 2", metaPropertiesFile, "start it with node.id=1"}},
		{name: "cluster.id mismatch", nodeID: 1, is: ErrClusterIDMismatch, damage: func(t *testing.T, dirs []string) {
			p := filepath.Join(dirs[1], metaPropertiesFile)
			b, _ := os.ReadFile(p)
			mp, _ := readMetaProperties(OSFS{}, dirs[1])
			os.WriteFile(p, []byte(strings.Replace(string(b), mp.clusterID, "AAAAAAAAAAAAAAAAAAAAAA", 1)), 0o644)
		}, says: []string{"cluster.id=AAAAAAAAAAAAAAAAAAAAAA", "DIR0", "remove the directory"}},
		{name: "garbage meta.properties", nodeID: 1, is: ErrCorrupt, damage: func(t *testing.T, dirs []string) {
			os.WriteFile(filepath.Join(dirs[0], metaPropertiesFile), []byte("\x00\x01garbage\xff"), 0o644)
		}, says: []string{metaPropertiesFile, "restore it from a backup"}},
		{name: "meta.properties without node.id", nodeID: 1, is: ErrCorrupt, damage: func(t *testing.T, dirs []string) {
			os.WriteFile(filepath.Join(dirs[0], metaPropertiesFile), []byte("version=1\ncluster.id=x\n"), 0o644)
		}, says: []string{metaPropertiesFile, `node.id=""`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dirs := usedDirs(t, 2)
			if tt.damage != nil {
				tt.damage(t, dirs)
			}
			before := []string{treeState(t, dirs[0]), treeState(t, dirs[1])}
			m, err := NewManager(ManagerOptions{Dirs: dirs, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.EnsureMetaProperties(tt.nodeID)
			if cerr := m.Close(); cerr != nil { // as the broker does after a refused start
				t.Fatal(cerr)
			}
			if !errors.Is(err, tt.is) {
				t.Fatalf("EnsureMetaProperties: %v, want %v", err, tt.is)
			}
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), strings.ReplaceAll(s, "DIR0", dirs[0])) {
					t.Errorf("the error does not say %q: %v", s, err)
				}
			}
			for i, d := range dirs {
				if after := treeState(t, d); after != before[i] {
					t.Fatalf("refused start changed %s:\nbefore:\n%s\nafter:\n%s", d, before[i], after)
				}
			}
		})
	}
}

// TestPlacementOneAtATime: partitions created concurrently (as the broker's reconcile
// does, 16 at a time) are spread over the log directories, the one with the fewest
// first, counting those being created; an offline directory gets none.
func TestPlacementOneAtATime(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	m := newTestManager(t, dirs, clock.NewFake(t0))
	count := func() []int {
		n := make([]int, len(dirs))
		for k := range m.Logs() {
			for i, d := range dirs {
				if m.DirOf(k.Topic, k.Partition) == d {
					n[i]++
				}
			}
		}
		return n
	}
	create := func(topic string, n int) {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for p := range n {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if _, err := m.GetOrCreate(topic, int32(p), [16]byte{3}, Config{}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	create("a", 30)
	if got := count(); fmt.Sprint(got) != "[10 10 10]" {
		t.Fatalf("30 partitions created together placed %v, want 10 in each directory", got)
	}
	// Unbalanced directories fill up the emptiest first.
	for p := range 6 {
		if err := m.Delete("a", int32(p)); err != nil {
			t.Fatal(err)
		}
	}
	before := count()
	create("b", 6)
	if got := count(); got[0]+got[1]+got[2] != 30 || got[0] != got[1] || got[1] != got[2] {
		t.Fatalf("after deleting 6 of %v and creating 6: %v, want them balanced", before, got)
	}
	m.MarkOffline(dirs[0], errors.New("test"))
	create("c", 4)
	if got := count(); got[0] != 0 || got[1] != 12 || got[2] != 12 {
		t.Fatalf("with the first directory offline: %v, want [0 12 12]", got)
	}
}

// TestForeignFilesAreLeftAlone: what Samsa did not write in a log directory (a stray
// file, an empty or oddly named directory, a directory named like a partition holding
// other files, a -delete directory of someone else's) is logged and ignored: never
// opened as a partition, adopted or deleted.
func TestForeignFilesAreLeftAlone(t *testing.T) {
	dir := t.TempDir()
	foreign := map[string]string{ // path → content ("" for a directory)
		"notes.txt":                  "hello",
		"foo/":                       "",
		"notes-1/readme":             "mine",
		"empty-0/":                   "",
		"old-2.tmp/":                 "",
		"stuff-delete/keep":          "keep",
		"x-0.1234-delete/keep":       "keep",
		"lost+found/":                "",
		"t-0/partition.metadata.bak": "operator's copy", // inside a real partition
	}
	m := newTestManager(t, []string{dir}, clock.NewFake(t0))
	l, err := m.GetOrCreate("t", 0, [16]byte{1}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	l.mustAppendT(t, simple(t, 1, 0))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for p, content := range foreign {
		full := filepath.Join(dir, p)
		if strings.HasSuffix(p, "/") {
			os.MkdirAll(full, 0o755)
			continue
		}
		os.MkdirAll(filepath.Dir(full), 0o755)
		os.WriteFile(full, []byte(content), 0o644)
	}
	logger, logs := captureLogger()
	m2, err := NewManager(ManagerOptions{Dirs: []string{dir}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if err := m2.LoadExisting(nil); err != nil {
		t.Fatalf("LoadExisting: %v", err)
	}
	if got := len(m2.Logs()); got != 1 || m2.Get("t", 0) == nil {
		t.Fatalf("%d logs opened, want only t-0", got)
	}
	for _, name := range []string{"notes.txt", "foo", "notes-1", "empty-0", "old-2.tmp", "stuff-delete", "x-0.1234-delete", "lost+found"} {
		if !strings.Contains(logs.String(), name) {
			t.Errorf("no log line names %s:\n%s", name, logs.String())
		}
	}
	// A broker deleting the logs of topics that do not exist, and cleaning up.
	for _, k := range m2.Existing() {
		if k.Topic != "t" {
			if err := m2.Delete(k.Topic, k.Partition); err != nil {
				t.Fatal(err)
			}
		}
	}
	m2.removeDeletedDirs()
	// A topic named like a foreign directory: refused, not adopted; an empty one is.
	if _, err := m2.GetOrCreate("notes", 1, [16]byte{2}, Config{}); !errors.Is(err, ErrForeignDir) || !strings.Contains(err.Error(), "readme") {
		t.Fatalf("creating notes-1 over a foreign directory: %v", err)
	}
	if _, err := m2.GetOrCreate("empty", 0, [16]byte{2}, Config{}); err != nil {
		t.Fatalf("an empty directory of an existing partition is adopted: %v", err)
	}
	for p, content := range foreign {
		full := filepath.Join(dir, p)
		if strings.HasSuffix(p, "/") {
			if st, err := os.Stat(full); err != nil || !st.IsDir() {
				t.Errorf("%s is gone", p)
			}
			continue
		}
		if b, err := os.ReadFile(full); err != nil || string(b) != content {
			t.Errorf("%s changed: %q %v", p, b, err)
		}
	}
}
