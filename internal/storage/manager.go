package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-streaming/samsa/internal/clock"
)

// Directory-level file names (format constants).
const (
	lockFile           = ".lock"
	cleanShutdownFile  = ".samsa_cleanshutdown"
	metaPropertiesFile = "meta.properties"
	metadataLogDir     = "__cluster_metadata-0"
)

// PartitionKey names one partition.
type PartitionKey struct {
	Topic     string
	Partition int32
}

// ManagerOptions configures the Manager.
type ManagerOptions struct {
	Dirs   []string // log.dirs
	Clock  clock.Clock
	Logger *slog.Logger
	// RetentionCheckInterval is log.retention.check.interval.ms (default 5 minutes).
	RetentionCheckInterval time.Duration
	// FlushCheckInterval is log.flush.scheduler.interval.ms (default 1 s here; Kafka's
	// default is "never", which flush.ms's default also means).
	FlushCheckInterval time.Duration
	// OpenWorkers bounds how many logs open in parallel (default 2×GOMAXPROCS, min 8).
	OpenWorkers int
	// FS is the file system the directories are on; nil means OSFS.
	FS FS
	// HighWatermark optionally bounds retention for a log: only segments wholly below
	// the offset it returns are deleted (Log.EnforceRetentionBelow). The broker passes
	// the partition's high watermark, which storage does not know; nil: no bound.
	HighWatermark func(*Log) int64
}

// Manager owns the log directories of a broker and the logs in them. It is safe for
// concurrent use; mu guards the maps and is never held across log I/O except in Close.
type Manager struct {
	opts  ManagerOptions
	locks []File
	clean map[string]bool // dir → clean shutdown marker was present
	// lost holds the directories that failed before start-up (they could not be
	// locked), with the error: offline, and what they hold is unknown.
	lost map[string]error

	started  sync.Once   // start ran
	startErr error       // what it returned
	changing atomic.Bool // start removed the markers: Close writes them again

	mu struct {
		sync.RWMutex
		logs     map[PartitionKey]*Log
		dirOf    map[PartitionKey]string
		creating map[PartitionKey]*creation // partitions being opened by GetOrCreate
		offline  map[string]error           // log directory → the error that took it offline
		closed   bool
	}
}

// creation is a GetOrCreate in progress: the directory chosen for the partition (it
// counts in the placement of the next ones) and a channel closed when it is done.
type creation struct {
	dir  string
	done chan struct{}
}

// MarkOffline takes a log directory offline after an I/O error in it: its logs are
// abandoned (files closed, nothing more written) and no log is opened or created there
// until the node restarts. It returns the partitions that were in the directory (none
// when it was already offline). The process keeps serving the other directories.
func (m *Manager) MarkOffline(dir string, cause error) []PartitionKey {
	dir = filepath.Clean(dir)
	m.mu.Lock()
	if m.mu.offline == nil {
		m.mu.offline = map[string]error{}
	}
	if _, already := m.mu.offline[dir]; already {
		m.mu.Unlock()
		return nil
	}
	m.mu.offline[dir] = cause
	var keys []PartitionKey
	var logs []*Log
	for k, d := range m.mu.dirOf {
		if filepath.Clean(d) == dir {
			keys = append(keys, k)
			if l := m.mu.logs[k]; l != nil {
				logs = append(logs, l)
			}
			delete(m.mu.logs, k)
		}
	}
	m.mu.Unlock()
	m.opts.Logger.Error("log directory offline after an I/O error; its partitions are unavailable until restart",
		"dir", dir, "partitions", len(keys), "err", cause)
	for _, l := range logs {
		l.Abandon()
	}
	return keys
}

// AllOffline reports whether every log directory was taken offline.
func (m *Manager) AllOffline() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range m.opts.Dirs {
		if _, off := m.mu.offline[filepath.Clean(d)]; !off {
			return false
		}
	}
	return true
}

// lostDirs returns the directories that failed before start-up, in the order of
// log.dirs.
func (m *Manager) lostDirs() []string {
	var out []string
	for _, d := range m.opts.Dirs {
		if _, ok := m.lost[filepath.Clean(d)]; ok {
			out = append(out, filepath.Clean(d))
		}
	}
	return out
}

// AnyOffline reports whether a log directory was taken offline.
func (m *Manager) AnyOffline() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.mu.offline) > 0
}

// onlineDirs returns the log directories not offline.
func (m *Manager) onlineDirs() []string {
	var out []string
	for _, d := range m.opts.Dirs {
		if !m.Offline(d) {
			out = append(out, d)
		}
	}
	return out
}

// Offline reports whether a log directory was taken offline.
func (m *Manager) Offline(dir string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, off := m.mu.offline[filepath.Clean(dir)]
	return off
}

