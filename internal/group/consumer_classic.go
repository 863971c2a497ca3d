package group

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Classic members in consumer groups: the online migration between the classic and
// the consumer protocol (KIP-848's upgrade and downgrade paths), as Kafka's
// coordinator does it.
//
//   - Upgrade: a ConsumerGroupHeartbeat joining a classic group that has members
//     turns it into a consumer group when group.consumer.migration.policy allows it
//     (upgrade or bidirectional) and the group uses the consumer protocol. Each
//     classic member becomes a consumer member at the group's generation, subscribed
//     to what its subscription names and holding the partitions of its last
//     assignment; the joining member's arrival then bumps the group epoch as any
//     other's, and the classic members move to the new target assignment through the
//     classic protocol.
//   - Classic members of a consumer group keep using JoinGroup, SyncGroup, Heartbeat
//     and LeaveGroup. The coordinator computes their assignment: a heartbeat answers
//     REBALANCE_IN_PROGRESS when the member is behind the group epoch, must revoke
//     partitions, or may take partitions other members released; its JoinGroup reports
//     the partitions it still owns (the subscription's owned partitions) and answers
//     at once, with the member epoch as generation and no leader; SyncGroup hands out
//     its current assignment, without what it must revoke or what others still own.
//   - Downgrade: when a member leaves or is fenced and only classic members stay, the
//     group goes back to the classic protocol if the policy allows it (downgrade or
//     bidirectional): a classic group at the group epoch, each member keeping the
//     partitions it holds, and a rebalance started at once.
//
// The committed offsets are the group's throughout: they are records of their own.

// migrationAllows reports whether group.consumer.migration.policy permits the
// conversion ("upgrade" or "downgrade").
func (c *Coordinator) migrationAllows(direction string) bool {
	p := c.cfg.MigrationPolicy
	return p == "" || p == "bidirectional" || p == direction
}

// upgradeLocked computes the consumer group a classic group with members becomes, and
// the records of the conversion. It returns a nil group and the reason when the
// group may not be converted.
func (c *Coordinator) upgradeLocked(g *group) (*consumerGroup, []Record, string) {
	switch {
	case !c.migrationAllows("upgrade"):
		return nil, nil, "group.consumer.migration.policy is " + c.cfg.MigrationPolicy
	case g.protocolType != consumerProtocolType:
		return nil, nil, "its protocol type is " + g.protocolType + ", not consumer"
	case int32(len(g.members)) >= c.cfg.ConsumerMaxSize:
		return nil, nil, "it has as many members as group.consumer.max.size allows"
	}
	topics := c.currentTopics()
	cg := newConsumerGroup()
	cg.epoch, cg.targetEpoch = g.generation, g.generation
	for _, id := range g.order {
		m := g.members[id]
		meta := m.metadataFor(g.protocol)
		if meta == nil && len(m.protocols) > 0 {
			meta = m.protocols[0].metadata // no protocol selected yet
		}
		var sub kmsg.ConsumerMemberMetadata
		if err := sub.ReadFrom(meta); err != nil {
			return nil, nil, "the subscription of member " + id + " cannot be read: " + err.Error()
		}
		assigned := Assignment{}
		if len(m.assignment) > 0 {
			var a kmsg.ConsumerMemberAssignment
			if err := a.ReadFrom(m.assignment); err != nil {
				return nil, nil, "the assignment of member " + id + " cannot be read: " + err.Error()
			}
			for _, t := range a.Topics {
				if info, ok := topics.ByName[t.Topic]; ok {
					for _, p := range t.Partitions {
						assigned.add(info.ID, p)
					}
				}
			}
		}
		cm := &consumerMember{
			id:               id,
			clientID:         m.clientID,
			clientHost:       m.clientHost,
			rebalanceTimeout: m.rebalanceTimeout,
			subscribedNames:  sortedNames(sub.Topics),
			epoch:            g.generation,
			previousEpoch:    g.generation,
			state:            memberStable,
			assigned:         assigned,
			revoking:         Assignment{},
			target:           assigned.clone(),
			// As in Kafka's ConsumerGroup.fromClassicGroup: held since the generation.
			assignmentEpochs: epochsOf(nil, g.generation, assigned),
			classic:          &classicMember{sessionTimeout: m.sessionTimeout, protocols: slices.Clone(m.protocols)},
		}
		if sub.Rack != nil {
			cm.rackID = *sub.Rack
		}
		if m.static {
			cm.instanceID = m.instanceID
			cg.static[m.instanceID] = id
		}
		cg.members[id] = cm
	}
	cg.subscriptionHash = cg.subscriptionHashOf(topics)
	records := []Record{groupTombstone(g.id), consumerGroupRecord(g.id, cg)}
	for _, id := range cg.memberIDs() {
		records = append(records, consumerMemberRecord(g.id, cg.members[id]))
	}
	return cg, records, ""
}

