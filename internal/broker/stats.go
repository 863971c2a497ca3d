package broker

import (
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/metrics"
	"github.com/samsa-streaming/samsa/internal/share"
)

// Partitions implements metrics.Source: a snapshot of the partitions this node hosts.
// A partition is offline when its log directory failed here (before or after it was
// opened) or it has no leader.
func (b *Broker) Partitions() []metrics.PartitionStats {
	img := b.image()
	leaderless := func(topic string, partition int32) bool {
		t, ok := img.Topic(topic)
		return ok && int(partition) < len(t.Partitions) && t.Partitions[partition].Leader == metadata.NoLeader
	}
	parts := b.replicas.All()
	out := make([]metrics.PartitionStats, 0, len(parts))
	for _, p := range parts {
		replicas, isr := p.Replicas()
		out = append(out, metrics.PartitionStats{
			Topic:            p.Topic,
			Partition:        p.Index,
			LogSizeBytes:     p.Log.Size(),
			LogStartOffset:   p.Log.LogStartOffset(),
			LogEndOffset:     p.Log.LogEndOffset(),
			HighWatermark:    p.HighWatermark(),
			LastStableOffset: p.LastStableOffset(),
			Replicas:         len(replicas),
			ISR:              len(isr),
			MinISR:           p.Settings().MinInsyncReplicas,
			Leader:           p.IsLeader(),
			FollowerLag:      p.FollowerLag(),
			Offline:          p.Offline() || leaderless(p.Topic, p.Index),
		})
	}
	for _, k := range b.unopenedKeys() { // in a directory that failed before they were opened
		out = append(out, metrics.PartitionStats{Topic: k.Topic, Partition: k.Partition, Offline: true})
	}
	return out
}

// Quorum implements metrics.QuorumSource: this node's place in the metadata quorum,
// and on the active controller the cluster-wide partition and broker counts.
func (b *Broker) Quorum() metrics.QuorumStats {
	img := b.image()
	q := metrics.QuorumStats{State: "observer", MetadataOffset: img.Offset()}
	if b.controller != nil {
		q.State, q.Active = b.controller.RaftState(), b.controller.Active()
	}
	if !q.Active {
		return q
	}
	for _, br := range img.Brokers() {
		switch {
		case br.Fenced:
			q.FencedBrokers++
		case br.Active():
			q.ActiveBrokers++
		}
	}
	for _, t := range img.Topics() {
		for _, p := range t.Partitions {
			if p.Leader == metadata.NoLeader {
				q.OfflinePartitions++
			}
			if len(p.Replicas) > 0 && p.Leader != p.Replicas[0] {
				q.PreferredReplicaImbalance++
			}
		}
	}
	return q
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

// Transactions implements metrics.TransactionSource: the transactions this node
// coordinates.
func (b *Broker) Transactions() metrics.TransactionStats {
	s := b.txns.Stats()
	return metrics.TransactionStats{Ongoing: s.Ongoing, Prepared: s.Prepared, OldestOngoing: s.OldestOngoing}
}

// SharePartitions implements metrics.ShareSource: the share partitions in this
// node's memory (of the topic partitions it leads that share groups read), with their
// records in flight. A partition whose topic is no longer in the image is left out.
func (b *Broker) SharePartitions() []metrics.SharePartitionStats {
	img := b.image()
	var out []metrics.SharePartitionStats
	b.shares.InFlight(func(k share.Key, records int64) {
		t, ok := img.TopicByID(metadata.TopicID(k.TopicID))
		if !ok {
			return
		}
		out = append(out, metrics.SharePartitionStats{Group: k.Group, Topic: t.Name, Partition: k.Partition, InFlight: records})
	})
	return out
}
