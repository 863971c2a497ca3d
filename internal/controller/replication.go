package controller

import (
	"fmt"
	"slices"

	"github.com/samsa-streaming/samsa/internal/metadata"
)

// This file holds the pure part of partition leadership and ISR management: given an
// image and an event (a broker leaves, a broker arrives, an AlterPartition, an
// election request, a reassignment), it computes the metadata records that follow.
// Nothing here reads a clock or proposes anything; controller.go turns the records
// into log entries.

// uncleanPolicy says whether a topic allows unclean leader election
// (unclean.leader.election.enable, topic override or broker default).
type uncleanPolicy func(topic *metadata.Topic) bool

// electionEvent describes one leadership change, for the log.
type electionEvent struct {
	Topic     string
	Partition int32
	From, To  int32
	Unclean   bool
	ISR       []int32 // the ISR before the change
}

// acceptableIn returns the brokers that may lead or join an ISR: active ones in img,
// never leaving, always joining (-1: none).
func acceptableIn(img *metadata.Image, leaving, joining int32) func(int32) bool {
	return func(r int32) bool {
		switch r {
		case leaving:
			return false
		case joining:
			return true
		}
		b, ok := img.Broker(metadata.NodeID(r))
		return ok && b.Active()
	}
}

// changeSet collects the records of several partition changes and the leadership
// changes among them.
type changeSet struct {
	recs   []metadata.Record
	events []electionEvent
}

// add builds c (a change of partition p of topic t) and keeps its record, if any; it
// reports whether there was one.
func (cs *changeSet) add(t *metadata.Topic, p metadata.Partition, c *partitionChange) bool {
	rec, out := c.build()
	if rec == nil {
		return false
	}
	cs.recs = append(cs.recs, *rec)
	if out.leader != p.Leader {
		cs.events = append(cs.events, electionEvent{Topic: t.Name, Partition: p.Partition, From: p.Leader, To: out.leader, Unclean: out.unclean, ISR: p.ISR})
	}
	return true
}

// updatePartitions builds a change for every partition pick selects, after setup has
// set its targets, and returns the records and the leadership changes.
func updatePartitions(img *metadata.Image, pick func(t *metadata.Topic, p metadata.Partition) bool,
	setup func(t *metadata.Topic, c *partitionChange)) ([]metadata.Record, []electionEvent) {
	var cs changeSet
	for _, t := range img.Topics() {
		for _, p := range t.Partitions {
			if !pick(t, p) {
				continue
			}
			c := newPartitionChange(t.ID, p, nil)
			setup(t, c)
			cs.add(t, p, c)
		}
	}
	return cs.recs, cs.events
}

func electionFor(t *metadata.Topic, unclean uncleanPolicy) election {
	if unclean(t) {
		return electUnclean
	}
	return electOnline
}

// removeBrokerUpdates takes broker out of every ISR it is in, unless it is the last
// member (KIP-841: the partition then goes offline rather than forget who has the
// data), and moves its leaderships to another ISR member. Used when a broker is
// fenced, enters controlled shutdown, or registers as a new incarnation.
func removeBrokerUpdates(img *metadata.Image, broker int32, unclean uncleanPolicy) ([]metadata.Record, []electionEvent) {
	acceptable := acceptableIn(img, broker, -1)
	return updatePartitions(img,
		func(_ *metadata.Topic, p metadata.Partition) bool {
			return p.Leader == broker || slices.Contains(p.ISR, broker)
		},
		func(t *metadata.Topic, c *partitionChange) {
			c.acceptable = acceptable
			c.election = electionFor(t, unclean)
			c.targetISR = without(c.targetISR, broker)
		})
}

