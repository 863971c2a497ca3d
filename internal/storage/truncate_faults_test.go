package storage

import (
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"syscall"
	"testing"
)

// truncation is a follower's truncation as the tests drive it: the log cut back to a
// batch boundary (into an older segment, or inside the active one), then the new
// leader's records appended at the same offsets in epoch 3 (the same keys, values
// and timestamps as the ones cut, which the reference derives from the offset, so
// that a record read back is right whichever of the two copies it is) and flushed.
type truncation struct {
	name string
	// to picks the offset to truncate to, a batch's base offset.
	to func(l *Log) int64
}

var truncations = []truncation{
	{"into an older segment", func(l *Log) int64 { return l.segs()[1].base + 4 }},
	{"inside the active segment", func(l *Log) int64 { return l.active().base + 2 }},
}

// setupTruncation fills four segments (epochs 1 and 2) and flushes them, so that the
// recovery point lies above the truncation point and must come down with it.
func setupTruncation(w *world, tr truncation) {
	l := w.openLog(scenarioKey)
	w.fillSegments(scenarioKey, 4, 5)
	w.mustAppend(scenarioKey, 2, 5, 2)
	w.mustAppend(scenarioKey, 2, 5, 2)
	if err := l.Flush(); err != nil {
		w.t.Fatal(err)
	}
	w.offset = tr.to(l)
	if w.offset%2 != 0 || w.offset >= l.LogEndOffset() {
		w.t.Fatalf("truncation point %d: not a batch inside the log [%d, %d)", w.offset, l.LogStartOffset(), l.LogEndOffset())
	}
}

// truncateAndRefill truncates to w.offset and appends the cut offsets again in epoch
// 3. The reference keeps the cut records among what may be there.
func truncateAndRefill(w *world) (truncated bool, err error) {
	l, ref := w.logs[scenarioKey], w.ref[scenarioKey]
	end := l.LogEndOffset()
	if err := l.TruncateTo(w.offset); err != nil {
		return false, err
	}
	if got := l.LogEndOffset(); got != w.offset {
		w.t.Fatalf("log end %d after TruncateTo(%d)", got, w.offset)
	}
	if ref.maybe == nil {
		ref.maybe = map[int64]refRecord{}
	}
	for len(ref.recs) > 0 && ref.recs[len(ref.recs)-1].offset >= w.offset {
		r := ref.recs[len(ref.recs)-1]
		ref.maybe[r.offset] = r
		ref.recs = ref.recs[:len(ref.recs)-1]
	}
	for l.LogEndOffset() < end {
		if err := w.append(scenarioKey, 2, 5, 3); err != nil {
			return true, err
		}
	}
	return true, l.Flush()
}

// fullFromWrite is an inject function under which the disk fills at the k-th write
// (or file creation) and stays full; *writes counts them.
func fullFromWrite(k int, writes *int) func(fsCall) error {
	return func(c fsCall) error {
		if c.op == opWrite || c.op == opCreate {
			if *writes++; *writes >= k {
				return errNoSpace
			}
		}
		return nil
	}
}

// TestCrashAtEveryStepOfTruncation: a follower's truncation (checkpoints lowered,
// later segments removed, the segment holding the point cut, its index files removed)
// followed by the new leader's records and a flush, with a crash after every step.
// The restarted log holds every record acknowledged before the truncation below its
// point, every one appended after it once the truncation returned, no gap, and a
// leader epoch cache that matches its batches (a cache naming epoch 2 for offsets the
// log holds in epoch 3 would answer OffsetForLeaderEpoch wrongly).
func TestCrashAtEveryStepOfTruncation(t *testing.T) {
	t.Parallel()
	for _, tr := range truncations {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			var truncated bool
			runCrashSteps(t, crashConfig(), crashScenario{
				name: "truncation " + tr.name,
				setup: func(w *world) {
					truncated = false
					setupTruncation(w, tr)
				},
				op: func(w *world) error {
					var err error
					truncated, err = truncateAndRefill(w)
					return err
				},
				verify: logVerify(func(w *world, completed bool, mode crashMode) expect {
					switch {
					case completed:
						return expect{acked: w.ref[scenarioKey].end()}
					case mode == crashProcess && truncated:
						return expect{acked: w.ref[scenarioKey].end()}
					case mode == crashProcess:
						return expect{acked: w.offset}
					}
					return expect{acked: min(w.offset, w.before[scenarioKey].recoveryPoint)}
				}),
			})
		})
	}
}

