package storage

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
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

// writeFileAtomic writes data to path through a temporary file and a rename, so a
// crash leaves either the old or the new content.
func writeFileAtomic(path string, data []byte, sync bool) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// logState is the content of the log-state file.
type logState struct {
	logStartOffset int64
	recoveryPoint  int64
}

func writeLogState(dir string, s logState) error {
	data := fmt.Sprintf("version 1\nlog_start_offset %d\nrecovery_point %d\n", s.logStartOffset, s.recoveryPoint)
	return writeFileAtomic(filepath.Join(dir, logStateFile), []byte(data), true)
}

// readLogState returns ok=false when the file is missing or unreadable.
func readLogState(dir string) (logState, bool) {
	var s logState
	b, err := os.ReadFile(filepath.Join(dir, logStateFile))
	if err != nil {
		return s, false
	}
	var version int
	n, err := fmt.Sscanf(string(b), "version %d\nlog_start_offset %d\nrecovery_point %d\n", &version, &s.logStartOffset, &s.recoveryPoint)
	if err != nil || n != 3 || version != 1 || s.logStartOffset < 0 || s.recoveryPoint < 0 {
		return logState{}, false
	}
	return s, true
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

// writePartitionMetadata writes partition.metadata in Kafka's format.
func writePartitionMetadata(dir string, topicID [16]byte) error {
	data := "version: 0\ntopic_id: " + formatUUID(topicID) + "\n"
	return writeFileAtomic(filepath.Join(dir, partitionMetaFile), []byte(data), true)
}

// readPartitionMetadata returns the topic id stored in partition.metadata.
func readPartitionMetadata(dir string) ([16]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, partitionMetaFile))
	if err != nil {
		return [16]byte{}, err
	}
	props := parseColonProps(b)
	if props["version"] != "0" {
		return [16]byte{}, fmt.Errorf("%w: partition.metadata version %q", ErrCorrupt, props["version"])
	}
	return parseUUID(props["topic_id"])
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
	path    string
	mu      sync.RWMutex
	entries []EpochEntry
	dirty   bool // entries hold an assignment the file does not
}

func loadEpochCache(dir string) (*epochCache, error) {
	c := &epochCache{path: filepath.Join(dir, leaderEpochFile)}
	b, err := os.ReadFile(c.path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 2 || strings.TrimSpace(lines[0]) != "0" {
		return nil, fmt.Errorf("%w: %s: bad header", ErrCorrupt, c.path)
	}
	n, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || n != len(lines)-2 {
		return nil, fmt.Errorf("%w: %s: bad entry count", ErrCorrupt, c.path)
	}
	for _, ln := range lines[2:] {
		f := strings.Fields(ln)
		if len(f) != 2 {
			return nil, fmt.Errorf("%w: %s: bad entry %q", ErrCorrupt, c.path, ln)
		}
		e, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%w: %s: bad entry %q", ErrCorrupt, c.path, ln)
		}
		c.entries = append(c.entries, EpochEntry{int32(e), o})
	}
	return c, nil
}

// writeLocked persists the entries (mu held).
func (c *epochCache) writeLocked() error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "0\n%d\n", len(c.entries))
	for _, e := range c.entries {
		fmt.Fprintf(&sb, "%d %d\n", e.Epoch, e.StartOffset)
	}
	if err := writeFileAtomic(c.path, []byte(sb.String()), true); err != nil {
		return err
	}
	c.dirty = false
	return nil
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
	return c.writeLocked()
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

// truncateFromEnd removes entries starting at or after offset.
func (c *epochCache) truncateFromEnd(offset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].StartOffset >= offset })
	if i == len(c.entries) {
		return nil
	}
	c.entries = c.entries[:i]
	return c.writeLocked()
}

// truncateFromStart drops entries wholly below offset, moving the start of the latest
// such entry up to offset.
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
	c.entries = append([]EpochEntry{kept}, c.entries[i:]...)
	return c.writeLocked()
}

func (c *epochCache) all() []EpochEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]EpochEntry(nil), c.entries...)
}
