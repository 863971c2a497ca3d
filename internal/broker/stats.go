package broker

import (
	"github.com/samsa-streaming/samsa/internal/metrics"
)

// Partitions implements metrics.Source: a snapshot of the partitions this node hosts.
func (b *Broker) Partitions() []metrics.PartitionStats {
	parts := b.replicas.All()
	out := make([]metrics.PartitionStats, 0, len(parts))
	for _, p := range parts {
		replicas, isr := p.Replicas()
		out = append(out, metrics.PartitionStats{
			Topic:          p.Topic,
			Partition:      p.Index,
			LogSizeBytes:   p.Log.Size(),
			LogStartOffset: p.Log.LogStartOffset(),
			LogEndOffset:   p.Log.LogEndOffset(),
			HighWatermark:  p.HighWatermark(),
			Replicas:       len(replicas),
			ISR:            len(isr),
			Leader:         p.IsLeader(),
			Offline:        p.Offline(),
		})
	}
	return out
}

// Groups implements metrics.Source: the groups this node coordinates, with their
// committed offsets.
func (b *Broker) Groups() []metrics.GroupStats {
	summaries := b.groups.Groups()
	out := make([]metrics.GroupStats, 0, len(summaries))
	for _, g := range summaries {
		gs := metrics.GroupStats{Group: g.Group, State: g.State, Members: len(g.Members), Generation: g.Generation}
		for tp, o := range b.groups.CommittedOffsets(g.Group) {
			gs.Offsets = append(gs.Offsets, metrics.GroupOffset{Topic: tp.Topic, Partition: tp.Partition, Committed: o.Offset})
		}
		out = append(out, gs)
	}
	return out
}
