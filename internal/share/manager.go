package share

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-streaming/samsa/internal/clock"
)

// Key names a share partition: a group's view of one topic partition.
type Key struct {
	Group     string
	TopicID   [16]byte
	Partition int32
}

// Store persists share-partition snapshots: the share coordinator that keeps
// __share_group_state, on this broker or reached over the network. leaderEpoch is the
// topic partition's leader epoch on this broker; the coordinator refuses a read or
// write with an epoch older than one it has seen (ErrFencedLeaderEpoch), and a write
// of an older state epoch than it keeps (ErrFencedStateEpoch).
type Store interface {
	// Read returns the last snapshot written for key; found is false when none was.
	Read(ctx context.Context, key Key, leaderEpoch int32) (snap Snapshot, found bool, err error)
	// Write persists a snapshot's window and runs, laid over what is stored
	// (Snapshot.Merge), and returns once it is durable.
	Write(ctx context.Context, key Key, leaderEpoch int32, snap Snapshot) error
	// Initialize replaces what is stored with an empty window at start under
	// stateEpoch, and returns once it is durable.
	Initialize(ctx context.Context, key Key, stateEpoch int32, start int64) error
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
	// LeaderEpoch is the leader epoch of key's topic partition while this broker
	// leads it, else an error. A partition loaded under another epoch is read again.
	LeaderEpoch func(key Key) (int32, error)
	// WriteTimeout bounds a snapshot read or write.
	WriteTimeout time.Duration
	// RetryBackoff is the least wait before a lock expiry whose write failed is
	// tried again (default 500ms).
	RetryBackoff time.Duration
	// Context bounds the operations the manager starts itself (lock expiry): when it
	// ends they fail at once instead of waiting out WriteTimeout. nil: they run to
	// their end.
	Context context.Context
	// LocksExpired, when set, is told how many records of key had their acquisition
	// lock expire (released for redelivery, or archived at the delivery count limit),
	// once the change is written: an expiry whose write failed is told when it is
	// tried again and written. It runs under the partition's lock and must not block.
	LocksExpired func(key Key, records int)
}

// Manager holds the share partitions this broker serves (it leads their topic
// partitions) and drives them: it loads each from its snapshot on first use, writes
// what changed of the snapshot after every change that the snapshot holds
// (Partition.Changes, before the change is answered), and releases records whose
// acquisition lock expired, on a timer per
// partition. It is safe for concurrent use; each partition has its own lock, held
// while its snapshot is written so that writes of one partition stay in order. A
// partition leaves memory (Forget, DropGroup) under its own lock, so that no change
// is under way on it and its next use reads the durable state into a new entry.
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
	// removed: the entry left the manager's map; whoever locks it afterwards looks
	// the key up again.
	removed bool
	p       *Partition // nil until loaded
	// leaderEpoch is the topic partition's leader epoch p was loaded under.
	leaderEpoch int32
	// retryAt: a write failed; the timer fires no earlier than this.
	retryAt time.Time
	// waiters are woken when records become available again (released, expired).
	waiters []chan struct{}
	timer   clock.Timer
	timerAt time.Time
	seq     uint64
	// inFlight is p's window width (End − Start) as of the end of its last change,
	// -1 while p is not loaded; InFlight reads it without e.mu, which a state write
	// holds.
	inFlight atomic.Int64
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
	if o.Context == nil {
		o.Context = context.Background()
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = 500 * time.Millisecond
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
		e.inFlight.Store(-1)
		m.mu.parts[key] = e
	}
	return e
}

// lockEntry returns key's entry locked, creating it if needed.
func (m *Manager) lockEntry(key Key) *entry {
	for {
		e := m.entry(key)
		e.mu.Lock()
		if !e.removed {
			return e
		}
		e.mu.Unlock()
	}
}

// lockLoaded returns key's entry locked if its partition is in memory, else nil.
func (m *Manager) lockLoaded(key Key) *entry {
	m.mu.Lock()
	e := m.mu.parts[key]
	m.mu.Unlock()
	if e == nil {
		return nil
	}
	e.mu.Lock()
	if e.removed || e.p == nil {
		e.mu.Unlock()
		return nil
	}
	return e
}

// removeLocked takes e out of the map: its partition leaves memory, its timer stops,
// and its waiters are woken (they wait again on the key's next entry).
func (m *Manager) removeLocked(e *entry) {
	m.mu.Lock()
	if m.mu.parts[e.key] == e {
		delete(m.mu.parts, e.key)
	}
	m.mu.Unlock()
	e.removed = true
	e.p = nil
	e.inFlight.Store(-1)
	m.stopTimerLocked(e)
	m.wakeLocked(e)
}

// pruneLocked removes e if it holds nothing: no partition, no waiter.
func (m *Manager) pruneLocked(e *entry) {
	if !e.removed && e.p == nil && len(e.waiters) == 0 {
		m.removeLocked(e)
	}
}

