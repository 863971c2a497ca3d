package controller

import (
	"slices"

	"github.com/samsa-streaming/samsa/internal/metadata"
)

// election says how a partition change may pick a leader.
type election int

const (
	// electOnline keeps the current leader if it is still valid, else takes the
	// first valid replica in replica order. Valid: in the target ISR, acceptable and
	// not offline.
	electOnline election = iota
	// electPreferred takes the first replica (the preferred leader) if it is valid,
	// else behaves like electOnline.
	electPreferred
	// electUnclean behaves like electOnline, but when no replica of the ISR is
	// valid it takes the first acceptable, online replica outside it: the ISR becomes
	// that replica alone, the leader recovery state Recovering, and acknowledged
	// records the new leader lacks are lost.
	electUnclean
)

// partitionChange computes the PartitionChangeRecord that moves one partition to a
// target state, Kafka's PartitionChangeBuilder: it completes a reassignment once the
// ISR allows, elects a leader as the election kind says, bumps the leader epoch when
// replicas leave, and reports nothing when nothing changes. It is pure: acceptable
// says which brokers may lead or be in the ISR (active ones, usually).
type partitionChange struct {
	topic      metadata.TopicID
	part       metadata.Partition
	acceptable func(broker int32) bool
	election   election

	targetISR      []int32
	targetReplicas []int32
	targetAdding   []int32
	targetRemoving []int32
	targetRecovery metadata.LeaderRecoveryState
	targetOffline  []int32
}

// newPartitionChange starts from the partition's current state: build() on it
// unchanged returns nil unless the leader must change.
func newPartitionChange(topic metadata.TopicID, p metadata.Partition, acceptable func(int32) bool) *partitionChange {
	return &partitionChange{
		topic: topic, part: p, acceptable: acceptable,
		targetISR:      slices.Clone(p.ISR),
		targetReplicas: slices.Clone(p.Replicas),
		targetAdding:   slices.Clone(p.AddingReplicas),
		targetRemoving: slices.Clone(p.RemovingReplicas),
		targetRecovery: p.LeaderRecoveryState,
		targetOffline:  slices.Clone(p.OfflineReplicas),
	}
}

// changeOutcome describes what build decided besides the record.
type changeOutcome struct {
	unclean  bool  // the new leader was elected from outside the ISR
	leader   int32 // the leader after the change
	complete bool  // a reassignment completed
}

// build returns the record, or nil when the partition would not change.
func (c *partitionChange) build() (*metadata.PartitionChangeRecord, changeOutcome) {
	rec := &metadata.PartitionChangeRecord{Topic: c.topic, Partition: c.part.Partition}
	out := changeOutcome{leader: c.part.Leader}
	out.complete = c.completeReassignment()

	leader, unclean := c.electLeader()
	if leader != c.part.Leader {
		rec.Leader = &leader
		out.leader = leader
		if unclean {
			out.unclean = true
			rec.ISR = []int32{leader}
			recovering := metadata.Recovering
			if c.part.LeaderRecoveryState != metadata.Recovering {
				rec.LeaderRecoveryState = &recovering
			}
		}
	}
	// Replicas that leave the replica set must stop following the leader: a new
	// leader epoch fences their fetches.
	if rec.Leader == nil && !containsAll(c.targetReplicas, c.part.Replicas) {
		rec.BumpLeaderEpoch = true
	}
	if rec.ISR == nil && len(c.targetISR) > 0 && !slices.Equal(c.targetISR, c.part.ISR) {
		rec.ISR = slices.Clone(c.targetISR)
	}
	if len(c.targetReplicas) > 0 && !slices.Equal(c.targetReplicas, c.part.Replicas) {
		rec.Replicas = slices.Clone(c.targetReplicas)
	}
	if !slices.Equal(c.targetAdding, c.part.AddingReplicas) {
		rec.AddingReplicas = nonNil(c.targetAdding)
	}
	if !slices.Equal(c.targetRemoving, c.part.RemovingReplicas) {
		rec.RemovingReplicas = nonNil(c.targetRemoving)
	}
	if rec.LeaderRecoveryState == nil && !out.unclean && c.targetRecovery != c.part.LeaderRecoveryState {
		s := c.targetRecovery
		rec.LeaderRecoveryState = &s
	}
	if !slices.Equal(c.targetOffline, c.part.OfflineReplicas) {
		rec.OfflineReplicas = nonNil(c.targetOffline)
	}
	if rec.Leader == nil && rec.ISR == nil && rec.Replicas == nil && rec.AddingReplicas == nil &&
		rec.RemovingReplicas == nil && rec.LeaderRecoveryState == nil && !rec.BumpLeaderEpoch && rec.OfflineReplicas == nil {
		return nil, out
	}
	return rec, out
}

// completeReassignment finishes a reassignment whose target replicas are all in the
// target ISR: the removing replicas leave both sets. It reports whether it did.
func (c *partitionChange) completeReassignment() bool {
	if len(c.targetAdding) == 0 && len(c.targetRemoving) == 0 {
		return false
	}
	isr := without(c.targetISR, c.targetRemoving...)
	replicas := without(c.targetReplicas, c.targetRemoving...)
	if len(isr) == 0 || len(replicas) == 0 || !containsAll(isr, replicas) {
		return false
	}
	c.targetISR, c.targetReplicas = isr, replicas
	c.targetAdding, c.targetRemoving = nil, nil
	return true
}

func (c *partitionChange) valid(r int32) bool {
	return r >= 0 && slices.Contains(c.targetISR, r) && c.online(r)
}

// online reports whether r is acceptable and its replica not known offline.
func (c *partitionChange) online(r int32) bool {
	return c.acceptable(r) && !slices.Contains(c.targetOffline, r)
}

// electLeader returns the leader after the change (possibly the current one, or
// NoLeader) and whether it comes from outside the ISR.
func (c *partitionChange) electLeader() (int32, bool) {
	if c.election == electPreferred && len(c.targetReplicas) > 0 && c.valid(c.targetReplicas[0]) {
		return c.targetReplicas[0], false
	}
	if c.valid(c.part.Leader) {
		return c.part.Leader, false
	}
	for _, r := range c.targetReplicas {
		if c.valid(r) {
			return r, false
		}
	}
	if c.election == electUnclean {
		for _, r := range c.targetReplicas {
			if c.online(r) {
				return r, true
			}
		}
	}
	return metadata.NoLeader, false
}

// without returns xs minus the given values, keeping order.
func without(xs []int32, drop ...int32) []int32 {
	out := make([]int32, 0, len(xs))
	for _, x := range xs {
		if !slices.Contains(drop, x) {
			out = append(out, x)
		}
	}
	return out
}

// containsAll reports whether every element of sub is in set.
func containsAll(set, sub []int32) bool {
	for _, x := range sub {
		if !slices.Contains(set, x) {
			return false
		}
	}
	return true
}

// nonNil makes an empty list explicit, which a PartitionChangeRecord reads as "clear".
func nonNil(xs []int32) []int32 {
	if xs == nil {
		return []int32{}
	}
	return slices.Clone(xs)
}
