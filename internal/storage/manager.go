package storage

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

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
	// FS opens segment and index files; nil means OSFS.
	FS FS
}

// Manager owns the log directories of a broker and the logs in them. It is safe for
// concurrent use; mu guards the map and is never held across log I/O except in Close.
type Manager struct {
	opts  ManagerOptions
	locks []*os.File
	clean map[string]bool // dir → clean shutdown marker was present

	mu struct {
		sync.RWMutex
		logs    map[PartitionKey]*Log
		dirOf   map[PartitionKey]string
		offline map[string]error // log directory → the error that took it offline
		closed  bool
	}
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

// Offline reports whether a log directory was taken offline.
func (m *Manager) Offline(dir string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, off := m.mu.offline[filepath.Clean(dir)]
	return off
}

// NewManager creates the directories, locks them (a second process gets ErrDirLocked)
// and notes and removes the clean-shutdown markers.
func NewManager(o ManagerOptions) (*Manager, error) {
	if len(o.Dirs) == 0 {
		return nil, errors.New("storage: no log directories")
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.RetentionCheckInterval <= 0 {
		o.RetentionCheckInterval = 5 * time.Minute
	}
	if o.FlushCheckInterval <= 0 {
		o.FlushCheckInterval = time.Second
	}
	if o.OpenWorkers <= 0 {
		o.OpenWorkers = max(8, 2*runtime.GOMAXPROCS(0))
	}
	m := &Manager{opts: o, clean: map[string]bool{}}
	m.mu.logs = map[PartitionKey]*Log{}
	m.mu.dirOf = map[PartitionKey]string{}
	for _, d := range o.Dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			m.unlock()
			return nil, err
		}
		f, err := os.OpenFile(filepath.Join(d, lockFile), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			m.unlock()
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			m.unlock()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("%w: %s (is another broker using this log.dirs entry?)", ErrDirLocked, d)
			}
			return nil, fmt.Errorf("locking %s: %w", d, err)
		}
		m.locks = append(m.locks, f)
		marker := filepath.Join(d, cleanShutdownFile)
		if _, err := os.Stat(marker); err == nil {
			m.clean[d] = true
			if err := os.Remove(marker); err != nil {
				m.unlock()
				return nil, err
			}
			syncDir(d)
		}
	}
	return m, nil
}

func (m *Manager) unlock() {
	for _, f := range m.locks {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}
	m.locks = nil
}

func syncDir(d string) {
	if f, err := os.Open(d); err == nil {
		_ = f.Sync()
		f.Close()
	}
}

// CleanShutdown reports whether dir was shut down cleanly last time.
func (m *Manager) CleanShutdown(dir string) bool { return m.clean[dir] }

// EnsureMetaProperties reads or writes meta.properties in every directory (Kafka's
// format, version=1) and returns the cluster id, creating a random one the first time.
// A directory naming another node.id, or two directories naming different clusters,
// are refused.
func (m *Manager) EnsureMetaProperties(nodeID int32) (string, error) {
	clusterID, err := m.ReadMetaProperties(nodeID)
	if err != nil {
		return "", err
	}
	if clusterID == "" {
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return "", err
		}
		id[6] = id[6]&0x0f | 0x40 // version 4
		id[8] = id[8]&0x3f | 0x80
		clusterID = base64.RawURLEncoding.EncodeToString(id[:])
	}
	return clusterID, m.WriteMetaProperties(nodeID, clusterID)
}