// TestTruncationOnAFullDisk: the disk fills at each write of a truncation in turn and
// stays full. The truncation either completes or fails with ErrNoSpace (the
// directory stays online); the log is consistent either way and keeps every record
// below the truncation point; once space is freed the truncation, retried as a
// follower retries it, completes, the new leader's records follow, and a restart
// (after a crash, or clean) serves them.
func TestTruncationOnAFullDisk(t *testing.T) {
	t.Parallel()
	for _, tr := range truncations {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			for k := 1; ; k++ {
				w := newWorld(t, crashConfig())
				setupTruncation(w, tr)
				w.mark()
				l := w.logs[scenarioKey]
				writes := 0
				w.fs.setInject(fullFromWrite(k, &writes))
				err := l.TruncateTo(w.offset)
				w.fs.setInject(nil)
				if err == nil && writes < k {
					t.Logf("%d writes", writes)
					return // every write has had its turn
				}
				ok := t.Run(fmt.Sprintf("disk full from write %d", k), func(t *testing.T) {
					if err != nil && !(errors.Is(err, ErrNoSpace) && errors.Is(err, syscall.ENOSPC)) {
						t.Fatalf("truncation on a full disk: %v, want ErrNoSpace", err)
					}
					if end := l.LogEndOffset(); end != w.offset && end != w.before[scenarioKey].end {
						t.Fatalf("log end %d after a failed truncation from %d to %d", end, w.before[scenarioKey].end, w.offset)
					}
					checkLogContent(t, l, w.ref[scenarioKey], expect{acked: w.offset})
					if _, err := truncateAndRefill(w); err != nil {
						t.Fatalf("truncating once space is freed: %v", err)
					}
					checkLogContent(t, l, w.ref[scenarioKey], expect{acked: w.ref[scenarioKey].end()})
					w.abandon()
					dst := filepath.Join(modelDir(t), "after")
					w.fs.image(t, dst, crashOS, rand.New(rand.NewSource(int64(k))))
					verifyLog(t, w.reopenLog(t, dst, scenarioKey, false), w.ref[scenarioKey], expect{acked: w.ref[scenarioKey].end()})
				})
				if !ok {
					t.FailNow()
				}
			}
		})
	}
}

// TestDeleteRecordsOnAFullDisk: a log start move (DeleteRecords, a follower taking
// its leader's log start) whose log-state write meets a full disk fails with
// ErrNoSpace, not an I/O error; the new log start holds in memory and the next
// checkpoint, once space is freed, makes it durable.
func TestDeleteRecordsOnAFullDisk(t *testing.T) {
	t.Parallel()
	w := newWorld(t, crashConfig())
	l := w.openLog(scenarioKey)
	w.fillSegments(scenarioKey, 3, 5)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	to := l.segs()[1].base + 2
	w.fs.setInject(failWhen(opWrite, logStateFile+tmpSuffix, errNoSpace))
	if _, err := l.DeleteRecordsBefore(to); !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("DeleteRecords on a full disk: %v, want ErrNoSpace", err)
	}
	if got := l.LogStartOffset(); got != to {
		t.Fatalf("log start %d after DeleteRecords(%d) on a full disk", got, to)
	}
	w.fs.setInject(nil)
	if err := l.CheckpointState(); err != nil {
		t.Fatal(err)
	}
	w.abandon()
	dst := filepath.Join(modelDir(t), "after")
	w.fs.image(t, dst, crashOS, rand.New(rand.NewSource(1)))
	verifyLog(t, w.reopenLog(t, dst, scenarioKey, false), w.ref[scenarioKey], expect{minStart: to, maxStart: to, acked: w.ref[scenarioKey].end()})
}

