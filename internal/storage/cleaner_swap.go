package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Suffixes of a cleaned segment on its way into the log (format constants, see doc.go).
const (
	cleanedSuffix = ".cleaned" // being written; deleted by the loader
	swapSuffix    = ".swap"    // complete and synced; the loader finishes the swap
)

// errCleanAborted: the log changed under the cleaner (retention, truncation, close)
// or the segments it was reading went away; the pass is dropped without harm.
var errCleanAborted = errors.New("storage: cleaning aborted, log changed")

// cleanerView is what the cleaner reads from a log before a pass, under Log.mu.
type cleanerView struct {
	segs     []*segment
	logStart int64
	// firstUnstable is the first offset of the oldest open transaction (MaxInt64 when
	// none): nothing at or above it is cleaned, as Kafka never cleans past the last
	// stable offset.
	firstUnstable int64
	// lastDataOffset is, per producer known to the producer table, the last offset of
	// its newest data batch: that batch is kept (empty if need be) so that the
	// producer's sequence state survives a reload.
	lastDataOffset map[int64]int64
}

func (l *Log) cleanerView() (cleanerView, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return cleanerView{}, ErrLogClosed
	}
	v := cleanerView{
		segs:           l.segs(),
		logStart:       l.logStart.Load(),
		firstUnstable:  1<<63 - 1,
		lastDataOffset: make(map[int64]int64, len(l.mu.producers.producers)),
	}
	for pid, e := range l.mu.producers.producers {
		if e.txnStartOffset >= 0 {
			v.firstUnstable = min(v.firstUnstable, e.txnStartOffset)
		}
		if n := len(e.batches); n > 0 {
			v.lastDataOffset[pid] = e.batches[n-1].lastOffset
		}
	}
	return v, nil
}

// swapStep names a point of the swap where the tests inject a crash.
type swapStep string

const (
	stepCleanedWritten swapStep = "cleaned-written" // .cleaned files synced
	stepSwapRenamed    swapStep = "swap-renamed"    // renamed to .swap (commit point)
	stepOldDeleted     swapStep = "old-deleted"     // old segments renamed .deleted
	stepSwapDone       swapStep = "swap-done"       // .swap suffix stripped
)

// crashHook is called at each swap step; a non-nil error stops the swap right there,
// leaving the files as a crash would (tests only).
type crashHook func(swapStep) error

// replaceSegments swaps the cleaned segment in for old (consecutive segments of the
// list, oldest first), Kafka's Log.replaceSegments. Under Log.mu it checks that old is
// still in the list as it was, renames the cleaned files to .swap (the commit point:
// from here the loader completes the swap), renames the old segments' files .deleted
// (closed and removed after file.delete.delay.ms, so ranges handed to readers stay
// valid), strips .swap and publishes the new list. When the log changed meanwhile it
// returns errCleanAborted. Unless committed, the caller removes the .cleaned files.
func (l *Log) replaceSegments(old []*segment, cleaned *segment, hook crashHook) (committed bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return false, fmt.Errorf("%w: %w", errCleanAborted, ErrLogClosed)
	}
	segs := l.segs()
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base >= old[0].base })
	if i+len(old) >= len(segs) { // the active segment is never replaced
		return false, errCleanAborted
	}
	for j, s := range old {
		if segs[i+j] != s || s.deleted.Load() {
			return false, errCleanAborted
		}
	}
	// Commit: index files first, the segment file last, then make the renames durable.
	for _, suf := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix} {
		p := cleaned.path(suf)
		if err := l.fs.Rename(p+cleanedSuffix, p+swapSuffix); err != nil {
			switch {
			case suf == txnIndexSuffix && errors.Is(err, os.ErrNotExist):
				// No aborted transaction is left in the cleaned segment.
			case suf == logSuffix, suf == txnIndexSuffix:
				return false, err // not a cache: without it the cleaning is dropped
			default:
				_ = l.fs.Remove(p + cleanedSuffix) // an index is a cache; it is rebuilt
			}
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		// The commit may or may not be durable; the loader settles either way, and the
		// files in memory follow the renames.
		l.logger.Warn("syncing the directory after committing a cleaned segment", "topic", l.topic, "partition", l.partition, "err", err)
	}
	if err := hook.call(stepSwapRenamed); err != nil {
		return true, err
	}

	// Committed. Whatever fails from here, the loader completes the swap at the next
	// open, so the in-memory list follows the files.
	var errs []error
	delay := time.Duration(l.config().FileDeleteDelayMs) * time.Millisecond
	for _, s := range old {
		l.size.Add(-s.size.Load())
		errs = append(errs, s.renameDeleted())
		l.scheduleRemoveLocked(s, delay)
	}
	if err := hook.call(stepOldDeleted); err != nil {
		return true, err
	}
	for _, suf := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix} {
		p := cleaned.path(suf)
		if err := l.fs.Rename(p+swapSuffix, p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, l.fs.SyncDir(l.dir))
	if err := hook.call(stepSwapDone); err != nil {
		return true, err
	}
	next := make([]*segment, 0, len(segs)-len(old)+1)
	next = append(next, segs[:i]...)
	next = append(next, cleaned)
	next = append(next, segs[i+len(old):]...)
	l.setSegments(next)
	l.size.Add(cleaned.size.Load())
	for _, s := range old {
		l.forgetAborted(s)
	}
	l.abortedCount.Add(int64(len(cleaned.idx.aborted)))
	for _, s := range old {
		if s.base == l.mu.recoverySegment {
			// The recovery point's byte position was in a replaced file: recovery reads
			// the cleaned segment from its start (it is on disk: it was fsynced).
			l.mu.recoverySegment, l.mu.recoveryPosition, l.mu.stateDirty = -1, -1, true
		}
	}
	return true, errors.Join(errs...)
}