// dropClassicRebalanceLocked ends what a classic group's rebalance keeps in memory
// before the group becomes a consumer group: waiting JoinGroup and SyncGroup
// requests are answered REBALANCE_IN_PROGRESS (the members join again, now into the
// consumer group), member ids handed out are forgotten.
func dropClassicRebalanceLocked(g *group) {
	g.failWaiters(kerrRebalanceInProgress)
	g.numAwaitingJoin = 0
	g.pending = map[string]time.Time{}
	g.pendingSync = map[string]bool{}
	g.joinDeadline, g.syncDeadline = time.Time{}, time.Time{}
}

func sortedNames(names []string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	return slices.Compact(out)
}

// supportsClassic is Kafka's check that a classic member may join a consumer group:
// its protocols share a name with every other classic member's.
func (cg *consumerGroup) supportsClassic(memberID string, protocols []protocol) bool {
	for _, p := range protocols {
		shared := true
		for id, m := range cg.members {
			if id == memberID || m.classic == nil {
				continue
			}
			if !slices.ContainsFunc(m.classic.protocols, func(q protocol) bool { return q.name == p.name }) {
				shared = false
				break
			}
		}
		if shared {
			return true
		}
	}
	return false
}

// classicMemberFor finds the classic member a SyncGroup or Heartbeat names.
func (cg *consumerGroup) classicMemberFor(memberID string, instanceID *string) (*consumerMember, int16) {
	if instanceID != nil {
		id, ok := cg.static[*instanceID]
		if !ok {
			return nil, kerrUnknownMemberID
		}
		if id != memberID {
			return nil, kerrFencedInstanceID
		}
	}
	m := cg.members[memberID]
	if m == nil || m.classic == nil {
		return nil, kerrUnknownMemberID
	}
	return m, kerrNone
}

// waitingOnUnreleased reports whether a partition of the member's target is still
// owned by another member.
func (cg *consumerGroup) waitingOnUnreleased(m *consumerMember) bool {
	for t, ps := range m.target {
		for _, p := range ps {
			if m.assigned.has(t, p) {
				continue
			}
			if owner := cg.ownerOf(t, p); owner != nil && owner.id != m.id {
				return true
			}
		}
	}
	return false
}

// classicAssignment encodes a member's current assignment as the consumer protocol's
// assignment, at the version of its subscription (Kafka's
// ConsumerProtocolAssignment, versions 0–3 alike).
func (c *Coordinator) classicAssignment(a Assignment, subscription []byte) []byte {
	version := int16(0)
	if len(subscription) >= 2 {
		version = min(max(int16(subscription[0])<<8|int16(subscription[1]), 0), 3)
	}
	out := kmsg.NewConsumerMemberAssignment()
	out.Version = version
	topics := c.currentTopics()
	for _, t := range sortedTopicIDs(a) {
		name, ok := topics.ByID[t]
		if !ok {
			continue // deleted
		}
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic = name
		at.Partitions = slices.Clone(a[t])
		out.Topics = append(out.Topics, at)
	}
	return out.AppendTo(nil)
}