// ReadMetaProperties checks the meta.properties of every directory that has one and
// returns the cluster id they name, "" when none has one yet (a new node, whose
// cluster id the metadata quorum decides). A directory naming another node.id, or
// two directories naming different clusters, are refused.
func (m *Manager) ReadMetaProperties(nodeID int32) (string, error) {
	clusterID := ""
	for _, d := range m.opts.Dirs {
		p := filepath.Join(d, metaPropertiesFile)
		props, err := readProperties(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		if props["node.id"] != strconv.Itoa(int(nodeID)) {
			return "", fmt.Errorf("%w: %s has node.id=%s, this node is %d", ErrNodeIDMismatch, p, props["node.id"], nodeID)
		}
		cid := props["cluster.id"]
		if cid == "" {
			return "", fmt.Errorf("%w: %s has no cluster.id", ErrCorrupt, p)
		}
		if clusterID != "" && cid != clusterID {
			return "", fmt.Errorf("%w: %s has cluster.id=%s, another directory has %s", ErrCorrupt, p, cid, clusterID)
		}
		clusterID = cid
	}
	return clusterID, nil
}

// WriteMetaProperties writes meta.properties naming nodeID and clusterID in every
// directory that has none yet (fsynced, atomically).
func (m *Manager) WriteMetaProperties(nodeID int32, clusterID string) error {
	for _, d := range m.opts.Dirs {
		p := filepath.Join(d, metaPropertiesFile)
		if _, err := os.Stat(p); err == nil {
			continue
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		data := fmt.Sprintf("#\n#%s\ncluster.id=%s\nnode.id=%d\nversion=1\n",
			m.opts.Clock.Now().UTC().Format(time.UnixDate), clusterID, nodeID)
		if err := writeFileAtomic(p, []byte(data), true); err != nil {
			return err
		}
	}
	return nil
}

func readProperties(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	props := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		ln := strings.TrimSpace(sc.Text())
		if ln == "" || ln[0] == '#' || ln[0] == '!' {
			continue
		}
		k, v, ok := strings.Cut(ln, "=")
		if !ok {
			k, v, _ = strings.Cut(ln, ":")
		}
		props[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return props, sc.Err()
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
	for _, d := range m.opts.Dirs {
		ents, err := os.ReadDir(d)
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
func (m *Manager) LoadExisting(configFor func(PartitionKey) Config) error {
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
				if _, err := m.open(j.k, j.dir, [16]byte{}, cfg); err != nil {
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
// an already open log gets cfg. New partitions go to the directory holding the fewest.
//
// A log on disk (open or not) that belongs to an older topic of the same name (another
// topic id) is deleted first, as Kafka deletes stray logs.
func (m *Manager) GetOrCreate(topic string, partition int32, topicID [16]byte, cfg Config) (*Log, error) {
	k := PartitionKey{topic, partition}
	if l := m.Get(topic, partition); l != nil {
		if old := l.TopicID(); topicID == ([16]byte{}) || old == ([16]byte{}) || old == topicID {
			l.UpdateConfig(cfg)
			return l, nil
		}
		m.opts.Logger.Warn("deleting log of a previous topic with the same name", "topic", topic, "partition", partition,
			"old_topic_id", formatUUID(l.TopicID()), "topic_id", formatUUID(topicID))
		if err := m.Delete(topic, partition); err != nil {
			return nil, err
		}
	}
	dir := m.placeFor(k)
	if m.Offline(dir) {
		return nil, fmt.Errorf("%w: %s", ErrLogDirOffline, dir)
	}
	l, err := m.open(k, dir, topicID, cfg)
	if errors.Is(err, ErrTopicIDMismatch) {
		m.opts.Logger.Warn("deleting stray log of a previous topic with the same name", "topic", topic, "partition", partition, "err", err)
		if err := m.Delete(topic, partition); err != nil {
			return nil, err
		}
		return m.open(k, dir, topicID, cfg)
	}
	return l, err
}

func (m *Manager) placeFor(k PartitionKey) string {
	if len(m.opts.Dirs) == 1 {
		return m.opts.Dirs[0]
	}
	for _, d := range m.opts.Dirs {
		if _, err := os.Stat(partitionDir(d, k.Topic, k.Partition)); err == nil {
			return d
		}
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	count := map[string]int{}
	for _, d := range m.mu.dirOf {
		count[d]++
	}
	best := m.opts.Dirs[0]
	for _, d := range m.opts.Dirs[1:] {
		if count[d] < count[best] {
			best = d
		}
	}
	return best
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
// file.delete.delay.ms. A partition that is not open but exists on disk is deleted too.
func (m *Manager) Delete(topic string, partition int32) error {
	k := PartitionKey{topic, partition}
	m.mu.Lock()
	l := m.mu.logs[k]
	delete(m.mu.logs, k)
	delete(m.mu.dirOf, k)
	m.mu.Unlock()
	if l != nil {
		return l.Delete()
	}
	for _, d := range m.opts.Dirs {
		p := partitionDir(d, topic, partition)
		if _, err := os.Stat(p); err == nil {
			var id [16]byte
			_, _ = rand.Read(id[:])
			target := p + "." + hex.EncodeToString(id[:]) + deleteDirSuffix
			if err := os.Rename(p, target); err != nil {
				return err
			}
			return os.RemoveAll(target)
		}
	}
	return nil
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
		n, err := l.EnforceRetention(now)
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
	for _, d := range m.opts.Dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.IsDir() && strings.HasSuffix(e.Name(), deleteDirSuffix) {
				if err := os.RemoveAll(filepath.Join(d, e.Name())); err != nil {
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
	if len(errs) == 0 {
		for _, d := range m.opts.Dirs {
			if err := writeFileAtomic(filepath.Join(d, cleanShutdownFile), nil, true); err != nil {
				errs = append(errs, err)
			}
			syncDir(d)
		}
	}
	m.unlock()
	return errors.Join(errs...)
}