// offlineReplicaUpdates marks the broker's replicas of the partitions in offline as
// offline (their log directory failed; the broker itself stays active), which makes
// them ineligible to lead or be in the ISR until the broker registers again; takes the
// broker out of their ISRs, unless it is the last member (KIP-841); and moves their
// leadership to another in-sync replica — or, where there is none, leaves them
// without a leader or, for topics that allow it, elects an online out-of-sync one.
func offlineReplicaUpdates(img *metadata.Image, broker int32, offline []PartitionRef, unclean uncleanPolicy) ([]metadata.Record, []electionEvent) {
	set := make(map[PartitionRef]bool, len(offline))
	for _, r := range offline {
		set[r] = true
	}
	acceptable := acceptableIn(img, -1, -1)
	return updatePartitions(img,
		func(t *metadata.Topic, p metadata.Partition) bool {
			return set[PartitionRef{TopicID: t.ID, Partition: p.Partition}] &&
				slices.Contains(p.Replicas, broker) && !slices.Contains(p.OfflineReplicas, broker)
		},
		func(t *metadata.Topic, c *partitionChange) {
			c.acceptable = acceptable
			c.election = electionFor(t, unclean)
			c.targetISR = without(c.targetISR, broker)
			c.targetOffline = append(c.targetOffline, broker)
		})
}

// unfenceUpdates elects leaders for leaderless partitions now that broker is active.
func unfenceUpdates(img *metadata.Image, broker int32, unclean uncleanPolicy) ([]metadata.Record, []electionEvent) {
	acceptable := acceptableIn(img, -1, broker)
	return updatePartitions(img,
		func(_ *metadata.Topic, p metadata.Partition) bool { return p.Leader == metadata.NoLeader },
		func(t *metadata.Topic, c *partitionChange) {
			c.acceptable = acceptable
			c.election = electionFor(t, unclean)
		})
}

// uncleanUpdates elects leaders from outside the ISR for leaderless partitions of
// topics that allow it (run periodically, as Kafka's controller does, so that turning
// the config on takes effect).
func uncleanUpdates(img *metadata.Image, unclean uncleanPolicy) ([]metadata.Record, []electionEvent) {
	acceptable := acceptableIn(img, -1, -1)
	return updatePartitions(img,
		func(t *metadata.Topic, p metadata.Partition) bool { return p.Leader == metadata.NoLeader && unclean(t) },
		func(_ *metadata.Topic, c *partitionChange) {
			c.acceptable = acceptable
			c.election = electUnclean
		})
}

// imbalancedUpdates moves leadership back to preferred replicas for the brokers
// whose share of partitions led by someone else exceeds maxImbalance (a fraction:
// leader.imbalance.per.broker.percentage / 100).
func imbalancedUpdates(img *metadata.Image, maxImbalance float64) ([]metadata.Record, []electionEvent) {
	preferred := map[int32]int{}
	notLed := map[int32]int{}
	for _, t := range img.Topics() {
		for _, p := range t.Partitions {
			if len(p.Replicas) == 0 {
				continue
			}
			preferred[p.Replicas[0]]++
			if p.Leader != p.Replicas[0] {
				notLed[p.Replicas[0]]++
			}
		}
	}
	over := map[int32]bool{}
	for b, n := range notLed {
		if float64(n)/float64(preferred[b]) > maxImbalance {
			over[b] = true
		}
	}
	if len(over) == 0 {
		return nil, nil
	}
	acceptable := acceptableIn(img, -1, -1)
	return updatePartitions(img,
		func(_ *metadata.Topic, p metadata.Partition) bool {
			return len(p.Replicas) > 0 && over[p.Replicas[0]] && p.Leader != p.Replicas[0]
		},
		func(_ *metadata.Topic, c *partitionChange) {
			c.acceptable = acceptable
			c.election = electPreferred
		})
}

// ISRMember is one broker of a proposed ISR with the broker epoch its leader saw
// (KIP-903); -1 skips the epoch check (AlterPartition before v3).
type ISRMember struct {
	BrokerID    int32
	BrokerEpoch int64
}

// PartitionRef names a partition by its topic id.
type PartitionRef struct {
	TopicID   metadata.TopicID
	Partition int32
}

// AlterPartitionItem is one partition of an AlterPartition request: the ISR (and
// leader recovery state) the leader wants, with the epochs it is acting on.
type AlterPartitionItem struct {
	// TopicID names the topic (AlterPartition v2+); when zero, Topic does (v0–v1).
	TopicID             metadata.TopicID
	Topic               string
	Partition           int32
	LeaderEpoch         int32
	PartitionEpoch      int32
	NewISR              []ISRMember
	LeaderRecoveryState metadata.LeaderRecoveryState
}

