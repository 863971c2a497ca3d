package storage

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/samsa-streaming/samsa/internal/clock"
)

// NewManager creates the log directories when missing and locks them (a second
// process gets ErrDirLocked). It notes which directories hold a clean-shutdown marker
// but changes nothing else: the markers are removed by EnsureMetaProperties, or by the
// first log opened, created or deleted, whichever comes first — after the checks that
// may refuse the start.
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
	if o.FS == nil {
		o.FS = OSFS{}
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
	m.mu.creating = map[PartitionKey]*creation{}
	m.lost = map[string]error{}
	var failed []error // in the order of log.dirs
	for _, d := range o.Dirs {
		if err := m.lockDir(d); err != nil {
			if errors.Is(err, ErrDirLocked) {
				m.unlock()
				return nil, err
			}
			if failed = append(failed, err); len(failed) == len(o.Dirs) { // none works
				m.unlock()
				return nil, errors.Join(failed...)
			}
			// A disk that failed while the node was down: the node starts without it,
			// as Kafka does, as long as another directory works.
			m.lost[filepath.Clean(d)] = err
			continue
		}
		if _, err := o.FS.Stat(filepath.Join(d, cleanShutdownFile)); err == nil {
			m.clean[d] = true
		}
	}
	m.mu.offline = maps.Clone(m.lost)
	for _, d := range m.lostDirs() {
		err := m.lost[d]
		o.Logger.Error("log directory offline: it failed before start-up; the partitions it may hold are unavailable, and no new ones "+
			"are created on this node until it is repaired or removed from log.dirs and the node restarted", "dir", d, "err", err)
	}
	return m, nil
}

