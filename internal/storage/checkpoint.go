package storage

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Per-partition metadata file names (format constants).
const (
	leaderEpochFile   = "leader-epoch-checkpoint"
	partitionMetaFile = "partition.metadata"
	logStateFile      = "log-state"
)

// logState is the content of the log-state file. recoverySegment and
// recoveryPosition say where the recovery point lies in the files: the segment with
// that base offset is on disk below that byte position (and every segment before
// it). A crash is recovered by reading from there; a clean open trusts the files only
// when the log ends exactly there. Version 1 files did not have them (-1).
type logState struct {
	logStartOffset   int64
	recoveryPoint    int64
	recoverySegment  int64
	recoveryPosition int64
}

// unknownLogState is what an unreadable log-state stands for.
var unknownLogState = logState{recoverySegment: -1, recoveryPosition: -1}

// logStateVersion is the version written; version 1 (no recovery segment and
// position) is still read.
const logStateVersion = 2

func writeLogState(fsys FS, dir string, s logState) error {
	data := fmt.Sprintf("version %d\nlog_start_offset %d\nrecovery_point %d\nrecovery_segment %d\nrecovery_position %d\n",
		logStateVersion, s.logStartOffset, s.recoveryPoint, s.recoverySegment, s.recoveryPosition)
	return writeFileAtomic(fsys, filepath.Join(dir, logStateFile), []byte(data), true)
}

// readLogState reads log-state; an error wrapping os.ErrNotExist when it is missing,
// ErrCorrupt when it cannot be parsed.
func readLogState(fsys FS, dir string) (logState, error) {
	s := unknownLogState
	path := filepath.Join(dir, logStateFile)
	b, err := readFile(fsys, path)
	if err != nil {
		return s, err
	}
	bad := func(why string) (logState, error) {
		return unknownLogState, fmt.Errorf("%w: %s: %s", ErrCorrupt, path, why)
	}
	var version int
	if _, err := fmt.Sscanf(string(b), "version %d\n", &version); err != nil {
		return bad("no version line")
	}
	switch version {
	case 1:
		_, err = fmt.Sscanf(string(b), "version 1\nlog_start_offset %d\nrecovery_point %d\n", &s.logStartOffset, &s.recoveryPoint)
	case 2:
		_, err = fmt.Sscanf(string(b), "version 2\nlog_start_offset %d\nrecovery_point %d\nrecovery_segment %d\nrecovery_position %d\n",
			&s.logStartOffset, &s.recoveryPoint, &s.recoverySegment, &s.recoveryPosition)
	default:
		return bad(fmt.Sprintf("unknown version %d", version))
	}
	if err != nil {
		return bad(err.Error())
	}
	if s.logStartOffset < 0 || s.recoveryPoint < 0 || s.recoverySegment < -1 || s.recoveryPosition < -1 {
		return bad("negative offset or position")
	}
	return s, nil
}

// formatUUID renders a UUID as Kafka does: URL-safe base64 without padding.
func formatUUID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

func parseUUID(s string) ([16]byte, error) {
	var id [16]byte
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 16 {
		return id, fmt.Errorf("%w: bad uuid %q", ErrCorrupt, s)
	}
	copy(id[:], b)
	return id, nil
}

// writePartitionMetadata writes partition.metadata in Kafka's format, fsynced when
// sync is set (a new partition's is made durable by its first flush instead).
func writePartitionMetadata(fsys FS, dir string, topicID [16]byte, sync bool) error {
	data := "version: 0\ntopic_id: " + formatUUID(topicID) + "\n"
	return writeFileAtomic(fsys, filepath.Join(dir, partitionMetaFile), []byte(data), sync)
}

// readPartitionMetadata returns the topic id stored in partition.metadata.
func readPartitionMetadata(fsys FS, dir string) ([16]byte, error) {
	path := filepath.Join(dir, partitionMetaFile)
	b, err := readFile(fsys, path)
	if err != nil {
		return [16]byte{}, err
	}
	props := parseColonProps(b)
	if props["version"] != "0" {
		return [16]byte{}, fmt.Errorf("%w: %s: version %q", ErrCorrupt, path, props["version"])
	}
	id, err := parseUUID(props["topic_id"])
	if err != nil {
		return id, fmt.Errorf("%s: %w", path, err)
	}
	return id, nil
}

func parseColonProps(b []byte) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok {
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out
}

// EpochEntry is one leader epoch and the first offset written in it.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// epochCache is Kafka's LeaderEpochFileCache: the ordered (epoch, start offset) pairs,
// persisted to leader-epoch-checkpoint. A new epoch assigned by an append is written
// with the next flush of the log's data (persist), never on the append path — a
// partition's first append in an epoch would otherwise wait for an fsync (Kafka moved
// that fsync off the produce path too, KAFKA-15046). That is safe because the recovery
// point moves only after persist: after a crash, the epochs of the batches above it
// are assigned again by recovery, which reads them from the batch headers.
// Truncations are written at once. Safe for concurrent use.
type epochCache struct {
	fs      FS
	path    string
	mu      sync.RWMutex
	entries []EpochEntry
	dirty   bool // entries hold an assignment the file does not
}

// loadEpochCache reads leader-epoch-checkpoint. On an error (os.ErrNotExist when the
// file is missing, ErrCorrupt when it cannot be parsed) it returns an empty cache too.
func loadEpochCache(fsys FS, dir string) (*epochCache, error) {
	c := &epochCache{fs: fsys, path: filepath.Join(dir, leaderEpochFile)}
	entries, err := readEpochCheckpoint(fsys, c.path)
	c.entries = entries
	return c, err
}