// AlterPartitionResult is the outcome for one item: Err, or the partition state
// after the change was committed.
type AlterPartitionResult struct {
	TopicID   metadata.TopicID
	Topic     string
	Partition int32
	Err       error
	State     metadata.Partition
}

// alterPartitionUpdates validates an AlterPartition request as Kafka's controller
// does and returns the records and the per-item results. The error is for the whole
// request (an unknown broker or a stale broker epoch).
func alterPartitionUpdates(img *metadata.Image, brokerID int32, brokerEpoch int64, items []AlterPartitionItem, unclean uncleanPolicy) ([]metadata.Record, []AlterPartitionResult, error) {
	if _, err := registeredBroker(img, brokerID, brokerEpoch); err != nil {
		return nil, nil, err
	}
	var recs []metadata.Record
	results := make([]AlterPartitionResult, len(items))
	movedLeader := map[int]bool{}
	for i, it := range items {
		res := &results[i]
		res.TopicID, res.Topic, res.Partition = it.TopicID, it.Topic, it.Partition
		var t *metadata.Topic
		var ok bool
		if !it.TopicID.IsZero() {
			if t, ok = img.TopicByID(it.TopicID); !ok {
				res.Err = fmt.Errorf("%w: topic id %s", ErrUnknownTopicID, it.TopicID)
				continue
			}
		} else if t, ok = img.Topic(it.Topic); !ok {
			res.Err = fmt.Errorf("%w: topic %q", ErrUnknownTopic, it.Topic)
			continue
		}
		res.TopicID, res.Topic = t.ID, t.Name
		if it.Partition < 0 || int(it.Partition) >= len(t.Partitions) {
			res.Err = fmt.Errorf("%w: %s-%d", ErrUnknownTopic, t.Name, it.Partition)
			continue
		}
		p := t.Partitions[it.Partition]
		if res.Err = validateAlterPartition(img, brokerID, t.Name, p, it); res.Err != nil {
			continue
		}
		c := newPartitionChange(t.ID, p, acceptableIn(img, -1, -1))
		c.election = electionFor(t, unclean)
		c.targetISR = make([]int32, len(it.NewISR))
		for j, m := range it.NewISR {
			c.targetISR[j] = m.BrokerID
		}
		c.targetRecovery = it.LeaderRecoveryState
		rec, out := c.build()
		if rec != nil {
			recs = append(recs, *rec)
			if out.leader != brokerID {
				movedLeader[i] = true
			}
		}
	}
	next := img
	if len(recs) > 0 {
		var err error
		if next, err = metadata.Apply(img, img.Offset()+1, recs); err != nil {
			return nil, nil, fmt.Errorf("AlterPartition built records that do not apply: %w", err)
		}
	}
	for i := range results {
		res := &results[i]
		if res.Err != nil {
			continue
		}
		t, _ := next.TopicByID(res.TopicID)
		res.State = t.Partitions[res.Partition]
		if movedLeader[i] {
			res.Err = fmt.Errorf("%w: the reassignment this ISR completed moved the leadership of %s-%d to %d", ErrNewLeaderElected, res.Topic, res.Partition, res.State.Leader)
		}
	}
	return recs, results, nil
}