// lockDir creates d when missing (durably: its parent is fsynced, as Kafka does) and
// takes the exclusive lock on d/.lock (Kafka's).
func (m *Manager) lockDir(d string) error {
	if _, err := m.opts.FS.Stat(d); errors.Is(err, os.ErrNotExist) {
		if err := m.opts.FS.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := m.opts.FS.SyncDir(filepath.Dir(filepath.Clean(d))); err != nil {
			return err
		}
	}
	f, err := m.opts.FS.OpenFile(filepath.Join(d, lockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if err := unix.Flock(int(f.OS().Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("%w: %s; stop the other broker, or give this one other log.dirs",
				ErrDirLocked, filepath.Join(d, lockFile))
		}
		return fmt.Errorf("locking %s: %w", filepath.Join(d, lockFile), err)
	}
	m.locks = append(m.locks, f)
	return nil
}

func (m *Manager) unlock() {
	for _, f := range m.locks {
		_ = unix.Flock(int(f.OS().Fd()), unix.LOCK_UN)
		f.Close()
	}
	m.locks = nil
}

// CleanShutdown reports whether dir was shut down cleanly last time.
func (m *Manager) CleanShutdown(dir string) bool { return m.clean[dir] }

// start removes the clean-shutdown markers, once, before anything in the directories
// changes: from then on a crash must be recovered from.
func (m *Manager) start() error {
	m.started.Do(func() {
		var errs []error
		for d, clean := range m.clean {
			if !clean {
				continue
			}
			if err := m.opts.FS.Remove(filepath.Join(d, cleanShutdownFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
				continue
			}
			errs = append(errs, m.opts.FS.SyncDir(d))
		}
		m.startErr = errors.Join(errs...)
		m.changing.Store(m.startErr == nil)
	})
	return m.startErr
}

// metaProperties is the content of a log directory's meta.properties.
type metaProperties struct {
	path      string
	nodeID    string
	clusterID string
}

// readMetaProperties reads and checks d/meta.properties (Kafka's format, version=1).
// A missing file is os.ErrNotExist; an unreadable one ErrCorrupt with a message
// saying what to do.
func readMetaProperties(fsys FS, d string) (metaProperties, error) {
	p := filepath.Join(d, metaPropertiesFile)
	mp := metaProperties{path: p}
	b, err := readFile(fsys, p)
	if err != nil {
		return mp, err
	}
	props := parseProperties(b)
	mp.nodeID, mp.clusterID = props["node.id"], props["cluster.id"]
	why := ""
	switch _, err := strconv.ParseInt(mp.nodeID, 10, 32); {
	case props["version"] != "1":
		why = fmt.Sprintf("version=%q, want 1", props["version"])
	case err != nil:
		why = fmt.Sprintf("node.id=%q is not a number", mp.nodeID)
	case mp.clusterID == "":
		why = "no cluster.id"
	}
	if why != "" {
		return mp, fmt.Errorf("%w: %s is unreadable (%s): restore it from a backup, or move it away if the directory "+
			"holds no data you need (a new one is written then)", ErrCorrupt, p, why)
	}
	return mp, nil
}

// EnsureMetaProperties checks meta.properties in every directory (ReadMetaProperties),
// and writes the missing ones (WriteMetaProperties) with the cluster id found, or a
// random one the first time: a node that decides its cluster id alone.
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

// ReadMetaProperties checks meta.properties in every directory that has one and
// returns the cluster id they name, "" when none has one yet (a new node, whose
// cluster id the metadata quorum decides). It changes nothing: a directory naming
// another node.id (ErrNodeIDMismatch), two directories naming different clusters
// (ErrClusterIDMismatch) or an unreadable file (ErrCorrupt) refuse the start with a
// message naming the file, the values and what to do.
func (m *Manager) ReadMetaProperties(nodeID int32) (string, error) {
	var clusterID, clusterFile string
	for _, d := range m.onlineDirs() {
		mp, err := readMetaProperties(m.opts.FS, d)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			return "", err
		case mp.nodeID != strconv.Itoa(int(nodeID)):
			return "", fmt.Errorf("%w: %s has node.id=%s, but this node's node.id is %d: start it with node.id=%s, "+
				"or give it its own log.dirs", ErrNodeIDMismatch, mp.path, mp.nodeID, nodeID, mp.nodeID)
		case clusterID != "" && mp.clusterID != clusterID:
			return "", fmt.Errorf("%w: %s has cluster.id=%s, %s has cluster.id=%s: remove the directory that belongs "+
				"to another cluster from log.dirs", ErrClusterIDMismatch, mp.path, mp.clusterID, clusterFile, clusterID)
		}
		clusterID, clusterFile = mp.clusterID, mp.path
	}
	return clusterID, nil
}

// WriteMetaProperties writes meta.properties naming nodeID and clusterID (Kafka's
// format, version=1; fsynced, atomically) in every directory that has none yet, once
// every check passed, and removes the clean-shutdown markers: from then on the
// directories change.
func (m *Manager) WriteMetaProperties(nodeID int32, clusterID string) error {
	for _, d := range m.onlineDirs() {
		p := filepath.Join(d, metaPropertiesFile)
		if _, err := m.opts.FS.Stat(p); err == nil {
			continue
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		data := fmt.Sprintf("#\n#%s\ncluster.id=%s\nnode.id=%d\nversion=1\n",
			m.opts.Clock.Now().UTC().Format(time.UnixDate), clusterID, nodeID)
		if err := writeFileAtomic(m.opts.FS, p, []byte(data), true); err != nil {
			return err
		}
	}
	return m.start()
}

// parseProperties parses Java properties (key=value or key: value lines, # and !
// comments).
func parseProperties(b []byte) map[string]string {
	props := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
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
	return props
}

// isLogDirEntry reports whether name is something Samsa keeps directly in a log
// directory (a partition's directory is checked when it is opened).
func isLogDirEntry(name string, dir bool) bool {
	if !dir {
		switch strings.TrimSuffix(name, tmpSuffix) {
		case lockFile, cleanShutdownFile, metaPropertiesFile, cleanerCheckpointFile:
			return true
		}
		return false
	}
	if name == metadataLogDir || isDeleteDirName(name) {
		return true
	}
	_, ok := parsePartitionDir(name)
	return ok
}

// reportForeign logs, once at start-up, what a log directory holds that Samsa did not
// put there. Such entries are left alone.
func (m *Manager) reportForeign() {
	for _, d := range m.onlineDirs() {
		ents, err := m.opts.FS.ReadDir(d)
		if err != nil {
			continue // reported when the partitions are listed
		}
		for _, e := range ents {
			if !isLogDirEntry(e.Name(), e.IsDir()) {
				m.opts.Logger.Info("ignoring an entry Samsa did not create in a log directory", "dir", d, "name", e.Name())
			}
		}
	}
}
