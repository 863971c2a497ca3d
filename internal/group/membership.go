package group

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup handles a JoinGroup request (v0–v9). The channel receives exactly one
// response: at once for errors and the MEMBER_ID_REQUIRED handshake, otherwise when the
// rebalance's join phase completes.
func (c *Coordinator) JoinGroup(req *kmsg.JoinGroupRequest, clientID, clientHost string) <-chan *kmsg.JoinGroupResponse {
	w := &joinWaiter{ch: make(chan *kmsg.JoinGroupResponse, 1), version: req.Version}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.joinLocked(req, clientID, clientHost, w, c.clock.Now())
	c.settleLocked(req.Group)
	return w.ch
}

// joinRequest is the part of a JoinGroup request the state machine uses.
type joinRequest struct {
	memberID         string
	instanceID       *string
	clientID         string
	clientHost       string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	protocolType     string
	protocols        []protocol
	version          int16
}

func (c *Coordinator) joinLocked(req *kmsg.JoinGroupRequest, clientID, clientHost string, w *joinWaiter, now time.Time) {
	if req.Group == "" {
		w.fail(kerrInvalidGroupID, req.MemberID)
		return
	}
	part, code := c.partitionOfLocked(req.Group)
	if code != kerrNone {
		w.fail(code, req.MemberID)
		return
	}
	jr := joinRequest{
		memberID:         req.MemberID,
		instanceID:       req.InstanceID,
		clientID:         clientID,
		clientHost:       clientHost,
		sessionTimeout:   ms(req.SessionTimeoutMillis),
		rebalanceTimeout: ms(req.RebalanceTimeoutMillis),
		protocolType:     req.ProtocolType,
		version:          req.Version,
	}
	if req.Version == 0 {
		jr.rebalanceTimeout = jr.sessionTimeout
	}
	for _, p := range req.Protocols {
		jr.protocols = append(jr.protocols, protocol{name: p.Name, metadata: p.Metadata})
	}
	if jr.sessionTimeout < c.cfg.MinSessionTimeout || jr.sessionTimeout > c.cfg.MaxSessionTimeout {
		w.fail(kerrInvalidSessionTimeout, req.MemberID)
		return
	}
	g := part.groups[req.Group]
	if g != nil && g.share != nil {
		w.fail(kerrInconsistentGroupProtocol, req.MemberID)
		return
	}
	if g != nil && g.consumer != nil {
		if g.state == StateDead {
			w.fail(kerrCoordinatorNotAvailable, req.MemberID)
			return
		}
		if len(g.consumer.members) > 0 {
			c.joinConsumerGroupLocked(part, g, jr, w, now)
			return
		}
		// An empty consumer group becomes a classic group, its offsets kept, whatever
		// group.consumer.migration.policy says (as in Kafka: the policy governs only the
		// conversion of a group with members; see consumer_classic.go).
		c.logger.Info("consumer group becomes a classic group", "group", g.id)
		c.writeConsumerLocked(part, g.id, []Record{consumerGroupTombstone(g.id)}, func(error) {})
		g = part.groups[req.Group]
	}
	if g == nil {
		if jr.memberID != "" {
			w.fail(kerrUnknownMemberID, jr.memberID)
			return
		}
		g = newGroup(req.Group, part.id, now)
		part.groups[req.Group] = g
		defer func() {
			if g.useless() && part.groups[g.id] == g {
				delete(part.groups, g.id)
			}
		}()
	}
	if !c.acceptJoiningMember(g, jr.memberID) {
		if m := g.members[jr.memberID]; m != nil {
			c.removeMemberLocked(part, g, m, now, "group is full")
		} else {
			delete(g.pending, jr.memberID)
		}
		w.fail(kerrGroupMaxSizeReached, "")
	} else if jr.memberID == "" {
		c.joinNewMemberLocked(part, g, jr, w, now)
	} else {
		c.joinCurrentMemberLocked(part, g, jr, w, now)
	}
	if g.state == StatePreparingRebalance {
		c.tryCompleteJoinLocked(part, g, now)
	}
}

