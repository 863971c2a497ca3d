package group

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	kerrInvalidRequest           = kerr.InvalidRequest.Code
	kerrUnsupportedVersion       = kerr.UnsupportedVersion.Code
	kerrFencedMemberEpoch        = kerr.FencedMemberEpoch.Code
	kerrStaleMemberEpoch         = kerr.StaleMemberEpoch.Code
	kerrUnreleasedInstanceID     = kerr.UnreleasedInstanceID.Code
	kerrUnsupportedAssignor      = kerr.UnsupportedAssignor.Code
	kerrInvalidRegularExpression = kerr.InvalidRegularExpression.Code
)

// ConsumerGroupHeartbeat handles a ConsumerGroupHeartbeat request (v0–v1): a member
// joining (epoch 0), heartbeating, leaving (-1) or leaving for a while as a static
// member (-2). The channel receives exactly one response, once the records the
// heartbeat wrote (and every write before them on the partition) are committed.
//
// describable reports whether the member may describe a topic (nil: every topic): a
// regex subscription resolves only to those, as Kafka's coordinator filters a
// resolved regex by the DESCRIBE ACLs of the member that sent it. The member keeps
// the last one it sent (in memory only; see Topics.AuthorizeRegex).
func (c *Coordinator) ConsumerGroupHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest, clientID, clientHost string, describable func(topic string) bool) <-chan *kmsg.ConsumerGroupHeartbeatResponse {
	ch := make(chan *kmsg.ConsumerGroupHeartbeatResponse, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	hb := &heartbeat{c: c, req: req, resp: resp, clientID: clientID, clientHost: clientHost, now: now, describable: describable}
	if code, msg := hb.run(); code != kerrNone {
		// Refused from memory, which may hold writes not committed yet (the member's
		// removal when its session expired): the answer waits for them, and is their
		// retriable error when one fails.
		c.answerAfterQueuedWritesLocked(req.Group, code, func(answered int16) {
			resp.ErrorCode = answered
			if msg != "" && answered == code {
				resp.ErrorMessage = &msg
			}
			ch <- resp
		})
		return ch
	}
	if hb.before != nil {
		hb.before()
	}
	c.writeConsumerLocked(hb.part, req.Group, hb.records, func(err error) {
		if err != nil {
			out := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
			out.ErrorCode = appendErrorCode(err)
			ch <- out
			return
		}
		ch <- resp
	})
	for _, f := range hb.after {
		f()
	}
	if g := hb.part.groups[req.Group]; g != nil {
		c.settleGroupLocked(hb.part, g)
	}
	return ch
}

// heartbeat is one ConsumerGroupHeartbeat being handled.
type heartbeat struct {
	c                    *Coordinator
	req                  *kmsg.ConsumerGroupHeartbeatRequest
	resp                 *kmsg.ConsumerGroupHeartbeatResponse
	clientID, clientHost string
	now                  time.Time
	describable          func(topic string) bool

	part    *partition
	records []Record
	before  func()   // runs before the records are applied
	after   []func() // run in order once the records are applied (memory-only updates)
}

func (hb *heartbeat) validate() (int16, string) {
	req := hb.req
	switch {
	case req.Group == "":
		return kerrInvalidRequest, "GroupId can't be empty."
	case req.Version >= 1 && req.MemberID == "":
		return kerrInvalidRequest, "MemberId can't be empty."
	case req.MemberID == "" && req.MemberEpoch != 0:
		return kerrInvalidRequest, "MemberId can't be empty."
	case req.InstanceID != nil && *req.InstanceID == "":
		return kerrInvalidRequest, "InstanceId can't be empty."
	case req.RackID != nil && *req.RackID == "":
		return kerrInvalidRequest, "RackId can't be empty."
	case req.MemberEpoch < staticLeaveEpoch:
		return kerrInvalidRequest, "MemberEpoch is invalid."
	}
	if req.MemberEpoch == 0 {
		switch {
		case req.RebalanceTimeoutMillis == -1:
			return kerrInvalidRequest, "RebalanceTimeoutMs must be provided in first request."
		case len(req.Topics) > 0:
			return kerrInvalidRequest, "TopicPartitions must be empty when (re-)joining."
		case req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
			return kerrInvalidRequest, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
		}
	}
	if req.ServerAssignor != nil && !slices.Contains(hb.c.cfg.ConsumerAssignors, *req.ServerAssignor) {
		return kerrUnsupportedAssignor, "ServerAssignor " + *req.ServerAssignor + " is not supported; supported assignors: " + joinNames(hb.c.cfg.ConsumerAssignors) + "."
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		if _, err := compileSubscription(*req.SubscribedTopicRegex); err != nil {
			return kerrInvalidRegularExpression, "SubscribedTopicRegex " + *req.SubscribedTopicRegex + " is not a valid regular expression: " + err.Error()
		}
	}
	return kerrNone, ""
}

func joinNames(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}

func (hb *heartbeat) run() (int16, string) {
	if code, msg := hb.validate(); code != kerrNone {
		return code, msg
	}
	c, req := hb.c, hb.req
	part, code := c.partitionOfLocked(req.Group)
	if code != kerrNone {
		return code, ""
	}
	hb.part = part
	g := part.groups[req.Group]
	if g != nil && g.state == StateDead {
		// Deleted, its tombstones not yet written: the retry finds it gone.
		return kerrCoordinatorNotAvailable, ""
	}
	if req.MemberEpoch < 0 {
		return hb.leave(g)
	}
	if g != nil && g.share != nil {
		return kerrGroupIDNotFound, "Group " + g.id + " is a share group."
	}
	cg := newConsumerGroup()
	if g != nil && g.consumer == nil {
		if req.MemberEpoch != 0 {
			return kerrUnknownMemberID, ""
		}
		switch {
		case g.emptyClassic():
			// An empty classic group becomes a consumer group, its offsets kept, whatever
			// group.consumer.migration.policy says (as in Kafka).
			if g.generation > 0 || g.protocolType != "" {
				hb.records = append(hb.records, groupTombstone(g.id))
			}
			c.logger.Info("classic group becomes a consumer group", "group", g.id)
		default:
			// One with members is converted, its members kept (consumer_classic.go).
			upgraded, records, reason := c.upgradeLocked(g)
			if upgraded == nil {
				c.logger.Info("classic group not converted to a consumer group", "group", g.id, "reason", reason)
				return kerrGroupIDNotFound, "Group " + g.id + " is not a consumer group: it is a classic group with members, and " + reason + "."
			}
			c.logger.Info("classic group with members becomes a consumer group", "group", g.id, "members", len(upgraded.members), "epoch", upgraded.epoch)
			hb.records = append(hb.records, records...)
			hb.before = func() { dropClassicRebalanceLocked(g) }
			converted := upgraded.memberIDs()
			hb.after = append(hb.after, func() {
				if g := hb.part.groups[req.Group]; g != nil && g.consumer != nil {
					for _, id := range converted {
						if m := g.consumer.members[id]; m != nil && m.classic != nil {
							m.sessionDeadline = hb.now.Add(m.classic.sessionTimeout)
						}
					}
				}
			})
			cg = upgraded
		}
	}
	if g == nil && req.MemberEpoch != 0 {
		return kerrUnknownMemberID, ""
	}
	if g != nil && g.consumer != nil {
		cg = g.consumer
	}
	return hb.join(g, cg)
}

// emptyClassic reports whether a classic group has nobody in it (it may keep offsets).
func (g *group) emptyClassic() bool {
	return g.consumer == nil && g.state == StateEmpty && len(g.members) == 0 && len(g.pending) == 0
}

// leave handles epochs -1 and -2.
func (hb *heartbeat) leave(g *group) (int16, string) {
	req := hb.req
	if g == nil || g.consumer == nil {
		return kerrGroupIDNotFound, fmt.Sprintf("group %q does not exist", req.Group)
	}
	cg := g.consumer
	id := req.MemberID
	if req.InstanceID != nil {
		sid, ok := cg.static[*req.InstanceID]
		if !ok {
			return kerrUnknownMemberID, ""
		}
		if sid != id {
			return kerrFencedInstanceID, ""
		}
	}
	m := cg.members[id]
	if m == nil {
		return kerrUnknownMemberID, ""
	}
	hb.resp.MemberID = &id
	hb.resp.MemberEpoch = req.MemberEpoch
	// Kafka wants the instance id with epoch -2; franz-go sends only the member id,
	// which names the member as well. A dynamic member leaving with -2 just leaves.
	if req.MemberEpoch == staticLeaveEpoch && m.static() {
		// The member keeps its partitions until it is back or its session expires;
		// those it was asked to revoke are released at once, as Kafka's
		// consumerGroupStaticMemberGroupLeave clears them, so that their new owners
		// need not wait for its return.
		left := m.clone()
		left.previousEpoch, left.epoch = m.epoch, staticLeaveEpoch
		left.revoking = Assignment{}
		if left.state == memberUnrevoked {
			left.state = memberStable
		}
		// Its partitions count as assigned from epoch 0, so that its next incarnation
		// may commit them at any epoch up to its own (Kafka's
		// resetAssignedPartitionsEpochsToZero).
		left.assignmentEpochs = epochsOf(nil, 0, left.assigned)
		hb.records = append(hb.records, consumerMemberRecord(g.id, left))
		hb.c.logger.Info("static consumer group member left temporarily", "group", g.id, "member", id, "instance", m.instanceID)
		return kerrNone, ""
	}
	records, downgraded := hb.c.leaveRecordsLocked(g, m, hb.now)
	hb.records = append(hb.records, records...)
	if downgraded {
		hb.after = append(hb.after, func() { hb.c.finishDowngradeLocked(hb.part, g.id, hb.now) })
	}
	hb.c.logger.Info("consumer group member left", "group", g.id, "member", id)
	return kerrNone, ""
}

// removeConsumerMemberRecords are the records of a member leaving: its tombstone and
// a group epoch bump.
func (c *Coordinator) removeConsumerMemberRecords(g *group, m *consumerMember) []Record {
	next := *g.consumer
	next.epoch++
	next.members = maps.Clone(next.members)
	delete(next.members, m.id)
	next.subscriptionHash = next.subscriptionHashOf(c.currentTopics())
	return []Record{consumerMemberTombstone(g.id, m.id), consumerGroupRecord(g.id, &next)}
}

func (m *consumerMember) clone() *consumerMember {
	out := *m
	out.subscribedNames = slices.Clone(m.subscribedNames)
	out.assigned = m.assigned.clone()
	out.revoking = m.revoking.clone()
	out.target = m.target.clone()
	out.assignmentEpochs = m.assignmentEpochs.clone()
	if m.classic != nil {
		cl := *m.classic
		cl.protocols = slices.Clone(m.classic.protocols)
		out.classic = &cl
	}
	return &out
}

// join handles epoch 0 (joining or rejoining) and regular heartbeats.
func (hb *heartbeat) join(g *group, cg *consumerGroup) (int16, string) {
	c, req := hb.c, hb.req
	id := req.MemberID
	if id == "" {
		id = c.newID() // v0: the coordinator names the member
	}
	old := cg.members[id]
	var m *consumerMember
	var replaced *consumerMember // a static member's earlier incarnation
	switch {
	case req.MemberEpoch == 0 && req.InstanceID != nil && cg.static[*req.InstanceID] != "" && cg.static[*req.InstanceID] != id:
		prev := cg.members[cg.static[*req.InstanceID]]
		if prev.epoch != staticLeaveEpoch {
			return kerrUnreleasedInstanceID, "Static member " + *req.InstanceID + " is still in the group; it must leave first."
		}
		// The new incarnation takes over its predecessor's epoch and partitions.
		replaced = prev
		m = prev.clone()
		m.id = id
		m.epoch = prev.previousEpoch
		if m.epoch < 0 {
			m.epoch = 0
		}
	case old != nil:
		if req.InstanceID != nil && cg.static[*req.InstanceID] != id {
			return kerrFencedInstanceID, ""
		}
		if req.MemberEpoch != 0 {
			if code := checkMemberEpoch(old, req); code != kerrNone {
				return code, ""
			}
		}
		m = old.clone()
	case req.MemberEpoch != 0:
		return kerrUnknownMemberID, ""
	default:
		if int32(len(cg.members)) >= c.cfg.ConsumerMaxSize {
			return kerrGroupMaxSizeReached, ""
		}
		m = &consumerMember{id: id, assigned: Assignment{}, revoking: Assignment{}, target: Assignment{}}
	}
	before := m.clone()
	subscriptionChanged := updateFromRequest(m, req, hb.clientID, hb.clientHost) || old == nil && replaced == nil
	m.describable = hb.describable
	if m.epoch == staticLeaveEpoch {
		m.epoch = max(m.previousEpoch, 0) // back before its session expired
	}

	timeouts := c.groupTimeouts(req.Group)
	records, resolved, assignIn := c.changeMemberLocked(req.Group, g, cg, memberChange{
		m: m, old: old, before: before, replaced: replaced, now: hb.now, assignInterval: *timeouts.ConsumerAssignment,
		subscriptionChanged: subscriptionChanged, owned: ownedFromRequest(req.Topics),
	})
	hb.records = append(hb.records, records...)

	hb.resp.MemberID = &id
	hb.resp.MemberEpoch = m.epoch
	hb.resp.HeartbeatIntervalMillis = int32(timeouts.ConsumerHeartbeat.Milliseconds())
	if m.state == memberUnreleased {
		// It waits for partitions other members are giving up: it is asked back sooner,
		// so a released partition is not left without an owner for a whole interval.
		hb.resp.HeartbeatIntervalMillis = max(hb.resp.HeartbeatIntervalMillis/unreleasedHeartbeatDivisor, 1)
	}
	if assignIn > 0 {
		// Its group waits for its next target assignment: it is asked back when that
		// is due, so that the change is assigned then, not a heartbeat interval later.
		hb.resp.HeartbeatIntervalMillis = min(hb.resp.HeartbeatIntervalMillis, heartbeatMillis(assignIn))
	}
	full := req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil
	if req.MemberEpoch == 0 || full || !before.assigned.equal(m.assigned) {
		hb.resp.Assignment = responseAssignment(m.assigned)
	}
	hb.after = append(hb.after, func() {
		g := hb.part.groups[req.Group]
		if g == nil || g.consumer == nil {
			return
		}
		if resolved >= 0 {
			g.consumer.topicsVersion = resolved
		}
		live := g.consumer.members[id]
		if live == nil {
			return
		}
		live.describable = hb.describable // memory only: the replayed record has none
		live.renew(hb.now, timeouts.ConsumerSession, timeouts.ConsumerHeartbeat, before.state)
	})
	return kerrNone, ""
}

// memberChange is one member's change, as a ConsumerGroupHeartbeat or a classic
// member's JoinGroup makes it.
type memberChange struct {
	m        *consumerMember // the member as it will be
	old      *consumerMember // as it is in the group; nil when it joins
	before   *consumerMember // m before the request's fields were copied in
	replaced *consumerMember // a static member's earlier incarnation, or nil
	// subscriptionChanged: the member joins, or its subscription changed.
	subscriptionChanged bool
	owned               Assignment // what the member says it holds; nil: not said
	now                 time.Time
	assignInterval      time.Duration // the group's assignment interval (KIP-1263)
}

// changeMemberLocked returns the records of a member's change: the group epoch is
// bumped when the subscriptions or the subscribed topics changed, a new target
// assignment computed when the group epoch is ahead of the target's and the group's
// assignment interval has passed since the last one (KIP-1263), and the member
// reconciled towards its target (ch.m is updated in place). cg is the consumer group
// as it is: g's, or a new or converted one when g is not a consumer group yet. It also
// returns the topics version the subscriptions were resolved against, -1 when they
// were not, and, when the group is left waiting for its next target assignment, how
// long until that is due (else 0).
func (c *Coordinator) changeMemberLocked(groupID string, g *group, cg *consumerGroup, ch memberChange) ([]Record, int64, time.Duration) {
	m := ch.m
	// The group as it will be: the member replaced, the subscriptions resolved.
	members := maps.Clone(cg.members)
	if ch.replaced != nil {
		delete(members, ch.replaced.id)
	}
	members[m.id] = m
	topics := c.currentTopics()
	next := &consumerGroup{epoch: cg.epoch, targetEpoch: cg.targetEpoch, assignedAt: cg.assignedAt, members: members, regexes: cg.regexes}
	next.subscriptionHash = cg.subscriptionHash
	resolved := int64(-1)
	if ch.subscriptionChanged || topics.Version != cg.topicsVersion {
		resolved = topics.Version
		next.subscriptionHash = next.subscriptionHashOf(topics)
		if ch.subscriptionChanged || next.subscriptionHash != cg.subscriptionHash {
			next.epoch++
		}
	}
	if g == nil || g.consumer == nil {
		next.epoch = max(next.epoch, 1)
	}

	changed := map[string]*consumerMember{}
	assignIn := assignmentDueIn(cg.assignedAt, ch.assignInterval, ch.now)
	if next.epoch > next.targetEpoch && assignIn == 0 {
		for mid, mm := range c.computeTargets(next, topics) {
			if mid == m.id {
				m.target = mm
				continue
			}
			updated := members[mid].clone()
			updated.target = mm
			members[mid] = updated
			changed[mid] = updated
		}
		next.targetEpoch, next.assignedAt = next.epoch, ch.now
		c.logger.Info("consumer group assignment computed", "group", groupID, "epoch", next.epoch, "members", len(members))
	}
	if next.epoch == next.targetEpoch {
		assignIn = 0
	}
	reconcile(next, m, ch.owned)

	// Records: the group epochs first, then the members.
	var records []Record
	groupChanged := g == nil || g.consumer == nil || next.epoch != cg.epoch || next.targetEpoch != cg.targetEpoch ||
		next.subscriptionHash != cg.subscriptionHash
	if groupChanged {
		records = append(records, consumerGroupRecord(groupID, next))
	}
	for _, mid := range slices.Sorted(maps.Keys(changed)) {
		records = append(records, consumerMemberRecord(groupID, changed[mid]))
	}
	if ch.replaced != nil {
		records = append(records, consumerMemberTombstone(groupID, ch.replaced.id))
		c.logger.Info("static consumer group member rejoined", "group", groupID, "instance", m.instanceID, "old_member", ch.replaced.id, "member", m.id)
	}
	if ch.old == nil || !memberEqual(ch.before, m) {
		records = append(records, consumerMemberRecord(groupID, m))
	}
	return records, resolved, assignIn
}

// assignmentDueIn returns how long a group whose last target assignment was computed
// at last must wait for its next one with this assignment interval (KIP-1263): 0 when
// it may be computed now — the interval has passed or is 0, or last is not known or
// lies ahead of now (recorded by another coordinator whose clock ran ahead, or before
// this one's went back: a group is not held until the clock catches up, where Kafka
// would hold it).
func assignmentDueIn(last time.Time, interval time.Duration, now time.Time) time.Duration {
	if last.IsZero() || interval <= 0 || last.After(now) {
		return 0
	}
	return max(last.Add(interval).Sub(now), 0)
}

// heartbeatMillis is d as a heartbeat interval: whole milliseconds, rounded up.
func heartbeatMillis(d time.Duration) int32 {
	return int32((d + time.Millisecond - 1) / time.Millisecond)
}

// renew gives the member a session from now and, when it has partitions to revoke, a
// revocation deadline (kept while it stays revoking since before).
func (m *consumerMember) renew(now time.Time, session, heartbeat time.Duration, stateBefore memberState) {
	m.sessionDeadline = now.Add(session)
	switch {
	case m.state != memberUnrevoked:
		m.revokeDeadline = time.Time{}
	case m.revokeDeadline.IsZero() || stateBefore != memberUnrevoked:
		m.revokeDeadline = now.Add(max(m.rebalanceTimeout, heartbeat))
	}
}

// unreleasedHeartbeatDivisor shortens the heartbeat interval of a member waiting for
// partitions to be released (Kafka keeps the configured interval).
const unreleasedHeartbeatDivisor = 5

// checkMemberEpoch is Kafka's check of a heartbeat's member epoch: a newer epoch than
// the member's is fenced, an older one too unless it is the previous epoch and the
// member owns nothing beyond its assignment (its response was lost).
func checkMemberEpoch(m *consumerMember, req *kmsg.ConsumerGroupHeartbeatRequest) int16 {
	switch {
	case req.MemberEpoch > m.epoch:
		return kerrFencedMemberEpoch
	case req.MemberEpoch < m.epoch:
		if req.MemberEpoch != m.previousEpoch {
			return kerrFencedMemberEpoch
		}
		if owned := ownedFromRequest(req.Topics); owned != nil {
			for t, ps := range owned {
				for _, p := range ps {
					if !m.assigned.has(t, p) {
						return kerrFencedMemberEpoch
					}
				}
			}
		}
	}
	return kerrNone
}

// updateFromRequest copies the request's non-null fields into the member and reports
// whether its subscription changed.
func updateFromRequest(m *consumerMember, req *kmsg.ConsumerGroupHeartbeatRequest, clientID, clientHost string) bool {
	m.clientID, m.clientHost = clientID, clientHost
	if req.InstanceID != nil {
		m.instanceID = *req.InstanceID
	}
	if req.RackID != nil {
		m.rackID = *req.RackID
	}
	if req.RebalanceTimeoutMillis >= 0 {
		m.rebalanceTimeout = ms(req.RebalanceTimeoutMillis)
	}
	if req.ServerAssignor != nil {
		m.serverAssignor = *req.ServerAssignor
	}
	changed := false
	if req.SubscribedTopicNames != nil {
		names := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(names)
		names = slices.Compact(names)
		if !slices.Equal(names, m.subscribedNames) {
			m.subscribedNames = names
			changed = true
		}
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != m.subscribedRegex {
		m.subscribedRegex = *req.SubscribedTopicRegex
		changed = true
	}
	return changed
}

func memberEqual(a, b *consumerMember) bool {
	return a.id == b.id && a.instanceID == b.instanceID && a.rackID == b.rackID &&
		a.clientID == b.clientID && a.clientHost == b.clientHost && a.rebalanceTimeout == b.rebalanceTimeout &&
		slices.Equal(a.subscribedNames, b.subscribedNames) && a.subscribedRegex == b.subscribedRegex &&
		a.serverAssignor == b.serverAssignor && a.epoch == b.epoch && a.previousEpoch == b.previousEpoch &&
		a.state == b.state && a.assigned.equal(b.assigned) && a.revoking.equal(b.revoking) && a.target.equal(b.target) &&
		a.assignmentEpochs.equal(b.assignmentEpochs) && classicEqual(a.classic, b.classic)
}

func classicEqual(a, b *classicMember) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.sessionTimeout == b.sessionTimeout && slices.EqualFunc(a.protocols, b.protocols, func(x, y protocol) bool {
		return x.name == y.name && string(x.metadata) == string(y.metadata)
	})
}

// ownedFromRequest turns the request's owned partitions into an Assignment; nil when
// the request did not say (a keepalive heartbeat).
func ownedFromRequest(topics []kmsg.ConsumerGroupHeartbeatRequestTopic) Assignment {
	if topics == nil {
		return nil
	}
	out := Assignment{}
	for _, t := range topics {
		for _, p := range t.Partitions {
			out.add(TopicID(t.TopicID), p)
		}
	}
	return out
}

func responseAssignment(a Assignment) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	out := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	out.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	for _, t := range sortedTopicIDs(a) {
		rt := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		rt.TopicID = t
		rt.Partitions = slices.Clone(a[t])
		out.Topics = append(out.Topics, rt)
	}
	return &out
}

