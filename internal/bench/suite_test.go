package bench

import (
	"os"
	"path/filepath"
	"strings"
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

// TestReportWarnsOfUnsteadyWrites: a report whose TCP → file limit differs by more
// than unsteadyWrites between repetitions says so, with the range; a steady one does
// not.
func TestReportWarnsOfUnsteadyWrites(t *testing.T) {
	const warning = "The machine's writes changed speed during this run"
	for _, tc := range []struct {
		sinks []float64
		warn  bool
	}{
		{[]float64{1855, 1948, 465}, true},
		{[]float64{1855, 1948, 1389}, false},
		{[]float64{465}, false},
	} {
		r := &SuiteResult{Repeat: len(tc.sinks)}
		for _, v := range tc.sinks {
			r.LimitsRuns = append(r.LimitsRuns, LimitsResult{SinkMBPerSec: v, SendfileMBPerSec: 2000})
		}
		r.Limits = r.LimitsRuns[0]
		md := r.markdown()
		if got := strings.Contains(md, warning); got != tc.warn {
			t.Errorf("sinks %v: warning %v, want %v:\n%s", tc.sinks, got, tc.warn, md)
		}
		if tc.warn && !strings.Contains(md, "TCP → file 465–1948 MB/s") {
			t.Errorf("sinks %v: the warning does not give the range:\n%s", tc.sinks, md)
		}
	}
}