// joinConsumerGroupLocked handles a classic member's JoinGroup into a consumer group.
func (c *Coordinator) joinConsumerGroupLocked(part *partition, g *group, jr joinRequest, w *joinWaiter, now time.Time) {
	cg := g.consumer
	if jr.protocolType != consumerProtocolType || len(jr.protocols) == 0 || !cg.supportsClassic(jr.memberID, jr.protocols) {
		w.fail(kerrInconsistentGroupProtocol, jr.memberID)
		return
	}
	var sub kmsg.ConsumerMemberMetadata
	if err := sub.ReadFrom(jr.protocols[0].metadata); err != nil {
		w.fail(kerrInconsistentGroupProtocol, jr.memberID)
		return
	}
	id, known := jr.memberID, jr.memberID != ""
	if !known {
		prefix := jr.clientID
		if jr.instanceID != nil {
			prefix = *jr.instanceID
		}
		id = prefix + "-" + c.newID()
		if jr.instanceID == nil && jr.version >= 4 {
			// KIP-394: hand out the member id and let the client join again with it.
			w.fail(kerrMemberIDRequired, id)
			return
		}
	}
	old := cg.members[id]
	var m, replaced *consumerMember
	switch {
	case jr.instanceID != nil && cg.static[*jr.instanceID] != "" && cg.static[*jr.instanceID] != id:
		if known {
			w.fail(kerrFencedInstanceID, id)
			return
		}
		// A static member came back under a new member id: as in the classic protocol,
		// the new incarnation replaces the old one, with its epoch and partitions.
		replaced = cg.members[cg.static[*jr.instanceID]]
		m = replaced.clone()
		m.id = id
		if m.epoch == staticLeaveEpoch {
			m.epoch = max(m.previousEpoch, 0)
		}
	case old != nil:
		if old.classic == nil {
			w.fail(kerrUnknownMemberID, id) // a consumer protocol member
			return
		}
		m = old.clone()
	case known && jr.instanceID != nil:
		w.fail(kerrUnknownMemberID, id)
		return
	default:
		if int32(len(cg.members)) >= c.cfg.ConsumerMaxSize {
			w.fail(kerrGroupMaxSizeReached, id)
			return
		}
		m = &consumerMember{id: id, assigned: Assignment{}, revoking: Assignment{}, target: Assignment{}}
	}
	before := m.clone()
	m.clientID, m.clientHost = jr.clientID, jr.clientHost
	if jr.instanceID != nil {
		m.instanceID = *jr.instanceID
	}
	if sub.Rack != nil {
		m.rackID = *sub.Rack
	}
	m.rebalanceTimeout = jr.rebalanceTimeout
	m.serverAssignor = ""
	names := sortedNames(sub.Topics)
	subscriptionChanged := old == nil && replaced == nil || !slices.Equal(names, m.subscribedNames) || m.subscribedRegex != ""
	m.subscribedNames, m.subscribedRegex = names, ""
	m.classic = &classicMember{sessionTimeout: jr.sessionTimeout, protocols: slices.Clone(jr.protocols)}
	topics := c.currentTopics()
	owned := Assignment{}
	for _, op := range sub.OwnedPartitions {
		if info, ok := topics.ByName[op.Topic]; ok {
			for _, p := range op.Partitions {
				owned.add(info.ID, p)
			}
		}
	}
	// A classic member's heartbeat interval is its own: it is not asked back sooner
	// when the group waits for its next assignment.
	timeouts := c.groupTimeouts(g.id)
	records, resolved, _ := c.changeMemberLocked(g.id, g, cg, memberChange{
		m: m, old: old, before: before, replaced: replaced, now: now, assignInterval: *timeouts.ConsumerAssignment,
		subscriptionChanged: subscriptionChanged, owned: owned,
	})
	result := joinResult{memberID: id, generation: m.epoch, protocolType: consumerProtocolType, protocol: jr.protocols[0].name}
	c.writeConsumerLocked(part, g.id, records, func(err error) {
		if err != nil {
			w.fail(appendErrorCode(err), id)
			return
		}
		w.send(result)
	})
	if g := part.groups[g.id]; g != nil && g.consumer != nil {
		if resolved >= 0 {
			g.consumer.topicsVersion = resolved
		}
		if live := g.consumer.members[id]; live != nil {
			live.renew(now, live.classic.sessionTimeout, timeouts.ConsumerHeartbeat, before.state)
			live.classicDeadline = now.Add(live.rebalanceTimeout) // its SyncGroup
		}
	}
	c.logger.Info("classic member joined consumer group", "group", g.id, "member", id, "epoch", m.epoch, "state", m.state.String())
	if replaced != nil && replaced.classic == nil {
		c.downgradeAfterReplacementLocked(part, g.id, replaced, now)
	}
}