// validateAlterPartition applies Kafka's checks, in Kafka's order.
func validateAlterPartition(img *metadata.Image, brokerID int32, topic string, p metadata.Partition, it AlterPartitionItem) error {
	name := fmt.Sprintf("%s-%d", topic, p.Partition)
	switch {
	case it.LeaderEpoch > p.LeaderEpoch || it.PartitionEpoch > p.PartitionEpoch:
		return fmt.Errorf("%w: %s is at leader epoch %d and partition epoch %d here, the request names %d and %d",
			ErrNotController, name, p.LeaderEpoch, p.PartitionEpoch, it.LeaderEpoch, it.PartitionEpoch)
	case it.LeaderEpoch < p.LeaderEpoch:
		return fmt.Errorf("%w: %s is at leader epoch %d, the request names %d", ErrFencedLeaderEpoch, name, p.LeaderEpoch, it.LeaderEpoch)
	case brokerID != p.Leader:
		return fmt.Errorf("%w: broker %d is not the leader of %s (the leader is %d)", ErrInvalidRequest, brokerID, name, p.Leader)
	case it.PartitionEpoch < p.PartitionEpoch:
		return fmt.Errorf("%w: %s is at partition epoch %d, the request names %d", ErrInvalidUpdateVersion, name, p.PartitionEpoch, it.PartitionEpoch)
	}
	seen := map[int32]bool{}
	for _, m := range it.NewISR {
		if seen[m.BrokerID] || !slices.Contains(p.Replicas, m.BrokerID) {
			return fmt.Errorf("%w: the new ISR of %s names %d twice or outside the replicas %v", ErrInvalidRequest, name, m.BrokerID, p.Replicas)
		}
		seen[m.BrokerID] = true
	}
	switch {
	case !seen[p.Leader]:
		return fmt.Errorf("%w: the new ISR of %s does not include its leader %d", ErrInvalidRequest, name, p.Leader)
	case it.LeaderRecoveryState == metadata.Recovering && len(it.NewISR) > 1:
		return fmt.Errorf("%w: %s is recovering from an unclean election: its ISR must stay the leader alone", ErrInvalidRequest, name)
	case p.LeaderRecoveryState == metadata.Recovered && it.LeaderRecoveryState == metadata.Recovering:
		return fmt.Errorf("%w: %s cannot go back from RECOVERED to RECOVERING", ErrInvalidRequest, name)
	}
	for _, m := range it.NewISR {
		b, ok := img.Broker(metadata.NodeID(m.BrokerID))
		var why string
		switch {
		case !ok:
			why = "not registered"
		case b.InControlledShutdown:
			why = "shutting down"
		case b.Fenced:
			why = "fenced"
		case m.BrokerEpoch != -1 && m.BrokerEpoch != b.Epoch:
			why = fmt.Sprintf("at broker epoch %d, not %d", b.Epoch, m.BrokerEpoch)
		case slices.Contains(p.OfflineReplicas, m.BrokerID) && !slices.Contains(p.ISR, m.BrokerID):
			why = "offline there (its log directory failed)"
		default:
			continue
		}
		return fmt.Errorf("%w: broker %d in the new ISR of %s is %s", ErrIneligibleReplica, m.BrokerID, name, why)
	}
	return nil
}

// ElectionType is ElectLeaders' election type, with Kafka's numbering.
type ElectionType int8

const (
	ElectPreferred ElectionType = 0
	ElectUnclean   ElectionType = 1
)

// ElectionResult is the outcome of ElectLeaders for one partition.
type ElectionResult struct {
	Topic     string
	Partition int32
	Err       error
}

// electLeadersUpdates runs an election on the named partitions (nil: every
// partition, and then the partitions that need none are left out of the results).
func electLeadersUpdates(img *metadata.Image, typ ElectionType, targets map[string][]int32) ([]metadata.Record, []electionEvent, []ElectionResult) {
	var cs changeSet
	var results []ElectionResult
	elect := func(t *metadata.Topic, p metadata.Partition) error {
		if typ == ElectPreferred && len(p.Replicas) > 0 && p.Leader == p.Replicas[0] ||
			typ == ElectUnclean && p.Leader != metadata.NoLeader {
			return ErrElectionNotNeeded
		}
		c := newPartitionChange(t.ID, p, acceptableIn(img, -1, -1))
		c.election = electPreferred
		if typ == ElectUnclean {
			c.election = electUnclean
		}
		if cs.add(t, p, c) {
			return nil
		}
		if typ == ElectPreferred {
			return fmt.Errorf("%w: preferred replica %d of %s-%d is not an active ISR member", ErrPreferredLeaderNotAvailable, p.Replicas[0], t.Name, p.Partition)
		}
		return fmt.Errorf("%w: no active replica of %s-%d", ErrEligibleLeadersNotAvailable, t.Name, p.Partition)
	}
	if targets == nil {
		for _, t := range img.Topics() {
			for _, p := range t.Partitions {
				if err := elect(t, p); err != ErrElectionNotNeeded {
					results = append(results, ElectionResult{Topic: t.Name, Partition: p.Partition, Err: err})
				}
			}
		}
		return cs.recs, cs.events, results
	}
	for _, name := range sortedKeys(targets) {
		t, ok := img.Topic(name)
		for _, part := range targets[name] {
			res := ElectionResult{Topic: name, Partition: part}
			switch {
			case !ok || part < 0 || int(part) >= len(t.Partitions):
				res.Err = fmt.Errorf("%w: %s-%d", ErrUnknownTopic, name, part)
			default:
				res.Err = elect(t, t.Partitions[part])
			}
			results = append(results, res)
		}
	}
	return cs.recs, cs.events, results
}