// acceptJoiningMember enforces group.max.size.
func (c *Coordinator) acceptJoiningMember(g *group, memberID string) bool {
	m := g.members[memberID]
	switch g.state {
	case StateEmpty, StateDead:
		return true
	case StatePreparingRebalance:
		return (m != nil && m.join != nil) || g.numAwaitingJoin < int(c.cfg.MaxSize)
	default:
		return m != nil || len(g.members) < int(c.cfg.MaxSize)
	}
}

func (c *Coordinator) joinNewMemberLocked(part *partition, g *group, jr joinRequest, w *joinWaiter, now time.Time) {
	if g.state == StateDead {
		w.fail(kerrCoordinatorNotAvailable, "")
		return
	}
	if !g.supportsProtocols(jr.protocolType, jr.protocols) {
		w.fail(kerrInconsistentGroupProtocol, "")
		return
	}
	prefix := jr.clientID
	if jr.instanceID != nil {
		prefix = *jr.instanceID
	}
	newID := prefix + "-" + c.newID()
	if jr.instanceID != nil {
		if oldID, ok := g.static[*jr.instanceID]; ok {
			c.updateStaticMemberLocked(part, g, oldID, newID, jr, w, now)
		} else {
			c.addMemberLocked(part, g, newID, jr, w, now)
		}
		return
	}
	if jr.version >= 4 {
		// KIP-394: hand out the member id and let the client join again with it.
		g.pending[newID] = now.Add(jr.sessionTimeout)
		w.fail(kerrMemberIDRequired, newID)
		return
	}
	c.addMemberLocked(part, g, newID, jr, w, now)
}

func (c *Coordinator) joinCurrentMemberLocked(part *partition, g *group, jr joinRequest, w *joinWaiter, now time.Time) {
	if g.state == StateDead {
		w.fail(kerrCoordinatorNotAvailable, jr.memberID)
		return
	}
	if !g.supportsProtocols(jr.protocolType, jr.protocols) {
		w.fail(kerrInconsistentGroupProtocol, jr.memberID)
		return
	}
	if _, ok := g.pending[jr.memberID]; ok {
		c.addMemberLocked(part, g, jr.memberID, jr, w, now)
		return
	}
	if g.staticFenced(jr.instanceID, jr.memberID) {
		w.fail(kerrFencedInstanceID, jr.memberID)
		return
	}
	m := g.members[jr.memberID]
	instanceUnknown := false
	if jr.instanceID != nil {
		_, known := g.static[*jr.instanceID]
		instanceUnknown = !known
	}
	if m == nil || instanceUnknown {
		w.fail(kerrUnknownMemberID, jr.memberID)
		return
	}
	switch g.state {
	case StatePreparingRebalance:
		c.updateMemberAndRebalanceLocked(part, g, m, jr, w, now)
	case StateCompletingRebalance:
		if m.matches(jr.protocols) {
			// The member lost its JoinGroup response: give it the current generation again.
			w.send(c.currentJoinResult(g, m.id, g.leader == m.id))
		} else {
			c.updateMemberAndRebalanceLocked(part, g, m, jr, w, now)
		}
	case StateStable:
		if g.leader == m.id || !m.matches(jr.protocols) {
			// A leader's JoinGroup forces a rebalance (its view of topics changed).
			c.updateMemberAndRebalanceLocked(part, g, m, jr, w, now)
		} else {
			w.send(c.currentJoinResult(g, m.id, false))
		}
	default:
		w.fail(kerrUnknownMemberID, jr.memberID)
	}
}

func (c *Coordinator) currentJoinResult(g *group, memberID string, withMembers bool) joinResult {
	r := joinResult{
		memberID:     memberID,
		generation:   g.generation,
		protocolType: g.protocolType,
		protocol:     g.protocol,
		leader:       g.leader,
	}
	if withMembers {
		r.members = g.currentMemberMetadata()
	}
	return r
}

