package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/samsa-streaming/samsa/internal/record"
)

// TestCleanerCrashAtEachStep kills the cleaner at each step of a segment swap, in the
// first and in a later group of segments, then reopens the log as after a crash: the
// log holds, for every offset range, either the old segments or the cleaned ones (never
// a mix that loses a key's latest value), no cleaner file is left, and a new cleaner
// finishes the job.
func TestCleanerCrashAtEachStep(t *testing.T) {
	steps := []swapStep{stepCleanedWritten, stepSwapRenamed, stepOldDeleted, stepSwapDone}
	for _, step := range steps {
		for _, group := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/group%d", step, group), func(t *testing.T) {
				cfg := compactConfig()
				cfg.FileDeleteDelayMs = 60000 // .deleted files are still there at the crash
				tl := openTest(t, cfg)
				writeUpdates(tl, 20, 300, 1500, 10, tl.plainOpts)
				before := tl.readRecords()
				activeBase, leo := tl.active().base, tl.LogEndOffset()
				segsBefore := len(tl.segs())
				cfg.SegmentBytes = 3 * 4096 // clean groups of about three segments
				tl.UpdateConfig(cfg)
				groups := groupSegments(tl.segs()[:segsBefore-1], activeBase, cfg.SegmentBytes)
				if len(groups) < 3 || len(groups[0]) < 2 {
					t.Fatalf("groups of %d segments: %d", len(groups[0]), len(groups))
				}

				c := newTestCleaner(tl)
				seen, survivors := 0, 0
				c.hook = func(s swapStep) error {
					if s != step {
						return nil
					}
					if seen++; seen == group {
						if s == stepSwapRenamed {
							// The old segments are all still there; the loader
							// replaces those up to the swap segment's last offset
							// (Kafka's rule). Any later one holds only records the
							// cleaning dropped, so it may stay.
							g := groups[group-1]
							last, err := lastOffsetIn(OSFS{}, filepath.Join(tl.Log.dir, fileName(g[0].base, logSuffix)+swapSuffix), g[0].base)
							if err != nil {
								t.Fatal(err)
							}
							for _, old := range g[1:] {
								if old.base > last {
									survivors++
								}
							}
						}
						return errInjectedCrash
					}
					return nil
				}
				if _, err := c.CleanOnce(context.Background()); !errors.Is(err, errInjectedCrash) {
					t.Fatalf("CleanOnce: %v, want the injected crash", err)
				}
				abandon(tl.Log)
				tl.reopen(false)
				assertNoCleanerFiles(t, tl.Log.dir)
				if m, _ := filepath.Glob(filepath.Join(tl.Log.dir, "*"+deletedSuffix)); len(m) > 0 {
					t.Fatalf("left %v", m)
				}
				after := tl.readRecords()
				checkNothingLost(t, before, after, activeBase)
				if tl.LogEndOffset() != leo || tl.LogStartOffset() != 0 {
					t.Fatalf("log [%d, %d), want [0, %d)", tl.LogStartOffset(), tl.LogEndOffset(), leo)
				}
				committed := step != stepCleanedWritten
				done := group - 1 // groups swapped before the crash
				if committed {
					done++
				}
				wantSegs := segsBefore
				for _, g := range groups[:done] {
					wantSegs -= len(g) - 1 // a cleaned group is one segment
				}
				if got := len(tl.segs()); got != wantSegs+survivors {
					t.Fatalf("%d segments after the crash, want %d", got, wantSegs+survivors)
				}
				if !committed && group == 1 && len(after) != len(before) {
					t.Fatalf("%d records after a crash before the commit, want all %d", len(after), len(before))
				}

				if n := cleanOnce(t, newTestCleaner(tl)); n != 1 {
					t.Fatalf("cleaning after the crash: %d logs", n)
				}
				checkCompacted(t, before, tl.readRecords(), activeBase)
			})
		}
	}
}

// abandon drops a log as a killed process would: descriptors closed, nothing flushed,
// renamed or removed.
func abandon(l *Log) {
	l.closed.Store(true)
	l.background.Wait() // a process crash stops its goroutines too
	l.mu.Lock()
	defer l.mu.Unlock()
	for s := range l.mu.pendingDeletes {
		s.file.Close()
	}
	for _, s := range l.segs() {
		s.file.Close()
	}
}

