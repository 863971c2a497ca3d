package bench

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWaitTopicFilesGone: a deleted topic's partition directories, renamed for removal
// or not, are waited for; another topic's whose name extends it is not.
func TestWaitTopicFilesGone(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"bench-a-1-0.0123456789abcdef0123456789abcdef-delete", "bench-a-1-x-0", "bench-a-10-0"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if left := waitTopicFilesGone(dir, "bench-a-1", 100*time.Millisecond); left != "bench-a-1-0.0123456789abcdef0123456789abcdef-delete" {
		t.Fatalf("left %q, want the directory renamed for removal", left)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		os.Remove(filepath.Join(dir, "bench-a-1-0.0123456789abcdef0123456789abcdef-delete"))
	}()
	if left := waitTopicFilesGone(dir, "bench-a-1", 10*time.Second); left != "" {
		t.Fatalf("left %q after its removal; other topics' directories must not count", left)
	}
}