func (c *Coordinator) addMemberLocked(part *partition, g *group, id string, jr joinRequest, w *joinWaiter, now time.Time) {
	m := &member{
		id:               id,
		clientID:         jr.clientID,
		clientHost:       jr.clientHost,
		rebalanceTimeout: jr.rebalanceTimeout,
		sessionTimeout:   jr.sessionTimeout,
		protocolType:     jr.protocolType,
		protocols:        jr.protocols,
		isNew:            true,
	}
	if jr.instanceID != nil {
		m.static = true
		m.instanceID = *jr.instanceID
	}
	if g.state == StatePreparingRebalance && g.prevState == StateEmpty {
		// The initial rebalance delay of a rebalance out of Empty (whatever the
		// generation) is extended by members joining during it, as in Kafka.
		g.newMemberAdded = true
	}
	g.add(m, w)
	// A new member cannot heartbeat before its first JoinGroup completes; bound the wait.
	m.heartbeatDeadline = now.Add(newMemberJoinTimeout)
	c.maybePrepareRebalanceLocked(part, g, now, "new member joined")
}

func (c *Coordinator) updateMemberAndRebalanceLocked(part *partition, g *group, m *member, jr joinRequest, w *joinWaiter, now time.Time) {
	g.updateMember(m, jr.protocols, w)
	m.rebalanceTimeout = jr.rebalanceTimeout
	m.sessionTimeout = jr.sessionTimeout
	c.maybePrepareRebalanceLocked(part, g, now, "member rejoined")
}

// updateStaticMemberLocked handles a known group.instance.id joining with no member id:
// the new incarnation replaces the old one (which is fenced). In a Stable group whose
// protocol would not change the replacement is persisted and the member gets the
// current assignment back without a rebalance (KIP-345; KIP-814 for the leader).
func (c *Coordinator) updateStaticMemberLocked(part *partition, g *group, oldID, newID string, jr joinRequest, w *joinWaiter, now time.Time) {
	instanceID := *jr.instanceID
	currentLeader := g.leader
	m := g.replaceStaticMember(instanceID, oldID, newID)
	m.heartbeatDeadline = now.Add(m.sessionTimeout)
	oldProtocols := m.protocols
	oldRebalance, oldSession := m.rebalanceTimeout, m.sessionTimeout
	g.updateMember(m, jr.protocols, w)
	m.rebalanceTimeout, m.sessionTimeout = jr.rebalanceTimeout, jr.sessionTimeout
	c.logger.Info("static member rejoined", "group", g.id, "instance", instanceID, "old_member", oldID, "member", newID)

	switch g.state {
	case StateStable:
		if g.selectProtocol() != g.protocol {
			c.prepareRebalanceLocked(part, g, now, "static member changed protocols")
			return
		}
		assignment := map[string][]byte{}
		for id, mm := range g.members {
			assignment[id] = mm.assignment
		}
		c.appendLocked(part, g, []Record{groupRecord(g, assignment)}, func(err error) {
			if m.join != w {
				return // answered already: a rebalance started, or the partition moved
			}
			if err != nil {
				g.updateMember(m, oldProtocols, nil)
				m.rebalanceTimeout, m.sessionTimeout = oldRebalance, oldSession
				if g.members[newID] == m {
					g.replaceStaticMember(instanceID, newID, oldID)
				}
				m.heartbeatDeadline = c.clock.Now().Add(m.sessionTimeout)
				w.send(joinResult{
					code: appendErrorCode(err), generation: g.generation,
					protocolType: g.protocolType, protocol: g.protocol, leader: currentLeader,
				})
				return
			}
			g.updateMember(m, m.protocols, nil)
			res := c.currentJoinResult(g, newID, false)
			if w.version >= 9 {
				if g.leader == newID {
					res.members = g.currentMemberMetadata()
					res.skip = true
				}
			} else {
				// Before KIP-814 a returning leader must not re-run the assignment.
				res.leader = currentLeader
			}
			w.send(res)
		})
	case StateCompletingRebalance:
		// The leader may already hold the old member id in its assignment: rebalance.
		c.prepareRebalanceLocked(part, g, now, "static member rejoined during CompletingRebalance")
	}
}

func (c *Coordinator) maybePrepareRebalanceLocked(part *partition, g *group, now time.Time, reason string) {
	if g.is(StateStable, StateCompletingRebalance, StateEmpty) {
		c.prepareRebalanceLocked(part, g, now, reason)
	}
}