func (h crashHook) call(s swapStep) error {
	if h == nil {
		return nil
	}
	return h(s)
}

// settleCleanerFiles brings a partition directory to a state without cleaner
// leftovers, before the loader lists its segments (Kafka's LogLoader does the same):
//
//   - *.cleaned files (a cleaning that had not committed) are deleted;
//   - for every <base>.log.swap (committed), the segments it replaces — those whose base
//     offset lies in [base, last offset of the swap segment], <base> itself always —
//     are deleted and the .swap suffix is stripped;
//   - .swap index files without their segment are deleted.
//
// A crash at any point thus leaves either the old segments or the cleaned one for
// every offset, never a mix that loses a key's latest value.
//
// ents is the directory's listing; changed reports that files were renamed or removed.
func settleCleanerFiles(fsys FS, dir string, ents []os.DirEntry) (changed bool, err error) {
	var swaps []int64
	logs := map[int64]bool{}
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, cleanedSuffix):
			changed = true
			if err := fsys.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return changed, err
			}
		case strings.HasSuffix(name, logSuffix+swapSuffix):
			if b, ok := parseBase(strings.TrimSuffix(name, logSuffix+swapSuffix)); ok {
				swaps = append(swaps, b)
			}
		case strings.HasSuffix(name, logSuffix):
			if b, ok := parseBase(strings.TrimSuffix(name, logSuffix)); ok {
				logs[b] = true
			}
		}
	}
	if len(swaps) == 0 && !hasSwapIndex(ents) {
		return changed, nil
	}
	changed = true
	sort.Slice(swaps, func(i, j int) bool { return swaps[i] < swaps[j] })
	for _, base := range swaps {
		swapPath := filepath.Join(dir, fileName(base, logSuffix+swapSuffix))
		last, err := lastOffsetIn(fsys, swapPath, base)
		if err != nil {
			return changed, fmt.Errorf("settling %s: %w", swapPath, err)
		}
		for b := range logs {
			if b < base || b > max(base, last) {
				continue
			}
			for _, suf := range segmentSuffixes {
				if err := fsys.Remove(filepath.Join(dir, fileName(b, suf))); err != nil && !errors.Is(err, os.ErrNotExist) {
					return changed, err
				}
			}
			delete(logs, b)
		}
		for _, suf := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix} {
			p := filepath.Join(dir, fileName(base, suf))
			if err := fsys.Rename(p+swapSuffix, p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return changed, err
			}
		}
		if err := fsys.Rename(swapPath, filepath.Join(dir, fileName(base, logSuffix))); err != nil {
			return changed, err
		}
		logs[base] = true
	}
	// Index .swap files whose segment was not committed.
	ents, err = fsys.ReadDir(dir)
	if err != nil {
		return changed, err
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), swapSuffix) {
			if err := fsys.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return changed, err
			}
		}
	}
	return changed, fsys.SyncDir(dir)
}

func hasSwapIndex(ents []os.DirEntry) bool {
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), swapSuffix) {
			return true
		}
	}
	return false
}

// parseBase parses a 20-digit base offset (a file name's stem).
func parseBase(s string) (int64, bool) {
	b, err := strconv.ParseInt(s, 10, 64)
	return b, err == nil && b >= 0 && len(s) == 20
}

// lastOffsetIn returns the last offset of the batches in a segment file (base-1 when it
// holds none). A swap file was synced before it was renamed, so a bad batch is not
// expected; the walk stops at the first one.
func lastOffsetIn(fsys FS, path string, base int64) (int64, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	last := base - 1
	it := newBatchIter(f, 0, st.Size(), 256<<10)
	for {
		h, _, err := it.next()
		if err == io.EOF || errors.Is(err, ErrCorrupt) {
			return last, nil
		}
		if err != nil {
			return 0, err
		}
		last = h.LastOffset()
	}
}