// Reassignment is one partition of AlterPartitionReassignments: the target replicas
// (preferred leader first), or nil to cancel the partition's reassignment.
type Reassignment struct {
	Topic     string
	Partition int32
	Replicas  []int32
}

// ReassignmentStatus is one ongoing reassignment, as ListPartitionReassignments
// reports it.
type ReassignmentStatus struct {
	Topic            string
	Partition        int32
	Replicas         []int32
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// reassignUpdates starts, changes or cancels reassignments. A reassignment first
// adds the new replicas to the replica set (they start following and catching up);
// once all of them are in the ISR, the next ISR change (or this one, if that is
// already so) drops the replicas being removed.
func reassignUpdates(img *metadata.Image, items []Reassignment, unclean uncleanPolicy) ([]metadata.Record, []electionEvent, []error) {
	var cs changeSet
	errs := make([]error, len(items))
	for i, it := range items {
		t, ok := img.Topic(it.Topic)
		if !ok || it.Partition < 0 || int(it.Partition) >= len(t.Partitions) {
			errs[i] = fmt.Errorf("%w: %s-%d", ErrUnknownTopic, it.Topic, it.Partition)
			continue
		}
		p := t.Partitions[it.Partition]
		c := newPartitionChange(t.ID, p, acceptableIn(img, -1, -1))
		c.election = electionFor(t, unclean)
		if it.Replicas == nil {
			if !p.Reassigning() {
				errs[i] = fmt.Errorf("%w: %s-%d", ErrNoReassignmentInProgress, it.Topic, it.Partition)
				continue
			}
			c.targetReplicas = without(p.Replicas, p.AddingReplicas...)
			c.targetISR = without(p.ISR, p.AddingReplicas...)
			if len(c.targetISR) == 0 {
				if !unclean(t) {
					errs[i] = fmt.Errorf("%w: reverting the reassignment of %s-%d needs an unclean leader election: every ISR member is a replica being added",
						ErrInvalidReplicaAssignment, it.Topic, it.Partition)
					continue
				}
				c.targetISR = c.targetReplicas[:1]
			}
			c.targetAdding, c.targetRemoving = nil, nil
		} else {
			if err := checkReplicas(img, it.Partition, it.Replicas); err != nil {
				errs[i] = err
				continue
			}
			removing := without(p.Replicas, it.Replicas...)
			c.targetAdding = without(it.Replicas, p.Replicas...)
			c.targetRemoving = removing
			c.targetReplicas = append(slices.Clone(it.Replicas), removing...)
		}
		cs.add(t, p, c)
	}
	return cs.recs, cs.events, errs
}

// listReassignments returns the ongoing reassignments of the named topics (nil:
// all), sorted by topic and partition.
func listReassignments(img *metadata.Image, topics map[string][]int32) []ReassignmentStatus {
	var out []ReassignmentStatus
	for _, t := range img.Topics() {
		parts, named := topics[t.Name]
		if topics != nil && !named {
			continue
		}
		for _, p := range t.Partitions {
			if !p.Reassigning() || topics != nil && !slices.Contains(parts, p.Partition) {
				continue
			}
			out = append(out, ReassignmentStatus{
				Topic: t.Name, Partition: p.Partition, Replicas: slices.Clone(p.Replicas),
				AddingReplicas: slices.Clone(p.AddingReplicas), RemovingReplicas: slices.Clone(p.RemovingReplicas),
			})
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