func (c *Coordinator) prepareRebalanceLocked(part *partition, g *group, now time.Time, reason string) {
	if g.state == StateCompletingRebalance {
		c.resetAssignmentLocked(g, kerrRebalanceInProgress)
	}
	g.syncDeadline = time.Time{}
	if g.state == StateEmpty {
		g.joinInitial = true
		g.initialDelay = c.cfg.InitialRebalanceDelay
		g.initialRemaining = max(g.rebalanceTimeout()-g.initialDelay, 0)
		g.joinDeadline = now.Add(g.initialDelay)
	} else {
		g.joinInitial = false
		g.joinDeadline = now.Add(g.rebalanceTimeout())
	}
	g.transition(StatePreparingRebalance, now)
	c.logger.Info("preparing to rebalance group", "group", g.id, "generation", g.generation, "reason", reason)
	if c.onRebalance != nil {
		c.onRebalance(g.id)
	}
	c.tryCompleteJoinLocked(part, g, now)
}

// resetAssignmentLocked drops the assignment and answers SyncGroup waiters with code.
func (c *Coordinator) resetAssignmentLocked(g *group, code int16) {
	for _, m := range g.members {
		m.assignment = nil
		if m.sync != nil {
			m.sync.fail(code)
			m.sync = nil
		}
	}
}

func (c *Coordinator) tryCompleteJoinLocked(part *partition, g *group, now time.Time) {
	if g.state == StatePreparingRebalance && !g.joinInitial && g.allJoined() {
		c.completeJoinLocked(part, g, now)
	}
}

func (c *Coordinator) onJoinDeadlineLocked(part *partition, g *group, now time.Time) {
	if g.joinInitial && g.newMemberAdded && g.initialRemaining > 0 {
		// Members keep arriving: wait another delay, up to the rebalance timeout.
		g.newMemberAdded = false
		delay := min(c.cfg.InitialRebalanceDelay, g.initialRemaining)
		g.initialRemaining = max(g.initialRemaining-g.initialDelay, 0)
		g.initialDelay = delay
		// The next delay starts when the previous one ended, not when the timer ran.
		g.joinDeadline = g.joinDeadline.Add(delay)
		return
	}
	c.completeJoinLocked(part, g, now)
}

// completeJoinLocked ends the join phase: members that did not rejoin are dropped
// (static members are kept), a new generation starts and every joined member gets its
// JoinGroup response, the leader with the members' metadata.
func (c *Coordinator) completeJoinLocked(part *partition, g *group, now time.Time) {
	for _, id := range slices.Clone(g.order) {
		if m := g.members[id]; m.join == nil && !m.static {
			c.logger.Info("member did not rejoin in time", "group", g.id, "member", id)
			c.dropMemberLocked(g, m)
		}
	}
	if g.state == StateDead {
		return
	}
	if !electJoinedLeader(g) && len(g.members) > 0 {
		// Nobody rejoined (only static members remain): wait another rebalance timeout.
		g.joinInitial = false
		g.joinDeadline = now.Add(g.rebalanceTimeout())
		return
	}
	g.generation++
	g.joinDeadline = time.Time{}
	g.joinInitial = false
	g.newMemberAdded = false
	g.pendingSync = map[string]bool{}
	if len(g.members) == 0 {
		g.protocol = ""
		g.subscribedTopics = g.computeSubscribedTopics()
		g.transition(StateEmpty, now)
		c.logger.Info("group is now empty", "group", g.id, "generation", g.generation)
		c.appendLocked(part, nil, []Record{groupRecord(g, nil)}, func(error) {})
		return
	}
	g.protocol = g.selectProtocol()
	g.subscribedTopics = g.computeSubscribedTopics()
	g.transition(StateCompletingRebalance, now)
	c.logger.Info("group rebalanced", "group", g.id, "generation", g.generation, "protocol", g.protocol, "members", len(g.members))
	metadata := g.currentMemberMetadata()
	for _, id := range g.order {
		m := g.members[id]
		if m.join != nil {
			r := c.currentJoinResult(g, id, false)
			if id == g.leader {
				r.members = metadata
			}
			m.join.send(r)
			m.join = nil
		}
		m.heartbeatDeadline = now.Add(m.sessionTimeout)
		m.isNew = false
		g.pendingSync[id] = true
	}
	g.numAwaitingJoin = 0
	g.syncGeneration = g.generation
	g.syncDeadline = now.Add(g.rebalanceTimeout())
}