func sortedTopicIDs(a Assignment) []TopicID {
	ids := slices.Collect(maps.Keys(a))
	slices.SortFunc(ids, func(x, y TopicID) int { return slices.Compare(x[:], y[:]) })
	return ids
}

// computeTargets runs the group's assignor over its members; the assignor is the one
// most members ask for (ties: the earlier in group.consumer.assignors), the first
// configured when none asks.
func (c *Coordinator) computeTargets(cg *consumerGroup, topics *Topics) map[string]Assignment {
	ids := cg.memberIDs()
	in := make([]*assignMember, 0, len(ids))
	for _, id := range ids {
		m := cg.members[id]
		in = append(in, &assignMember{id: id, rack: m.rackID, topics: cg.subscribedTopics(m, topics), previous: m.target})
	}
	assign(c.groupAssignor(cg), in, topics)
	out := make(map[string]Assignment, len(in))
	for _, am := range in {
		out[am.id] = am.assignment
	}
	return out
}

func (c *Coordinator) groupAssignor(cg *consumerGroup) string {
	votes := map[string]int{}
	for _, m := range cg.members {
		if m.serverAssignor != "" {
			votes[m.serverAssignor]++
		}
	}
	best := c.cfg.ConsumerAssignors[0]
	for _, a := range c.cfg.ConsumerAssignors {
		if votes[a] > votes[best] {
			best = a
		}
	}
	return best
}