// parsePartitionDir splits "<topic>-<partition>"; ok is false for anything else,
// including directories being deleted.
func parsePartitionDir(name string) (PartitionKey, bool) {
	if name == metadataLogDir || strings.Contains(name, deletedSuffix) || strings.HasSuffix(name, deleteDirSuffix) ||
		strings.HasSuffix(name, "-future") || strings.HasSuffix(name, "-stray") || strings.HasPrefix(name, ".") {
		return PartitionKey{}, false
	}
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return PartitionKey{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != name[i+1:] {
		return PartitionKey{}, false
	}
	return PartitionKey{Topic: name[:i], Partition: int32(p)}, true
}

// existingIn lists partition directories per log directory.
func (m *Manager) existingIn() map[PartitionKey]string {
	out := map[PartitionKey]string{}
	for _, d := range m.onlineDirs() {
		ents, err := m.opts.FS.ReadDir(d)
		if err != nil {
			m.opts.Logger.Warn("listing log directory", "dir", d, "err", err)
			continue
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			if k, ok := parsePartitionDir(e.Name()); ok {
				if _, dup := out[k]; !dup {
					out[k] = d
				}
			}
		}
	}
	return out
}

// Existing lists the partitions found on disk (not the metadata log, not directories
// being deleted), sorted.
func (m *Manager) Existing() []PartitionKey {
	found := m.existingIn()
	out := make([]PartitionKey, 0, len(found))
	for k := range found {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// LoadExisting opens every partition found on disk in parallel (OpenWorkers at a time),
// with the configuration configFor returns. Logs that fail to open are reported together
// and left closed.
//
// A directory named like a partition that holds nothing of Samsa's is logged and left
// alone, as is anything else in the log directories Samsa did not write.
func (m *Manager) LoadExisting(configFor func(PartitionKey) Config) error {
	if err := m.start(); err != nil {
		return err
	}
	m.reportForeign()
	found := m.existingIn()
	type job struct {
		k   PartitionKey
		dir string
	}
	jobs := make(chan job)
	var (
		wg   sync.WaitGroup
		emu  sync.Mutex
		errs []error
	)
	for range m.opts.OpenWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				cfg := DefaultConfig()
				if configFor != nil {
					cfg = configFor(j.k)
				}
				_, err := m.open(j.k, j.dir, [16]byte{}, cfg)
				if errors.Is(err, ErrForeignDir) {
					m.opts.Logger.Info("ignoring a directory that holds no partition of Samsa's", "dir", j.dir, "reason", err)
					continue
				}
				if err != nil {
					emu.Lock()
					errs = append(errs, err)
					emu.Unlock()
				}
			}
		}()
	}
	for k, d := range found {
		jobs <- job{k, d}
	}
	close(jobs)
	wg.Wait()
	return errors.Join(errs...)
}

func (m *Manager) open(k PartitionKey, dir string, topicID [16]byte, cfg Config) (*Log, error) {
	l, err := Open(Options{
		Dir: dir, Topic: k.Topic, Partition: k.Partition, TopicID: topicID, Config: cfg,
		Clock: m.opts.Clock, Logger: m.opts.Logger, CleanShutdown: m.clean[dir], FS: m.opts.FS,
	})
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		l.Close()
		return nil, ErrLogClosed
	}
	if prev := m.mu.logs[k]; prev != nil {
		l.Close()
		return prev, nil
	}
	m.mu.logs[k] = l
	m.mu.dirOf[k] = dir
	return l, nil
}

// GetOrCreate returns the open log of a partition, opening (or creating) it when needed;
// an already open log gets cfg (and topicID, when it was opened without one). A new
// partition goes to the online directory holding the fewest partitions, counting those
// being created by concurrent calls, as Kafka places them; a partition on disk stays
// where it is.
//
// A log on disk (open or not) that belongs to an older topic of the same name (another
// topic id) is deleted first, as Kafka deletes stray logs.
func (m *Manager) GetOrCreate(topic string, partition int32, topicID [16]byte, cfg Config) (*Log, error) {
	if err := m.start(); err != nil {
		return nil, err
	}
	k := PartitionKey{topic, partition}
	for {
		if l := m.Get(topic, partition); l != nil {
			switch old := l.TopicID(); {
			case topicID == ([16]byte{}) || old == topicID:
			case old == ([16]byte{}):
				if err := l.AdoptTopicID(topicID); err != nil {
					m.opts.Logger.Warn("writing partition.metadata", "topic", topic, "partition", partition, "err", err)
				}
			default:
				m.opts.Logger.Warn("deleting log of a previous topic with the same name", "topic", topic, "partition", partition,
					"old_topic_id", formatUUID(old), "topic_id", formatUUID(topicID))
				if err := m.Delete(topic, partition); err != nil {
					return nil, err
				}
				continue
			}
			l.UpdateConfig(cfg)
			return l, nil
		}
		c, wait, err := m.reserve(k)
		if err != nil {
			return nil, err
		}
		if wait != nil {
			<-wait // another call is opening it
			continue
		}
		l, err := m.open(k, c.dir, topicID, cfg)
		if errors.Is(err, ErrTopicIDMismatch) {
			m.opts.Logger.Warn("deleting stray log of a previous topic with the same name", "topic", topic, "partition", partition, "err", err)
			if err = m.deleteDir(k); err == nil {
				l, err = m.open(k, c.dir, topicID, cfg)
			}
		}
		m.mu.Lock()
		delete(m.mu.creating, k)
		m.mu.Unlock()
		close(c.done)
		return l, err
	}
}