// electJoinedLeader keeps the leader if it rejoined, or picks a member that did.
func electJoinedLeader(g *group) bool {
	if g.leader == "" {
		return false
	}
	if g.members[g.leader].join != nil {
		return true
	}
	for _, id := range g.order {
		if g.members[id].join != nil {
			g.leader = id
			return true
		}
	}
	return false
}

// onSyncDeadlineLocked drops members that did not send SyncGroup within the rebalance
// timeout after the join phase, and rebalances.
func (c *Coordinator) onSyncDeadlineLocked(part *partition, g *group, now time.Time) {
	g.syncDeadline = time.Time{}
	if !g.is(StateCompletingRebalance, StateStable) || g.generation != g.syncGeneration || len(g.pendingSync) == 0 {
		return
	}
	for _, id := range slices.Clone(g.order) {
		if g.pendingSync[id] {
			c.logger.Info("member did not sync in time", "group", g.id, "member", id)
			c.dropMemberLocked(g, g.members[id])
		}
	}
	c.prepareRebalanceLocked(part, g, now, "members did not send SyncGroup in time")
}

// dropMemberLocked removes a member and answers whatever it waits for.
func (c *Coordinator) dropMemberLocked(g *group, m *member) {
	if m.join != nil {
		m.join.fail(kerrUnknownMemberID, "")
		g.numAwaitingJoin--
		m.join = nil
	}
	if m.sync != nil {
		m.sync.fail(kerrUnknownMemberID)
		m.sync = nil
	}
	g.remove(m.id)
}

// removeMemberLocked is Kafka's removeMemberAndUpdateGroup.
func (c *Coordinator) removeMemberLocked(part *partition, g *group, m *member, now time.Time, reason string) {
	c.dropMemberLocked(g, m)
	switch g.state {
	case StateStable, StateCompletingRebalance:
		c.maybePrepareRebalanceLocked(part, g, now, reason)
	case StatePreparingRebalance:
		c.tryCompleteJoinLocked(part, g, now)
	}
}

func (c *Coordinator) removePendingMemberLocked(part *partition, g *group, id string, now time.Time) {
	delete(g.pending, id)
	if g.state == StatePreparingRebalance {
		c.tryCompleteJoinLocked(part, g, now)
	}
	if g.useless() && part.groups[g.id] == g {
		delete(part.groups, g.id) // a handshake that was never completed
	}
}

func (c *Coordinator) expireHeartbeatLocked(part *partition, g *group, m *member, now time.Time) {
	if g.state == StateDead {
		return
	}
	if !m.isNew && (m.join != nil || m.sync != nil) {
		// Members waiting in a rebalance need not heartbeat; the rebalance timeouts apply.
		m.heartbeatDeadline = time.Time{}
		return
	}
	c.logger.Info("member session expired", "group", g.id, "member", m.id)
	c.removeMemberLocked(part, g, m, now, "member session expired")
}

// SyncGroup handles a SyncGroup request (v0–v5). Followers wait until the leader's
// assignment is persisted; the channel receives exactly one response.
func (c *Coordinator) SyncGroup(req *kmsg.SyncGroupRequest) <-chan *kmsg.SyncGroupResponse {
	w := &syncWaiter{ch: make(chan *kmsg.SyncGroupResponse, 1), version: req.Version}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncLocked(req, w, c.clock.Now())
	c.settleLocked(req.Group)
	return w.ch
}