// Do runs fn on the share partition of key, loading it first if needed (again when
// the topic partition's leader epoch changed); if fn changed what the snapshot holds,
// the snapshot is written before Do returns. A failed write undoes fn's changes (the
// records an acknowledgement named stay acquired, so that it can be sent again) and
// returns the error; a write the coordinator fenced drops the partition from memory,
// so that its next use reads the stored state. fn must not block.
func (m *Manager) Do(ctx context.Context, key Key, fn func(p *Partition) error) error {
	e := m.lockEntry(key)
	defer e.mu.Unlock()
	return m.doLocked(ctx, e, fn)
}

// DoIfLoaded is Do for a partition in memory only: it runs nothing (and loads
// nothing) when key's partition is not loaded.
func (m *Manager) DoIfLoaded(ctx context.Context, key Key, fn func(p *Partition) error) error {
	e := m.lockLoaded(key)
	if e == nil {
		return nil
	}
	defer e.mu.Unlock()
	return m.doLocked(ctx, e, fn)
}

// doLocked is Do on e, locked.
func (m *Manager) doLocked(ctx context.Context, e *entry, fn func(p *Partition) error) error {
	defer m.publishLocked(e)
	key := e.key
	epoch, err := m.o.LeaderEpoch(key)
	if err != nil {
		m.dropLocked(e)
		m.pruneLocked(e) // a key this broker does not lead keeps no entry
		return err
	}
	if e.p != nil && e.leaderEpoch != epoch {
		m.dropLocked(e)
	}
	if e.p == nil {
		if err := m.loadLocked(ctx, e, epoch); err != nil {
			return err
		}
	}
	e.p.SetConfig(m.o.Config(key.Group))
	e.p.Begin()
	fnErr := m.apply(e, fn)
	if err := m.persistLocked(ctx, e); err != nil {
		if errors.Is(err, ErrFencedLeaderEpoch) || errors.Is(err, ErrFencedStateEpoch) {
			m.o.Logger.Warn("share partition state was fenced; it is read again at its next use", "group", key.Group, "partition", key.Partition, "err", err)
			m.dropLocked(e)
			return err
		}
		e.p.Rollback()
		if m.o.Context.Err() != nil {
			return err // shutting down: the lock expiries are not tried again
		}
		m.o.Logger.Warn("writing share partition state failed; the change is undone", "group", key.Group, "partition", key.Partition, "err", err)
		e.retryAt = m.o.Clock.Now().Add(m.o.RetryBackoff)
		m.armLocked(e)
		return err
	}
	e.p.Commit()
	e.retryAt = time.Time{}
	if e.p.TakeFreed() {
		m.wakeLocked(e)
	}
	m.armLocked(e)
	return fnErr
}

// apply runs fn on e's partition; should fn panic, its changes are undone first, so
// that the partition in memory stays as it was stored.
func (m *Manager) apply(e *entry, fn func(p *Partition) error) error {
	done := false
	defer func() {
		if !done {
			e.p.Rollback()
		}
	}()
	err := fn(e.p)
	done = true
	return err
}

// persistLocked writes the partition's snapshot if it changed: a Reset initializes
// the stored state afresh (under its new state epoch) before the rest is written.
func (m *Manager) persistLocked(ctx context.Context, e *entry) error {
	if !e.p.Dirty() {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, m.o.WriteTimeout)
	defer cancel()
	snap := e.p.Changes()
	if e.p.TakeReset() {
		if err := m.o.Store.Initialize(wctx, e.key, snap.StateEpoch, snap.Start); err != nil {
			return err
		}
		if len(snap.Runs) == 0 {
			e.p.ClearDirty()
			return nil
		}
	}
	if err := m.o.Store.Write(wctx, e.key, e.leaderEpoch, snap); err != nil {
		return err
	}
	e.p.ClearDirty()
	return nil
}

// publishLocked makes e's window width what InFlight reports.
func (m *Manager) publishLocked(e *entry) {
	if e.p == nil {
		e.inFlight.Store(-1)
		return
	}
	e.inFlight.Store(e.p.End() - e.p.Start())
}

// dropLocked forgets the loaded partition; its next use reads the stored state.
func (m *Manager) dropLocked(e *entry) {
	if e.p == nil {
		return
	}
	e.p = nil
	e.inFlight.Store(-1)
	e.retryAt = time.Time{}
	m.stopTimerLocked(e)
	m.wakeLocked(e)
}

func (m *Manager) loadLocked(ctx context.Context, e *entry, leaderEpoch int32) error {
	cfg := m.o.Config(e.key.Group)
	rctx, cancel := context.WithTimeout(ctx, m.o.WriteTimeout)
	snap, found, err := m.o.Store.Read(rctx, e.key, leaderEpoch)
	cancel()
	if err != nil {
		return err
	}
	e.leaderEpoch = leaderEpoch
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
	e.p.stateEpoch = snap.StateEpoch // initialized without a start offset
	e.p.dirty = true                 // the initial start offset is persisted by the first Do
	return nil
}