// TestStartOverOnAFullDisk: a follower behind its leader's log start empties its log
// and starts it at that offset (TruncateFullyAndStartAt) while the disk fills at each
// write in turn. It fails with ErrNoSpace or completes: when the new segment cannot
// be created nothing changed, and once it exists the log is the new, empty one
// whatever fails after. Before, a failed creation left the log without a segment,
// and the next flush panicked. Once space is freed the checkpoints are written,
// appends continue at the new start, and a restart after a machine crash serves them.
func TestStartOverOnAFullDisk(t *testing.T) {
	t.Parallel()
	for k := 1; ; k++ {
		w := newWorld(t, crashConfig())
		l := w.openLog(scenarioKey)
		w.fillSegments(scenarioKey, 3, 5)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		start := l.LogEndOffset() + 100
		writes := 0
		w.fs.setInject(fullFromWrite(k, &writes))
		err := l.TruncateFullyAndStartAt(start)
		w.fs.setInject(nil)
		if err == nil && writes < k {
			t.Logf("%d writes", writes)
			return
		}
		ok := t.Run(fmt.Sprintf("disk full from write %d", k), func(t *testing.T) {
			if err != nil && !(errors.Is(err, ErrNoSpace) && errors.Is(err, syscall.ENOSPC)) {
				t.Fatalf("starting over on a full disk: %v, want ErrNoSpace", err)
			}
			if l.LogEndOffset() != start {
				// The new segment could not be created: nothing changed, and the
				// follower starts over at its next fetch.
				checkLogContent(t, l, w.ref[scenarioKey], expect{acked: w.ref[scenarioKey].end()})
				if err := l.TruncateFullyAndStartAt(start); err != nil {
					t.Fatalf("starting over once space is freed: %v", err)
				}
			}
			if l.LogStartOffset() != start || l.LogEndOffset() != start {
				t.Fatalf("log [%d, %d) after starting over at %d", l.LogStartOffset(), l.LogEndOffset(), start)
			}
			if n := len(l.EpochEntries()); n != 0 {
				t.Fatalf("epochs %v left in an emptied log", l.EpochEntries())
			}
			ref := w.ref[scenarioKey]
			ref.maybe, ref.recs = nil, nil
			w.mustAppend(scenarioKey, 2, 5, 3)
			if err := errors.Join(l.Flush(), l.CheckpointState()); err != nil {
				t.Fatal(err)
			}
			w.abandon()
			dst := filepath.Join(modelDir(t), "after")
			w.fs.image(t, dst, crashOS, rand.New(rand.NewSource(int64(k))))
			verifyLog(t, w.reopenLog(t, dst, scenarioKey, false), ref, expect{minStart: start, maxStart: start, acked: start + 2})
		})
		if !ok {
			t.FailNow()
		}
	}
}

// TestCrashAtEveryStepOfStartOver: a follower starting its log over at its leader's
// log start (the new segment, the old ones removed, the checkpoints), then the
// leader's records appended there and flushed, with a crash after every step. The
// restarted log is either a prefix of the old one or the new one, never the two with
// a hole between them, and holds the new records once they were flushed.
func TestCrashAtEveryStepOfStartOver(t *testing.T) {
	t.Parallel()
	runCrashSteps(t, crashConfig(), crashScenario{
		name: "start over",
		setup: func(w *world) {
			l := w.openLog(scenarioKey)
			w.fillSegments(scenarioKey, 3, 5)
			if err := l.Flush(); err != nil {
				w.t.Fatal(err)
			}
			w.offset = l.LogEndOffset() + 100
		},
		op: func(w *world) error {
			if err := w.logs[scenarioKey].TruncateFullyAndStartAt(w.offset); err != nil {
				return err
			}
			if err := w.append(scenarioKey, 2, 5, 3); err != nil {
				return err
			}
			return w.logs[scenarioKey].Flush()
		},
		verify: func(t *testing.T, w *world, dir string, completed bool, mode crashMode) {
			l := w.reopenLog(t, dir, scenarioKey, false)
			// The old log (a prefix of it) or the new one, each checked against what
			// was written to it.
			old, fresh := &reference{maybe: map[int64]refRecord{}}, &reference{}
			all := w.ref[scenarioKey]
			for _, r := range all.maybe {
				old.maybe[r.offset] = r
			}
			for _, r := range all.recs {
				if r.offset < w.offset {
					old.maybe[r.offset] = r
				} else {
					fresh.recs = append(fresh.recs, r)
				}
			}
			if l.LogStartOffset() < w.offset {
				verifyLog(t, l, old, expect{})
				return
			}
			exp := expect{minStart: w.offset, maxStart: w.offset}
			if completed {
				exp.acked = fresh.end()
			}
			if len(fresh.recs) == 0 {
				// Nothing appended yet: the empty log at the new start.
				fresh.maybe = map[int64]refRecord{w.offset - 1: {offset: w.offset - 1}}
			}
			verifyLog(t, l, fresh, exp)
		},
	})
}