func (c *Coordinator) syncLocked(req *kmsg.SyncGroupRequest, w *syncWaiter, now time.Time) {
	if req.Group == "" {
		w.fail(kerrInvalidGroupID)
		return
	}
	part, code := c.partitionOfLocked(req.Group)
	switch code {
	case kerrNone:
	case kerrCoordinatorLoadInProgress:
		// The rebalance state is lost with a move; have the member rejoin.
		w.fail(kerrRebalanceInProgress)
		return
	default:
		w.fail(code)
		return
	}
	g := part.groups[req.Group]
	if g == nil {
		w.fail(kerrUnknownMemberID)
		return
	}
	if g.consumer != nil && g.state != StateDead {
		c.syncConsumerGroupLocked(part, g, req, w, now)
		return
	}
	m := g.members[req.MemberID]
	switch invalid := g.validateMember(req.MemberID, req.InstanceID); {
	case g.state == StateDead:
		w.fail(kerrCoordinatorNotAvailable)
	case invalid != kerrNone:
		w.fail(invalid)
	case req.Generation != g.generation:
		w.fail(kerrIllegalGeneration)
	case req.ProtocolType != nil && *req.ProtocolType != g.protocolType,
		req.Protocol != nil && *req.Protocol != g.protocol:
		w.fail(kerrInconsistentGroupProtocol)
	case g.state == StateEmpty:
		w.fail(kerrUnknownMemberID)
	case g.state == StatePreparingRebalance:
		w.fail(kerrRebalanceInProgress)
	case g.state == StateCompletingRebalance:
		if m.sync != nil {
			m.sync.fail(kerrRebalanceInProgress)
		}
		m.sync = w
		delete(g.pendingSync, m.id)
		if g.leader == m.id {
			c.storeAssignmentLocked(part, g, req.GroupAssignment)
		}
	case g.state == StateStable:
		delete(g.pendingSync, m.id)
		w.send(kerrNone, g, m.assignment)
		m.heartbeatDeadline = now.Add(m.sessionTimeout)
	}
}

// storeAssignmentLocked persists the leader's assignment; replaying the record hands
// every member its assignment and makes the group Stable.
func (c *Coordinator) storeAssignmentLocked(part *partition, g *group, given []kmsg.SyncGroupRequestGroupAssignment) {
	assignment := map[string][]byte{}
	for _, a := range given {
		if g.members[a.MemberID] != nil {
			assignment[a.MemberID] = a.MemberAssignment
		}
	}
	for id := range g.members {
		if assignment[id] == nil {
			assignment[id] = []byte{}
		}
	}
	generation := g.generation
	c.appendLocked(part, g, []Record{groupRecord(g, assignment)}, func(err error) {
		if c.mu.partitions[part.id] != part || g.state != StateCompletingRebalance || g.generation != generation {
			return // the group moved on; its waiters were answered then
		}
		now := c.clock.Now()
		if err != nil {
			c.resetAssignmentLocked(g, appendErrorCode(err))
			c.maybePrepareRebalanceLocked(part, g, now, "storing the assignment failed")
			return
		}
		for _, id := range g.order {
			m := g.members[id]
			m.assignment = assignment[id]
			if m.sync != nil {
				m.sync.send(kerrNone, g, m.assignment)
				m.sync = nil
			}
			m.heartbeatDeadline = now.Add(m.sessionTimeout)
		}
		g.transition(StateStable, now)
	})
}

// Heartbeat handles a Heartbeat request (v0–v4).
//
// As in Kafka, where a heartbeat is a write without records, the answer waits for the
// writes queued on the group's partition before it: the state it was read from may not
// be committed yet (a consumer group's records are applied when queued,
// consumer_write.go), and when one of them fails the answer is the failed write's
// retriable error, not one that a reload from the log takes back (a classic member
// told REBALANCE_IN_PROGRESS by an upgrade that is never written joins again).
func (c *Coordinator) Heartbeat(req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	answered := make(chan int16, 1)
	c.mu.Lock()
	code := c.heartbeatLocked(req, c.clock.Now())
	c.settleLocked(req.Group)
	c.answerAfterQueuedWritesLocked(req.Group, code, func(code int16) { answered <- code })
	c.mu.Unlock()
	resp.ErrorCode = <-answered
	return resp
}