// reserve places a partition that is not open: in the directory already holding it,
// or else in the online directory with the fewest partitions (open or being
// created). When another call is creating it, wait is that call's channel.
func (m *Manager) reserve(k PartitionKey) (c *creation, wait chan struct{}, err error) {
	onDisk := m.dirHolding(k)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return nil, nil, ErrLogClosed
	}
	if c := m.mu.creating[k]; c != nil {
		return nil, c.done, nil
	}
	if m.mu.logs[k] != nil {
		ch := make(chan struct{})
		close(ch)
		return nil, ch, nil // opened meanwhile
	}
	dir := m.mu.dirOf[k] // opened before, and abandoned with its directory
	if dir == "" {
		dir = onDisk
	}
	if dir == "" && len(m.lost) > 0 {
		// Kafka does not create a log that may be in a failed directory either: a new
		// empty one could be elected in place of the data.
		lost := m.lostDirs()
		return nil, nil, fmt.Errorf("%w: %s-%d may be in %s, which failed before start-up (%v)",
			ErrLogDirOffline, k.Topic, k.Partition, strings.Join(lost, ", "), m.lost[lost[0]])
	}
	if dir == "" {
		count := map[string]int{}
		for _, d := range m.mu.dirOf {
			count[d]++
		}
		for ck, c := range m.mu.creating {
			if _, open := m.mu.dirOf[ck]; !open { // an open one is counted above
				count[c.dir]++
			}
		}
		for _, d := range m.opts.Dirs {
			if _, off := m.mu.offline[filepath.Clean(d)]; !off && (dir == "" || count[d] < count[dir]) {
				dir = d
			}
		}
		if dir == "" {
			return nil, nil, fmt.Errorf("%w: every log directory is offline", ErrLogDirOffline)
		}
	}
	if cause, off := m.mu.offline[filepath.Clean(dir)]; off {
		return nil, nil, fmt.Errorf("%w: %s (%v)", ErrLogDirOffline, dir, cause)
	}
	c = &creation{dir: dir, done: make(chan struct{})}
	m.mu.creating[k] = c
	return c, nil, nil
}

// dirHolding returns the log directory holding a directory for the partition, "" when
// none does.
func (m *Manager) dirHolding(k PartitionKey) string {
	for _, d := range m.opts.Dirs {
		if _, err := m.opts.FS.Stat(partitionDir(d, k.Topic, k.Partition)); err == nil {
			return d
		}
	}
	return ""
}

// DirOf returns the log directory holding an open partition ("" when not open), for
// DescribeLogDirs.
func (m *Manager) DirOf(topic string, partition int32) string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.mu.dirOf[PartitionKey{topic, partition}]
}

// Dirs returns the log directories.
func (m *Manager) Dirs() []string { return append([]string(nil), m.opts.Dirs...) }

// Get returns the open log of a partition or nil.
func (m *Manager) Get(topic string, partition int32) *Log {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.mu.logs[PartitionKey{topic, partition}]
}

// Logs returns the open logs.
func (m *Manager) Logs() map[PartitionKey]*Log {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[PartitionKey]*Log, len(m.mu.logs))
	for k, l := range m.mu.logs {
		out[k] = l
	}
	return out
}

// Delete removes a partition: the directory is renamed at once and removed after
// file.delete.delay.ms. A partition that is not open but exists on disk is deleted too,
// unless its directory holds nothing of Samsa's (it is left alone, with a log line).
func (m *Manager) Delete(topic string, partition int32) error {
	if err := m.start(); err != nil {
		return err
	}
	k := PartitionKey{topic, partition}
	m.mu.Lock()
	l := m.mu.logs[k]
	delete(m.mu.logs, k)
	delete(m.mu.dirOf, k)
	m.mu.Unlock()
	if l != nil {
		return l.Delete()
	}
	return m.deleteDir(k)
}