// checkNothingLost: every key's latest record is there at its offset, every record is
// the one written at its offset, and the active segment is complete.
func checkNothingLost(t *testing.T, before, after []kvRecord, activeBase int64) {
	t.Helper()
	byOffset := map[int64]kvRecord{}
	for _, r := range before {
		byOffset[r.offset] = r
	}
	latest := latestByKey(after)
	for k, want := range latestByKey(before) {
		if got, ok := latest[k]; !ok || got.offset != want.offset || got.value != want.value {
			t.Fatalf("key %s: latest %+v, want offset %d", k, got, want.offset)
		}
	}
	active := 0
	for _, r := range after {
		if orig, ok := byOffset[r.offset]; !ok || orig.key != r.key || orig.value != r.value {
			t.Fatalf("record at %d is %q=%q, was %+v", r.offset, r.key, r.value, orig)
		}
		if r.offset >= activeBase {
			active++
		}
	}
	want := 0
	for _, r := range before {
		if r.offset >= activeBase {
			want++
		}
	}
	if active != want {
		t.Fatalf("%d records from the active segment, want %d", active, want)
	}
}

// TestSettleCleanerFiles: the loader's handling of leftovers, file by file.
func TestSettleCleanerFiles(t *testing.T) {
	seg := func(base int64, n int) []byte {
		var out []byte
		for i := 0; i < n; i++ {
			b := simple(t, 1, 0)
			record.SetBaseOffset(b, base+int64(i))
			out = append(out, b...)
		}
		return out
	}
	tests := []struct {
		name  string
		files map[string][]byte // name → content
		want  []string          // names after settling
	}{
		{
			name: "uncommitted cleaning is dropped",
			files: map[string][]byte{
				fileName(0, logSuffix): seg(0, 3), fileName(3, logSuffix): seg(3, 3),
				fileName(0, logSuffix) + cleanedSuffix: seg(2, 1), fileName(0, indexSuffix) + cleanedSuffix: nil,
				fileName(0, indexSuffix) + swapSuffix: nil,
			},
			want: []string{fileName(0, logSuffix), fileName(3, logSuffix)},
		},
		{
			name: "committed swap replaces the segments it covers",
			files: map[string][]byte{
				fileName(0, logSuffix): seg(0, 3), fileName(0, indexSuffix): nil, fileName(3, logSuffix): seg(3, 3),
				fileName(6, logSuffix): seg(6, 3), fileName(9, logSuffix): seg(9, 1),
				fileName(0, logSuffix) + swapSuffix: seg(4, 1), fileName(0, timeIndexSuffix) + swapSuffix: nil,
			},
			want: []string{fileName(0, logSuffix), fileName(0, timeIndexSuffix), fileName(6, logSuffix), fileName(9, logSuffix)},
		},
		{
			name: "empty swap replaces its own base only",
			files: map[string][]byte{
				fileName(0, logSuffix): seg(0, 3), fileName(3, logSuffix): seg(3, 3),
				fileName(0, logSuffix) + swapSuffix: nil,
			},
			want: []string{fileName(0, logSuffix), fileName(3, logSuffix)},
		},
		{
			name: "swap after the old segments were renamed",
			files: map[string][]byte{
				fileName(0, logSuffix) + deletedSuffix: seg(0, 3), fileName(3, logSuffix) + deletedSuffix: seg(3, 3),
				fileName(0, logSuffix) + swapSuffix: seg(5, 1), fileName(6, logSuffix): seg(6, 1),
			},
			want: []string{fileName(0, logSuffix), fileName(3, logSuffix) + deletedSuffix, fileName(0, logSuffix) + deletedSuffix, fileName(6, logSuffix)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := settleCleanerFiles(OSFS{}, dir, ents); err != nil {
				t.Fatal(err)
			}
			ents, _ = os.ReadDir(dir)
			got := map[string]bool{}
			for _, e := range ents {
				got[e.Name()] = true
			}
			for _, w := range tt.want {
				if !got[w] {
					t.Errorf("missing %s (have %v)", w, keys(got))
				}
				delete(got, w)
			}
			if len(got) > 0 {
				t.Errorf("unexpected %v", keys(got))
			}
			if b, err := os.ReadFile(filepath.Join(dir, fileName(0, logSuffix))); err == nil {
				if swap, ok := tt.files[fileName(0, logSuffix)+swapSuffix]; ok && string(b) != string(swap) {
					t.Error("segment 0 is not the swapped one")
				}
			}
		})
	}
}

func keys(m map[string]bool) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return strings.Join(out, " ")
}
