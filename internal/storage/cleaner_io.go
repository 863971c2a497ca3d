package storage

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// cleanerCheckpointFile is Kafka's per-log-directory file of "cleaned up to" offsets:
//
//	0
//	<count>
//	<topic> <partition> <offset>   (count lines)
const cleanerCheckpointFile = "cleaner-offset-checkpoint"

// firstDirtyLocked returns the checkpointed first dirty offset of l, 0 (clamped to the
// log start by evaluate) when none. Cleaner.mu held.
func (c *Cleaner) firstDirtyLocked(l *Log) int64 {
	return c.checkpointLocked(l)[PartitionKey{l.topic, l.partition}]
}

// checkpointLocked returns the checkpoint map of l's log directory, reading the file
// the first time. Cleaner.mu held (the read is a small file, once per directory).
func (c *Cleaner) checkpointLocked(l *Log) map[PartitionKey]int64 {
	dir := filepath.Dir(l.dir)
	m, ok := c.mu.checkpoints[dir]
	if !ok {
		var err error
		path := filepath.Join(dir, cleanerCheckpointFile)
		m, err = readCleanerCheckpoint(l.fs, path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			c.opts.Logger.Warn("cleaner checkpoint unreadable; cleaning each log from its start, the file is rewritten after the next cleaning",
				"file", path, "err", err)
		}
		if m == nil {
			m = map[PartitionKey]int64{}
		}
		c.mu.checkpoints[dir] = m
	}
	return m
}

// writeCheckpoint rewrites the checkpoint of l's log directory with the entries of
// the logs that are still open there.
func (c *Cleaner) writeCheckpoint(l *Log) error {
	dir := filepath.Dir(l.dir)
	c.checkpointMu.Lock()
	defer c.checkpointMu.Unlock()
	live := map[PartitionKey]bool{}
	for _, l := range c.logs() {
		if filepath.Dir(l.dir) == dir {
			live[PartitionKey{l.topic, l.partition}] = true
		}
	}
	c.mu.Lock()
	m := c.mu.checkpoints[dir]
	for k := range m {
		if !live[k] {
			delete(m, k)
		}
	}
	data := encodeCleanerCheckpoint(m)
	c.mu.Unlock()
	return writeFileAtomic(l.fs, filepath.Join(dir, cleanerCheckpointFile), data, true)
}

func encodeCleanerCheckpoint(m map[PartitionKey]int64) []byte {
	keys := make([]PartitionKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Topic != keys[j].Topic {
			return keys[i].Topic < keys[j].Topic
		}
		return keys[i].Partition < keys[j].Partition
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(keys))
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %d %d\n", k.Topic, k.Partition, m[k])
	}
	return b.Bytes()
}

func readCleanerCheckpoint(fsys FS, path string) (map[PartitionKey]int64, error) {
	data, err := readFile(fsys, path)
	if err != nil {
		return nil, err
	}
	bad := fmt.Errorf("%w: %s", ErrCorrupt, path)
	sc := bufio.NewScanner(bytes.NewReader(data))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) < 2 || strings.TrimSpace(lines[0]) != "0" {
		return nil, bad
	}
	n, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || n != len(lines)-2 {
		return nil, bad
	}
	m := make(map[PartitionKey]int64, n)
	for _, line := range lines[2:] {
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, bad
		}
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		off, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || p < 0 || off < 0 {
			return nil, bad
		}
		m[PartitionKey{f[0], int32(p)}] = off
	}
	return m, nil
}

// throttler is log.cleaner.io.max.bytes.per.second, shared by the cleaner threads: it
// keeps the bytes counted since the start of a period below rate × elapsed, asking the
// caller to pause for the excess. A pure data structure; the caller sleeps.
type throttler struct {
	rate float64 // bytes per second; ≤ 0 means unlimited

	mu          sync.Mutex
	periodStart time.Time
	bytes       float64
}

// throttleMinPause: excesses shorter than this are carried over rather than slept.
const throttleMinPause = 10 * time.Millisecond

// record counts n bytes at now and returns how long to pause (0 for none).
func (t *throttler) record(now time.Time, n int) time.Duration {
	if t == nil || t.rate <= 0 {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.periodStart.IsZero() || now.Before(t.periodStart.Add(-time.Second)) {
		t.periodStart, t.bytes = now, 0
	}
	t.bytes += float64(n)
	elapsed := now.Sub(t.periodStart)
	pause := time.Duration(math.Round(t.bytes/t.rate*float64(time.Second))) - elapsed
	if pause >= throttleMinPause {
		// After the pause the budget is balanced: start a new period then.
		t.periodStart, t.bytes = now.Add(pause), 0
		return pause
	}
	if elapsed > time.Second && pause < 0 {
		t.periodStart, t.bytes = now, 0 // no credit for more than a second of idleness
	}
	return 0
}