// deleteDir deletes the directory of a partition that is not open.
func (m *Manager) deleteDir(k PartitionKey) error {
	d := m.dirHolding(k)
	if d == "" {
		return nil
	}
	p := partitionDir(d, k.Topic, k.Partition)
	ents, err := m.opts.FS.ReadDir(p)
	if err != nil {
		return err
	}
	if err := checkPartitionFiles(p, ents, false); err != nil {
		m.opts.Logger.Warn("not deleting a directory that holds no partition of Samsa's", "dir", p, "reason", err)
		return nil
	}
	target := deleteDirName(p)
	if err := m.opts.FS.Rename(p, target); err != nil {
		return err
	}
	if err := m.opts.FS.SyncDir(d); err != nil {
		return err
	}
	return m.opts.FS.RemoveAll(target)
}

// Run does the background work until ctx ends: retention every RetentionCheckInterval,
// flush.ms checks every FlushCheckInterval, and removal of directories left by deletes
// before a restart.
func (m *Manager) Run(ctx context.Context) {
	m.removeDeletedDirs()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		m.every(ctx, m.opts.RetentionCheckInterval, m.retentionPass)
	}()
	go func() {
		defer wg.Done()
		m.every(ctx, m.opts.FlushCheckInterval, m.flushPass)
	}()
	wg.Wait()
}

func (m *Manager) every(ctx context.Context, d time.Duration, f func(now time.Time)) {
	tick := make(chan struct{}, 1)
	for {
		t := m.opts.Clock.AfterFunc(d, func() {
			select {
			case tick <- struct{}{}:
			default:
			}
		})
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-tick:
			f(m.opts.Clock.Now())
		}
	}
}

func (m *Manager) retentionPass(now time.Time) {
	for k, l := range m.Logs() {
		l.ExpireProducers(now)
		highWatermark := int64(math.MaxInt64)
		if m.opts.HighWatermark != nil {
			highWatermark = m.opts.HighWatermark(l)
		}
		n, err := l.EnforceRetentionBelow(now, highWatermark)
		if err != nil && !errors.Is(err, ErrLogClosed) {
			m.opts.Logger.Warn("retention failed", "topic", k.Topic, "partition", k.Partition, "err", err)
		} else if n > 0 {
			m.opts.Logger.Info("retention deleted segments", "topic", k.Topic, "partition", k.Partition,
				"segments", n, "log_start_offset", l.LogStartOffset())
		}
	}
}

// RetentionPass runs one retention check over every log now (for callers and tests).
func (m *Manager) RetentionPass() { m.retentionPass(m.opts.Clock.Now()) }

func (m *Manager) flushPass(now time.Time) {
	for k, l := range m.Logs() {
		if err := l.MaybeFlush(now); err != nil && !errors.Is(err, ErrLogClosed) {
			m.opts.Logger.Warn("flush failed", "topic", k.Topic, "partition", k.Partition, "err", err)
		}
		if err := l.CheckpointState(); err != nil {
			m.opts.Logger.Warn("writing log state", "topic", k.Topic, "partition", k.Partition, "err", err)
		}
	}
}

func (m *Manager) removeDeletedDirs() {
	for _, d := range m.onlineDirs() {
		ents, err := m.opts.FS.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.IsDir() && isDeleteDirName(e.Name()) {
				if err := m.opts.FS.RemoveAll(filepath.Join(d, e.Name())); err != nil {
					m.opts.Logger.Warn("removing deleted partition", "dir", e.Name(), "err", err)
				}
			}
		}
	}
}

// Close closes every log (in parallel), writes the clean-shutdown markers when all of
// them closed cleanly, and releases the directory locks.
// closeWorkers is how many logs Close closes at once.
const closeWorkers = 64

func (m *Manager) Close() error {
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return nil
	}
	m.mu.closed = true
	logs := m.mu.logs
	m.mu.logs = map[PartitionKey]*Log{}
	m.mu.Unlock()

	var (
		wg   sync.WaitGroup
		emu  sync.Mutex
		errs []error
	)
	// Closing is bound by fsync latency, not CPU: many in flight at once keep the
	// device busy (a shutdown must finish within seconds with 10,000 partitions).
	sem := make(chan struct{}, max(m.opts.OpenWorkers, closeWorkers))
	for _, l := range logs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := l.Close(); err != nil {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
		}()
	}
	wg.Wait()
	// A manager that never started changed nothing (a refused start): it writes no
	// marker, so that it leaves the directories exactly as it found them.
	if len(errs) == 0 && m.changing.Load() {
		for _, d := range m.opts.Dirs {
			if m.Offline(d) {
				continue // its logs were abandoned, not closed
			}
			if err := writeFileAtomic(m.opts.FS, filepath.Join(d, cleanShutdownFile), nil, true); err != nil {
				errs = append(errs, err)
			}
		}
	}
	m.unlock()
	return errors.Join(errs...)
}