func readEpochCheckpoint(fsys FS, path string) ([]EpochEntry, error) {
	b, err := readFile(fsys, path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 2 || strings.TrimSpace(lines[0]) != "0" {
		return nil, fmt.Errorf("%w: %s: bad header", ErrCorrupt, path)
	}
	n, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || n != len(lines)-2 {
		return nil, fmt.Errorf("%w: %s: bad entry count", ErrCorrupt, path)
	}
	var entries []EpochEntry
	for _, ln := range lines[2:] {
		f := strings.Fields(ln)
		if len(f) != 2 {
			return nil, fmt.Errorf("%w: %s: bad entry %q", ErrCorrupt, path, ln)
		}
		e, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || e < 0 || o < 0 {
			return nil, fmt.Errorf("%w: %s: bad entry %q", ErrCorrupt, path, ln)
		}
		if k := len(entries); k > 0 && (int32(e) <= entries[k-1].Epoch || o < entries[k-1].StartOffset) {
			return nil, fmt.Errorf("%w: %s: entries not increasing at %q", ErrCorrupt, path, ln)
		}
		entries = append(entries, EpochEntry{int32(e), o})
	}
	return entries, nil
}

// writeLocked persists entries and makes them the cache's (mu held). When the write
// fails the cache keeps what it had, so that a truncation that fails there
// (truncateFromEnd) leaves the epochs that the file and the log still hold.
func (c *epochCache) writeLocked(entries []EpochEntry) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "0\n%d\n", len(entries))
	for _, e := range entries {
		fmt.Fprintf(&sb, "%d %d\n", e.Epoch, e.StartOffset)
	}
	if err := writeFileAtomic(c.fs, c.path, []byte(sb.String()), true); err != nil {
		return err
	}
	c.entries = entries
	c.dirty = false
	return nil
}

// replace sets the entries (rebuilt from the log) and writes them.
func (c *epochCache) replace(entries []EpochEntry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeLocked(entries)
}

// assign records that epoch starts at offset when epoch is newer than the latest. The
// file is written by the next persist.
func (c *epochCache) assign(epoch int32, offset int64) {
	if epoch < 0 {
		return
	}
	c.mu.RLock()
	n := len(c.entries)
	newer := n == 0 || c.entries[n-1].Epoch < epoch
	c.mu.RUnlock()
	if !newer {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.entries); n > 0 && c.entries[n-1].Epoch >= epoch {
		return
	}
	c.entries = append(c.entries, EpochEntry{epoch, offset})
	c.dirty = true
}

// persist writes the file when an assignment is not in it yet.
func (c *epochCache) persist() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirty {
		return nil
	}
	return c.writeLocked(c.entries)
}

// epochAt returns the epoch of the entry covering offset (the latest one starting at
// or before it), -1 when none does.
func (c *epochCache) epochAt(offset int64) int32 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	i := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].StartOffset > offset })
	if i == 0 {
		return -1
	}
	return c.entries[i-1].Epoch
}

func (c *epochCache) latest() int32 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.entries) == 0 {
		return -1
	}
	return c.entries[len(c.entries)-1].Epoch
}

// endOffsetFor implements OffsetForLeaderEpoch (Kafka's LeaderEpochFileCache.endOffsetFor).
func (c *epochCache) endOffsetFor(epoch int32, logEnd int64) (int32, int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := len(c.entries)
	if epoch < 0 || n == 0 {
		return -1, -1
	}
	if c.entries[n-1].Epoch == epoch {
		return epoch, logEnd
	}
	hi := sort.Search(n, func(i int) bool { return c.entries[i].Epoch > epoch })
	if hi == n {
		return -1, -1
	}
	if hi == 0 {
		return epoch, c.entries[0].StartOffset
	}
	return c.entries[hi-1].Epoch, c.entries[hi].StartOffset
}

// endCutLocked is the index of the first entry starting at or after offset
// (len(entries) when none does).
func (c *epochCache) endCutLocked(offset int64) int {
	return sort.Search(len(c.entries), func(i int) bool { return c.entries[i].StartOffset >= offset })
}

// truncateFromEnd removes entries starting at or after offset.
func (c *epochCache) truncateFromEnd(offset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := c.endCutLocked(offset); i < len(c.entries) {
		return c.writeLocked(c.entries[:i])
	}
	return nil
}

// forgetFromEnd removes entries starting at or after offset at once — the log no
// longer holds them — and writes the file; when that write fails the next persist
// writes it (a file with epochs past the log end is cut to the log at load).
func (c *epochCache) forgetFromEnd(offset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := c.endCutLocked(offset); i < len(c.entries) {
		c.entries, c.dirty = c.entries[:i], true
		return c.writeLocked(c.entries)
	}
	return nil
}

// truncateFromStart drops entries wholly below offset, moving the start of the latest
// such entry up to offset, at once (the log no longer holds them), and writes the
// file; when that write fails the next persist writes it (epochs below the log start
// are dropped at load).
func (c *epochCache) truncateFromStart(offset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].StartOffset > offset })
	if i == 0 {
		return nil
	}
	if c.entries[i-1].StartOffset == offset && i == 1 {
		return nil
	}
	kept := EpochEntry{c.entries[i-1].Epoch, offset}
	c.entries, c.dirty = append([]EpochEntry{kept}, c.entries[i:]...), true
	return c.writeLocked(c.entries)
}

func (c *epochCache) all() []EpochEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]EpochEntry(nil), c.entries...)
}
