package storage

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// TestDiskFull: every writer meets a full disk (ENOSPC) in turn — the segment write of
// an append, the new segment of a roll, the producer snapshot and index files a roll
// writes, log-state, the leader epoch checkpoint, Close — with flushes left to Flush
// and with flush.messages=1 (each append flushes: syncs its data, writes the
// checkpoint when a new epoch began, moves the recovery point). An append that cannot be
// written fails with ErrNoSpace and leaves the log as it was (nothing acknowledged
// that is not in the log); the others fail or log, corrupting nothing; once space is
// freed appends continue at the right offsets without reopening; a restart (clean, or
// after Close itself failed) serves everything acknowledged.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		op   fsOp
		path string
		// refused: appends fail with ErrNoSpace while the disk is full.
		refused bool
	}{
		{"segment write", opWrite, logSuffix, true},
		{"new segment at a roll", opCreate, logSuffix, true},
		{"producer snapshot at a roll", opWrite, snapshotSuffix + tmpSuffix, false},
		{"index files at a roll", opWrite, indexSuffix, false},
		{"log-state", opWrite, logStateFile + tmpSuffix, false},
		{"leader epoch checkpoint", opWrite, leaderEpochFile + tmpSuffix, false},
		{"every write", opWrite, "", true},
	}
	for _, tt := range tests {
		for _, c := range []struct{ closeWhileFull, flushEach bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
			name := tt.name
			if c.closeWhileFull {
				name += "/closed while full"
			}
			if c.flushEach {
				name += "/flush.messages=1"
			}
			closeWhileFull := c.closeWhileFull
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				cfg := crashConfig()
				if c.flushEach {
					cfg.FlushIntervalMessages = 1
				}
				w := newWorld(t, cfg)
				l := w.openLog(scenarioKey)
				w.fillSegments(scenarioKey, 2, 5)
				l.background.Wait()
				w.fs.setInject(failWhen(tt.op, tt.path, errNoSpace))
				refused := 0
				for i := range 12 { // enough to roll
					end, size := l.LogEndOffset(), l.Size()
					err := w.append(scenarioKey, 2, 5, int32(3+i/6))
					switch {
					case err == nil:
					case errors.Is(err, ErrNoSpace) && errors.Is(err, syscall.ENOSPC):
						refused++
						if l.LogEndOffset() != end || l.Size() != size {
							t.Fatalf("a refused append changed the log: end %d→%d, size %d→%d", end, l.LogEndOffset(), size, l.Size())
						}
					default:
						t.Fatalf("append %d: %v", i, err)
					}
				}
				if tt.refused != (refused > 0) {
					t.Fatalf("%d appends refused while the disk was full", refused)
				}
				_ = l.Flush() // may fail (log-state), must not break anything
				l.background.Wait()
				if !closeWhileFull {
					w.fs.setInject(nil)
					w.mustAppend(scenarioKey, 2, 5, 9) // space freed: appends continue
				}
				// The Manager writes the clean-shutdown marker only when Close succeeded.
				epochs := l.EpochEntries()
				clean := l.Close() == nil
				w.fs.setInject(nil)
				if m, _ := filepath.Glob(filepath.Join(l.Dir(), "*"+tmpSuffix)); len(m) > 0 {
					t.Fatalf("left %v", m)
				}
				l2 := w.reopenLog(t, w.root, scenarioKey, clean)
				if got := l2.EpochEntries(); !slices.Equal(got, epochs) {
					t.Fatalf("leader epochs after the restart %v, want %v", got, epochs)
				}
				verifyLog(t, l2, w.ref[scenarioKey], expect{acked: w.ref[scenarioKey].end()})
			})
		}
	}
}

// TestCleanerDiskFull: a cleaning that meets a full disk removes its .cleaned files,
// does not mark the log uncleanable (Kafka would, until a restart), and the next pass
// once space is freed cleans it.
func TestCleanerDiskFull(t *testing.T) {
	t.Parallel()
	cfg := crashConfig()
	cfg.Compact, cfg.DeleteRetention, cfg.MinCleanableDirtyRatio = true, false, 0.01
	w := newWorld(t, cfg)
	l := w.openLog(scenarioKey)
	w.fillSegments(scenarioKey, 4, 4)
	c := NewCleaner(CleanerOptions{Clock: w.clock, Logger: testLogger(t)}, func() []*Log { return []*Log{l} })
	w.fs.setInject(failWhen(opWrite, cleanedSuffix, errNoSpace))
	if _, err := c.CleanOnce(context.Background()); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("cleaning on a full disk: %v", err)
	}
	assertNoCleanerFiles(t, l.Dir())
	if c.mu.uncleanable[l] {
		t.Fatal("a full disk marked the log uncleanable")
	}
	w.fs.setInject(nil)
	if n, err := c.CleanOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("cleaning once space is freed: %d %v", n, err)
	}
	checkLogContent(t, l, w.ref[scenarioKey], expect{acked: w.ref[scenarioKey].end(), compacted: true})
}