// Wait registers ch to be woken (non-blocking send) when records of key become
// available again; the registration ends with the first wake, or with StopWaiting.
// Registering ch again before then changes nothing.
func (m *Manager) Wait(key Key, ch chan struct{}) {
	e := m.lockEntry(key)
	if !slices.Contains(e.waiters, ch) {
		e.waiters = append(e.waiters, ch)
	}
	e.mu.Unlock()
}

// StopWaiting ends ch's registration with key: the fetch that waited on it was
// answered, and a partition where nothing becomes available keeps no trace of it.
func (m *Manager) StopWaiting(key Key, ch chan struct{}) {
	m.mu.Lock()
	e := m.mu.parts[key]
	m.mu.Unlock()
	if e == nil {
		return
	}
	e.mu.Lock()
	e.waiters = slices.DeleteFunc(e.waiters, func(w chan struct{}) bool { return w == ch })
	m.pruneLocked(e)
	e.mu.Unlock()
}

// Waiting reports how many channels wait on key (Wait).
func (m *Manager) Waiting(key Key) int {
	m.mu.Lock()
	e := m.mu.parts[key]
	m.mu.Unlock()
	if e == nil {
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.waiters)
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
	if next.Before(e.retryAt) {
		next = e.retryAt
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
		e.seq++ // a firing that already waits for e.mu does nothing
	}
	e.timerAt = time.Time{}
}

func (m *Manager) onTimer(e *entry, seq uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if seq != e.seq || e.removed || e.p == nil {
		return // stopped, or the partition left memory: nothing of it to expire
	}
	e.timer = nil
	expired := 0
	err := m.doLocked(m.o.Context, e, func(p *Partition) error {
		expired = p.ExpireLocks(m.o.Clock.Now())
		return nil
	})
	if err == nil && expired > 0 && m.o.LocksExpired != nil {
		m.o.LocksExpired(e.key, expired)
	}
}

// ReleaseMember releases what member holds in every loaded partition of group.
func (m *Manager) ReleaseMember(ctx context.Context, group, member string) {
	for _, key := range m.keys(group) {
		_ = m.DoIfLoaded(ctx, key, func(p *Partition) error {
			p.ReleaseMember(member)
			return nil
		})
	}
}

// keys lists the partitions of group the manager has an entry for (loaded, or
// waited on).
func (m *Manager) keys(group string) []Key {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Key
	for k := range m.mu.parts {
		if k.Group == group {
			out = append(out, k)
		}
	}
	return out
}

// Loaded lists the partitions of group in memory.
func (m *Manager) Loaded(group string) []Key {
	var out []Key
	for _, k := range m.keys(group) {
		if e := m.lockLoaded(k); e != nil {
			e.mu.Unlock()
			out = append(out, k)
		}
	}
	return out
}

// InFlight calls fn for each partition in memory with its window's width (End −
// Start: the records it holds the state of, what counts against MaxInFlight) as of
// its last change. It takes no partition's lock: a partition whose state is being
// written is reported as it was before that change.
func (m *Manager) InFlight(fn func(key Key, records int64)) {
	m.mu.Lock()
	entries := make([]*entry, 0, len(m.mu.parts))
	for _, e := range m.mu.parts {
		entries = append(entries, e)
	}
	m.mu.Unlock()
	for _, e := range entries {
		if n := e.inFlight.Load(); n >= 0 {
			fn(e.key, n)
		}
	}
}

// Forget drops a partition from memory (its topic partition moved away, or its
// state was deleted) once no change is under way on it; the next use reloads it.
func (m *Manager) Forget(key Key) {
	m.mu.Lock()
	e := m.mu.parts[key]
	m.mu.Unlock()
	if e == nil {
		return
	}
	e.mu.Lock()
	if !e.removed {
		m.removeLocked(e)
	}
	e.mu.Unlock()
}

// ForgetTopic drops from memory the partitions of every group on the topic with id
// (it was deleted), as Forget does each.
func (m *Manager) ForgetTopic(id [16]byte) {
	m.mu.Lock()
	var keys []Key
	for k := range m.mu.parts {
		if k.TopicID == id {
			keys = append(keys, k)
		}
	}
	m.mu.Unlock()
	for _, k := range keys {
		m.Forget(k)
	}
}

// DropGroup drops every partition of group from memory, as Kafka's brokers do once
// no member of the group has a share session on them: each leaves under its lock,
// after the change under way on it (written, or undone), so what leaves is what the
// store holds, except acquisitions, which a snapshot does not keep as such. idle is
// asked under each partition's lock and stops the drop when it turns false (a
// session opened again): a partition a new session may already use stays. It returns
// how many partitions left memory.
func (m *Manager) DropGroup(group string, idle func() bool) int {
	dropped := 0
	for _, key := range m.keys(group) {
		m.mu.Lock()
		e := m.mu.parts[key]
		m.mu.Unlock()
		if e == nil {
			continue
		}
		e.mu.Lock()
		if !idle() {
			e.mu.Unlock()
			return dropped
		}
		if !e.removed {
			if e.p != nil {
				dropped++
			}
			m.removeLocked(e)
		}
		e.mu.Unlock()
	}
	return dropped
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