func (c *Coordinator) heartbeatLocked(req *kmsg.HeartbeatRequest, now time.Time) int16 {
	if req.Group == "" {
		return kerrInvalidGroupID
	}
	part, code := c.partitionOfLocked(req.Group)
	switch code {
	case kerrNone:
	case kerrCoordinatorLoadInProgress:
		return kerrNone // the group is loading: let the member carry on
	default:
		return code
	}
	g := part.groups[req.Group]
	if g == nil {
		return kerrUnknownMemberID
	}
	if g.consumer != nil && g.state != StateDead {
		return c.heartbeatConsumerGroupLocked(g, req, now)
	}
	m := g.members[req.MemberID]
	switch invalid := g.validateMember(req.MemberID, req.InstanceID); {
	case g.state == StateDead:
		return kerrCoordinatorNotAvailable
	case invalid != kerrNone:
		return invalid
	case req.Generation != g.generation:
		return kerrIllegalGeneration
	case g.state == StateEmpty:
		return kerrUnknownMemberID
	}
	m.heartbeatDeadline = now.Add(m.sessionTimeout)
	if g.state == StatePreparingRebalance {
		return kerrRebalanceInProgress
	}
	return kerrNone
}

// LeaveGroup handles a LeaveGroup request (v0–v5; v3+ batches members, and a member
// given by group.instance.id alone is removed administratively).
func (c *Coordinator) LeaveGroup(req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	leaving := req.Members
	if req.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	c.mu.Lock()
	top, members, writes := c.leaveLocked(req.Group, leaving, c.clock.Now())
	c.settleLocked(req.Group)
	c.mu.Unlock()
	for i, w := range writes {
		if w == nil {
			continue
		}
		if err := <-w; err != nil {
			members[i].ErrorCode = appendErrorCode(err)
		}
	}
	resp.ErrorCode = top
	if req.Version >= 3 {
		resp.Members = members
		return resp
	}
	if top == kerrNone && len(members) > 0 {
		resp.ErrorCode = members[0].ErrorCode
	}
	return resp
}

// leaveLocked removes the leaving members. A member of a consumer group is removed by
// a write: its channel in writes (nil for the others) receives the write's outcome.
func (c *Coordinator) leaveLocked(groupID string, leaving []kmsg.LeaveGroupRequestMember, now time.Time) (int16, []kmsg.LeaveGroupResponseMember, []<-chan error) {
	if groupID == "" {
		return kerrInvalidGroupID, nil, nil
	}
	part, code := c.partitionOfLocked(groupID)
	if code != kerrNone {
		return code, nil, nil
	}
	g := part.groups[groupID]
	if g != nil && g.state == StateDead {
		return kerrCoordinatorNotAvailable, nil, nil
	}
	out := make([]kmsg.LeaveGroupResponseMember, 0, len(leaving))
	writes := make([]<-chan error, len(leaving))
	for i, l := range leaving {
		r := kmsg.NewLeaveGroupResponseMember()
		r.MemberID = l.MemberID
		r.InstanceID = l.InstanceID
		if g = part.groups[groupID]; g != nil && g.consumer != nil {
			r.ErrorCode, writes[i] = c.leaveConsumerGroupLocked(part, g, l, now)
		} else {
			r.ErrorCode = c.leaveOneLocked(part, g, l, now)
		}
		out = append(out, r)
	}
	return kerrNone, out, writes
}

func (c *Coordinator) leaveOneLocked(part *partition, g *group, l kmsg.LeaveGroupRequestMember, now time.Time) int16 {
	if g == nil {
		return kerrUnknownMemberID
	}
	if l.MemberID == "" {
		if l.InstanceID == nil {
			return kerrUnknownMemberID
		}
		id, ok := g.static[*l.InstanceID]
		if !ok {
			return kerrUnknownMemberID
		}
		c.removeMemberLocked(part, g, g.members[id], now, "static member removed by LeaveGroup")
		return kerrNone
	}
	if _, ok := g.pending[l.MemberID]; ok {
		c.removePendingMemberLocked(part, g, l.MemberID, now)
		return kerrNone
	}
	if code := g.validateMember(l.MemberID, l.InstanceID); code != kerrNone {
		return code
	}
	c.removeMemberLocked(part, g, g.members[l.MemberID], now, "member left the group")
	return kerrNone
}
