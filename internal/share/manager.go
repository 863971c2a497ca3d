package share

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/samsa-streaming/samsa/internal/clock"
)

// Key names a share partition: a group's view of one topic partition.
type Key struct {
	Group     string
	TopicID   [16]byte
	Partition int32
}

// Store persists share-partition snapshots (the broker's __share_group_state).
type Store interface {
	// Read returns the last snapshot written for key; found is false when none was.
	Read(ctx context.Context, key Key) (snap Snapshot, found bool, err error)
	// Write persists a snapshot and returns once it is durable.
	Write(ctx context.Context, key Key, snap Snapshot) error
}

// Options configure a Manager.
type Options struct {
	Store  Store
	Clock  clock.Clock  // nil: clock.Real
	Logger *slog.Logger // nil: slog.Default()
	// Config returns the limits of a group's share partitions (group configs over the
	// broker defaults).
	Config func(group string) PartitionConfig
	// InitialOffset is where a share partition without a snapshot starts
	// (share.auto.offset.reset: the log start or the high watermark).
	InitialOffset func(key Key) (int64, error)
	// WriteTimeout bounds a snapshot write.
	WriteTimeout time.Duration
}

// Manager holds the share partitions this broker serves (it leads their topic
// partitions) and drives them: it loads each from its snapshot on first use, persists
// a snapshot after every change that the snapshot holds (before the change is
// answered), and releases records whose acquisition lock expired, on a timer per
// partition. It is safe for concurrent use; each partition has its own lock, held
// while its snapshot is written so that writes of one partition stay in order.
type Manager struct {
	o  Options
	mu struct {
		sync.Mutex
		parts map[Key]*entry
	}
}

type entry struct {
	key Key
	mu  sync.Mutex
	p   *Partition // nil until loaded
	// waiters are woken when records become available again (released, expired).
	waiters []chan struct{}
	timer   clock.Timer
	timerAt time.Time
	seq     uint64
}

// NewManager returns an empty Manager.
func NewManager(o Options) *Manager {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 5 * time.Second
	}
	m := &Manager{o: o}
	m.mu.parts = map[Key]*entry{}
	return m
}

func (m *Manager) entry(key Key) *entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.mu.parts[key]
	if e == nil {
		e = &entry{key: key}
		m.mu.parts[key] = e
	}
	return e
}

// Do runs fn on the share partition of key, loading it first if needed; if fn changed
// what the snapshot holds, the snapshot is written before Do returns (a failed write
// drops the partition from memory, so the next use reloads the persisted state, and
// returns the error). fn must not block.
func (m *Manager) Do(ctx context.Context, key Key, fn func(p *Partition) error) error {
	e := m.entry(key)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.p == nil {
		if err := m.loadLocked(ctx, e); err != nil {
			return err
		}
	}
	e.p.SetConfig(m.o.Config(key.Group))
	fnErr := fn(e.p)
	if e.p.Dirty() {
		wctx, cancel := context.WithTimeout(ctx, m.o.WriteTimeout)
		err := m.o.Store.Write(wctx, key, e.p.Snapshot())
		cancel()
		if err != nil {
			m.o.Logger.Warn("writing share partition state failed; it is reloaded at its next use", "group", key.Group, "partition", key.Partition, "err", err)
			e.p = nil
			m.stopTimerLocked(e)
			m.wakeLocked(e)
			return err
		}
		e.p.ClearDirty()
	}
	if e.p.TakeFreed() {
		m.wakeLocked(e)
	}
	m.armLocked(e)
	return fnErr
}

func (m *Manager) loadLocked(ctx context.Context, e *entry) error {
	cfg := m.o.Config(e.key.Group)
	snap, found, err := m.o.Store.Read(ctx, e.key)
	if err != nil {
		return err
	}
	if found {
		p, err := FromSnapshot(cfg, snap)
		if err != nil {
			return err
		}
		e.p = p
		return nil
	}
	start, err := m.o.InitialOffset(e.key)
	if err != nil {
		return err
	}
	e.p = NewPartition(cfg, start)
	e.p.dirty = true // the initial start offset is persisted by the first Do
	return nil
}

// Wait registers ch to be woken (non-blocking send) when records of key become
// available again; the registration ends with the first wake.
func (m *Manager) Wait(key Key, ch chan struct{}) {
	e := m.entry(key)
	e.mu.Lock()
	e.waiters = append(e.waiters, ch)
	e.mu.Unlock()
}

func (m *Manager) wakeLocked(e *entry) {
	for _, ch := range e.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	e.waiters = e.waiters[:0]
}

// armLocked arms the partition's timer for its earliest lock expiry.
func (m *Manager) armLocked(e *entry) {
	if e.p == nil {
		m.stopTimerLocked(e)
		return
	}
	next := e.p.NextDeadline()
	if next.IsZero() {
		m.stopTimerLocked(e)
		return
	}
	if e.timer != nil && next.Equal(e.timerAt) {
		return
	}
	m.stopTimerLocked(e)
	e.seq++
	seq := e.seq
	e.timerAt = next
	e.timer = m.o.Clock.AfterFunc(max(next.Sub(m.o.Clock.Now()), 0), func() { m.onTimer(e, seq) })
}

func (m *Manager) stopTimerLocked(e *entry) {
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	e.timerAt = time.Time{}
}

func (m *Manager) onTimer(e *entry, seq uint64) {
	e.mu.Lock()
	if seq != e.seq {
		e.mu.Unlock()
		return
	}
	e.timer = nil
	e.mu.Unlock()
	_ = m.Do(context.Background(), e.key, func(p *Partition) error {
		p.ExpireLocks(m.o.Clock.Now())
		return nil
	})
}

// ReleaseMember releases what member holds in every loaded partition of group.
func (m *Manager) ReleaseMember(ctx context.Context, group, member string) {
	for _, key := range m.keys(group) {
		_ = m.Do(ctx, key, func(p *Partition) error {
			p.ReleaseMember(member)
			return nil
		})
	}
}

// keys lists the loaded partitions of group.
func (m *Manager) keys(group string) []Key {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Key
	for k, e := range m.mu.parts {
		if k.Group == group && e != nil {
			out = append(out, k)
		}
	}
	return out
}

// Forget drops a partition from memory (its topic partition moved away, or its
// state was deleted); the next use reloads it.
func (m *Manager) Forget(key Key) {
	m.mu.Lock()
	e := m.mu.parts[key]
	delete(m.mu.parts, key)
	m.mu.Unlock()
	if e != nil {
		e.mu.Lock()
		m.stopTimerLocked(e)
		m.wakeLocked(e)
		e.mu.Unlock()
	}
}

// Close stops every timer.
func (m *Manager) Close() {
	m.mu.Lock()
	parts := m.mu.parts
	m.mu.parts = map[Key]*entry{}
	m.mu.Unlock()
	for _, e := range parts {
		e.mu.Lock()
		m.stopTimerLocked(e)
		e.mu.Unlock()
	}
}
