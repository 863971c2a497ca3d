package replica

import (
	"sync"
	"sync/atomic"
)

// Key names a partition.
type Key struct {
	Topic     string
	Partition int32
}

// Manager holds this node's partitions.
type Manager struct {
	localNode int32
	// generation moves with every Put and Remove: a partition looked up at a
	// generation is still the one Get returns while the generation is unchanged.
	generation atomic.Uint64
	mu         struct {
		sync.RWMutex
		partitions map[Key]*Partition
	}
}

// NewManager returns an empty manager for the given node.
func NewManager(localNode int32) *Manager {
	m := &Manager{localNode: localNode}
	m.mu.partitions = make(map[Key]*Partition)
	return m
}

// LocalNode returns this node's id.
func (m *Manager) LocalNode() int32 { return m.localNode }

// Get returns the partition or nil.
func (m *Manager) Get(topic string, partition int32) *Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.mu.partitions[Key{topic, partition}]
}

// Put adds or replaces a partition.
func (m *Manager) Put(p *Partition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.partitions[Key{p.Topic, p.Index}] = p
	m.generation.Add(1)
}

// Generation counts the Puts and Removes: while it is unchanged, Get returns what it
// returned before, so callers may keep what they looked up (a fetch session does).
func (m *Manager) Generation() uint64 { return m.generation.Load() }

// Remove drops a partition and returns it (nil if absent).
func (m *Manager) Remove(topic string, partition int32) *Partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := Key{topic, partition}
	p := m.mu.partitions[k]
	delete(m.mu.partitions, k)
	m.generation.Add(1)
	return p
}

// All returns every partition, in no particular order.
func (m *Manager) All() []*Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*Partition, 0, len(m.mu.partitions))
	for _, p := range m.mu.partitions {
		out = append(out, p)
	}
	return out
}