// downgradeAfterReplacementLocked turns a consumer group back to the classic protocol
// when a static member speaking it has just replaced the group's last member of the
// consumer protocol (replaced), as Kafka does, if the policy allows a downgrade. Its
// records go in a write of their own, after the join's; they name the replaced
// member's removal again, so that they hold on their own should the join's write
// fail. The joining member's SyncGroup then finds a classic group rebalancing.
func (c *Coordinator) downgradeAfterReplacementLocked(part *partition, groupID string, replaced *consumerMember, now time.Time) {
	g := part.groups[groupID]
	if g == nil || g.consumer == nil || g.consumer.members[replaced.id] != nil {
		return // the join's records did not apply
	}
	records := c.downgradeRecordsLocked(g, nil, now)
	if records == nil {
		return
	}
	records = append([]Record{consumerMemberTombstone(groupID, replaced.id)}, records...)
	c.writeConsumerLocked(part, groupID, records, func(error) {})
	c.finishDowngradeLocked(part, groupID, now)
}

// syncConsumerGroupLocked handles a classic member's SyncGroup in a consumer group: it
// gets its current assignment once the partition's earlier writes are committed.
func (c *Coordinator) syncConsumerGroupLocked(part *partition, g *group, req *kmsg.SyncGroupRequest, w *syncWaiter, now time.Time) {
	cg := g.consumer
	m, code := cg.classicMemberFor(req.MemberID, req.InstanceID)
	switch {
	case code != kerrNone:
		w.fail(code)
		return
	case req.Generation != m.epoch:
		w.fail(kerrIllegalGeneration)
		return
	case req.ProtocolType != nil && *req.ProtocolType != consumerProtocolType,
		req.Protocol != nil && *req.Protocol != m.classic.protocols[0].name:
		w.fail(kerrInconsistentGroupProtocol)
		return
	case cg.epoch > m.epoch && m.state != memberUnrevoked:
		// A new epoch since it joined: it must join again (a member revoking
		// partitions finishes that first).
		if m.classicDeadline.IsZero() {
			m.classicDeadline = now.Add(m.rebalanceTimeout)
		}
		w.fail(kerrRebalanceInProgress)
		return
	}
	p := m.classic.protocols[0]
	assignment := c.classicAssignment(m.assigned, p.metadata)
	m.classicDeadline = time.Time{}
	m.sessionDeadline = now.Add(m.classic.sessionTimeout)
	c.writeConsumerLocked(part, g.id, nil, func(err error) {
		if err != nil {
			w.fail(appendErrorCode(err))
			return
		}
		w.sendAs(kerrNone, consumerProtocolType, p.name, assignment)
	})
}

// heartbeatConsumerGroupLocked handles a classic member's Heartbeat in a consumer
// group: REBALANCE_IN_PROGRESS asks it to join again when it is behind the group
// epoch, must revoke partitions, or may take partitions other members released.
func (c *Coordinator) heartbeatConsumerGroupLocked(g *group, req *kmsg.HeartbeatRequest, now time.Time) int16 {
	cg := g.consumer
	m, code := cg.classicMemberFor(req.MemberID, req.InstanceID)
	if code != kerrNone {
		return code
	}
	if req.Generation != m.epoch {
		return kerrIllegalGeneration
	}
	m.sessionDeadline = now.Add(m.classic.sessionTimeout)
	if m.epoch < cg.epoch || m.state == memberUnrevoked || m.state == memberUnreleased && !cg.waitingOnUnreleased(m) {
		if m.classicDeadline.IsZero() {
			m.classicDeadline = now.Add(m.rebalanceTimeout) // its JoinGroup
		}
		return kerrRebalanceInProgress
	}
	return kerrNone
}

// leaveConsumerGroupLocked handles one member of a LeaveGroup naming a consumer group:
// a classic member leaving, or any member removed by its group.instance.id alone (the
// admin client). The channel receives the write's outcome.
func (c *Coordinator) leaveConsumerGroupLocked(part *partition, g *group, l kmsg.LeaveGroupRequestMember, now time.Time) (int16, <-chan error) {
	cg := g.consumer
	var m *consumerMember
	switch {
	case l.InstanceID != nil:
		id, ok := cg.static[*l.InstanceID]
		if !ok {
			return kerrUnknownMemberID, nil
		}
		m = cg.members[id]
		if l.MemberID != "" {
			if l.MemberID != id {
				return kerrFencedInstanceID, nil
			}
			if m.classic == nil {
				return kerrUnknownMemberID, nil
			}
		}
	default:
		var code int16
		if m, code = cg.classicMemberFor(l.MemberID, nil); code != kerrNone {
			return code, nil
		}
	}
	done := make(chan error, 1)
	c.logger.Info("consumer group member left through LeaveGroup", "group", g.id, "member", m.id, "instance", m.instanceID)
	c.removeConsumerMemberLocked(part, g, m, now, func(err error) { done <- err })
	return kerrNone, done
}