// reconcile moves a member towards its target assignment (Kafka's
// CurrentAssignmentBuilder): partitions to revoke first, then partitions no other
// member owns any more. owned is what the member says it holds (nil: not said).
//
// Assignment epochs (KIP-1251), as CurrentAssignmentBuilder sets them: a partition
// the member keeps, or is asked to revoke, keeps the epoch it was assigned at; a
// partition newly assigned (or assigned again after the member revoked it) gets the
// target assignment epoch; a revoked partition's epoch goes with it.
func reconcile(cg *consumerGroup, m *consumerMember, owned Assignment) {
	switch m.state {
	case memberStable:
		if m.epoch == cg.targetEpoch {
			return
		}
	case memberUnrevoked:
		if owned == nil || owned.intersects(m.revoking) {
			return // still revoking
		}
		m.revoking = Assignment{}
	}
	keep, revoke, assignable := Assignment{}, Assignment{}, Assignment{}
	unreleased := false
	for t, ps := range m.assigned {
		for _, p := range ps {
			if m.target.has(t, p) {
				keep.add(t, p)
			} else {
				revoke.add(t, p)
			}
		}
	}
	for t, ps := range m.target {
		for _, p := range ps {
			if m.assigned.has(t, p) {
				continue
			}
			if owner := cg.ownerOf(t, p); owner == nil || owner.id == m.id {
				assignable.add(t, p)
			} else {
				unreleased = true
			}
		}
	}
	if len(revoke) > 0 && (owned == nil || owned.intersects(revoke)) {
		m.state = memberUnrevoked
		m.assignmentEpochs = epochsOf(m.assignmentEpochs, m.epoch, keep, revoke)
		m.assigned, m.revoking = keep, revoke
		return
	}
	epochs := epochsOf(m.assignmentEpochs, m.epoch, keep)
	for t, ps := range assignable {
		for _, p := range ps {
			keep.add(t, p)
			epochs.set(t, p, cg.targetEpoch)
		}
	}
	m.previousEpoch, m.epoch = m.epoch, cg.targetEpoch
	m.assigned, m.revoking = keep, Assignment{}
	m.assignmentEpochs = epochs
	m.state = memberStable
	if unreleased {
		m.state = memberUnreleased
	}
}

// currentTopics returns the topics snapshot, an empty one without Options.Topics.
func (c *Coordinator) currentTopics() *Topics {
	if c.topics != nil {
		if t := c.topics(); t != nil {
			return t
		}
	}
	return &Topics{ByName: map[string]TopicInfo{}, ByID: map[TopicID]string{}}
}