// removeConsumerMemberLocked writes and applies the records of m leaving g (or being
// fenced) — or of g going back to the classic protocol when only classic members
// would stay and the policy allows it; done runs once they are committed.
func (c *Coordinator) removeConsumerMemberLocked(part *partition, g *group, m *consumerMember, now time.Time, done func(error)) {
	records, downgraded := c.leaveRecordsLocked(g, m, now)
	c.writeConsumerLocked(part, g.id, records, done)
	if downgraded {
		c.finishDowngradeLocked(part, g.id, now)
	}
}

// leaveRecordsLocked returns the records of m leaving g, and whether they turn g into
// a classic group (finishDowngradeLocked must then run once they are applied).
func (c *Coordinator) leaveRecordsLocked(g *group, m *consumerMember, now time.Time) ([]Record, bool) {
	if records := c.downgradeRecordsLocked(g, m, now); records != nil {
		return records, true
	}
	return c.removeConsumerMemberRecords(g, m), false
}

// downgradeRecordsLocked returns the records that turn g into a classic group once
// leaving (nil: none) is gone, nil when it stays a consumer group: some member left
// would use the consumer protocol, none would be left, the policy forbids it,
// group.max.size is exceeded or the members share no protocol.
func (c *Coordinator) downgradeRecordsLocked(g *group, leaving *consumerMember, now time.Time) []Record {
	cg := g.consumer
	var stay []*consumerMember
	for _, id := range cg.memberIDs() {
		m := cg.members[id]
		if leaving != nil && id == leaving.id {
			continue
		}
		if m.classic == nil {
			return nil
		}
		stay = append(stay, m)
	}
	if len(stay) == 0 || !c.migrationAllows("downgrade") || int32(len(stay)) > c.cfg.MaxSize {
		return nil
	}
	classic := newGroup(g.id, g.partition, now)
	classic.protocolType = consumerProtocolType
	classic.generation = cg.epoch
	for _, m := range stay {
		cm := &member{
			id:               m.id,
			clientID:         m.clientID,
			clientHost:       m.clientHost,
			rebalanceTimeout: m.rebalanceTimeout,
			sessionTimeout:   m.classic.sessionTimeout,
			protocolType:     consumerProtocolType,
			protocols:        m.classic.protocols,
		}
		if m.static() {
			cm.static, cm.instanceID = true, m.instanceID
		}
		classic.add(cm, nil)
	}
	if classic.protocol = classic.selectProtocol(); classic.protocol == "" {
		return nil
	}
	assignments := map[string][]byte{}
	for _, m := range stay {
		assignments[m.id] = c.classicAssignment(m.assigned, classic.members[m.id].metadataFor(classic.protocol))
	}
	var records []Record
	for _, id := range cg.memberIDs() {
		records = append(records, consumerMemberTombstone(g.id, id))
	}
	records = append(records, consumerGroupTombstone(g.id), groupRecord(classic, assignments))
	why := "the last member of the consumer protocol was replaced by a classic static member"
	if leaving != nil {
		why = "member " + leaving.id + " left"
	}
	c.logger.Info("consumer group goes back to the classic protocol", "group", g.id, "why", why, "members", len(stay))
	return records
}

// finishDowngradeLocked starts the classic life of a group its records just turned
// into a classic one: its members must heartbeat within their session timeout, and a
// rebalance begins, in which they join as classic members do.
func (c *Coordinator) finishDowngradeLocked(part *partition, groupID string, now time.Time) {
	g := part.groups[groupID]
	if g == nil || g.consumer != nil || len(g.members) == 0 {
		return
	}
	g.subscribedTopics = g.computeSubscribedTopics()
	g.state, g.stateTime = StateStable, now
	for _, m := range g.members {
		m.heartbeatDeadline = now.Add(m.sessionTimeout)
	}
	c.prepareRebalanceLocked(part, g, now, "the group went back to the classic protocol")
	c.settleGroupLocked(part, g)
}
