package group

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Share groups (KIP-932): members subscribe to topics and the coordinator assigns them
// partitions, which — unlike a consumer group's — several members may share; records
// are handed out and acknowledged one by one by the partition leaders (internal/share),
// not here. There is no revocation: a member gets its new assignment at its next
// heartbeat, at the assignment epoch. The group epoch moves whenever a member joins
// or changes its subscription, the subscribed topics change, a member leaves or its
// session expires; the next heartbeat of a member then computes the assignment at the
// group epoch, so that no partition is left without a member — once the group's
// assignment interval (share.assignment.interval.ms, Kafka 4.3's KIP-1263) has passed
// since the last one: changes within it are assigned together.
//
// The simple assignor: with at least as many partitions as members, partition i of
// the sorted subscribed partitions goes to member i mod M (members sorted by id,
// among those subscribed to its topic); with more members than partitions, member j
// also gets partition j mod P, so every member has work and every partition a member.
//
// Share state initialization (Kafka 4.1, KAFKA-20742): the group records, for each
// topic it has assigned, how many of its partitions it has initialized. A topic the
// group meets for the first time is assigned whole, and each of its share partitions
// starts where share.auto.offset.reset says at its first fetch. Partitions a known
// topic gains later are held back from the assignment until their share state has
// been written to start at offset 0 (Options.InitShareState), so that records written
// to them before any member fetches them are delivered, not skipped by "latest";
// once that is done the group epoch moves and members get them at their next
// heartbeat. A failed initialization is tried again at the next heartbeat.
//
// Records (JSON values, like the consumer group's):
//
//	key 0x5311 group                shareGroupValue  (group and assignment epochs, when
//	                                                  the assignment was computed,
//	                                                  subscription hash, initialized
//	                                                  partition counts)
//	key 0x5312 group, member id     shareMemberValue (subscription, epoch, assignment)
const (
	shareGroupKeyVersion  int16 = 0x5311
	shareMemberKeyVersion int16 = 0x5312
	shareAssignorName           = "simple"
)

type shareGroup struct {
	epoch int32
	// targetEpoch is the group epoch the members' targets were computed at, assignedAt
	// when (zero: not known); the group epoch runs ahead of it while the group waits
	// for its assignment interval to pass.
	targetEpoch      int32
	assignedAt       time.Time
	subscriptionHash uint64
	// initialized counts, per topic the group has assigned or AlterShareGroupOffsets
	// named, the partitions whose share state the group has initialized (see the file
	// comment): the group has share state on these topics only. nil in groups recorded
	// before it was kept, whose topics then count as met for the first time and whose
	// state may lie on any topic.
	initialized map[TopicID]int32
	members     map[string]*shareMember

	topicsVersion int64             // memory only
	initializing  map[TopicID]int32 // memory only: partition counts being initialized
}

// shareInit is a range of a topic's partitions whose share state is to be
// initialized.
type shareInit struct {
	topic    TopicID
	from, to int32
}

type shareMember struct {
	id              string
	rackID          string
	clientID        string
	clientHost      string
	subscribedNames []string
	epoch           int32
	assignment      Assignment
	target          Assignment

	sessionDeadline time.Time // memory only
}

type shareGroupValue struct {
	Epoch int32 `json:"epoch"`
	// TargetEpoch is absent in records written before Samsa kept it, when the
	// assignment was always at the group epoch.
	TargetEpoch      *int32 `json:"target_epoch,omitempty"`
	AssignedAtMs     int64  `json:"assigned_at_ms,omitempty"` // Unix milliseconds
	SubscriptionHash uint64 `json:"subscription_hash"`
	// Initialized maps topic ids (hex) to initialized partition counts.
	Initialized map[string]int32 `json:"initialized_partitions,omitempty"`
	// InitializedKept tells an empty Initialized from one recorded before Samsa kept
	// it (decoded as nil: see shareGroup.initialized).
	InitializedKept bool `json:"initialized_kept,omitempty"`
}

type shareMemberValue struct {
	RackID          string          `json:"rack_id,omitempty"`
	ClientID        string          `json:"client_id"`
	ClientHost      string          `json:"client_host"`
	SubscribedNames []string        `json:"subscribed_topic_names"`
	Epoch           int32           `json:"member_epoch"`
	Assignment      assignmentValue `json:"assignment"`
	Target          assignmentValue `json:"target"`
}

func shareKey(version int16, parts ...string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(version))
	for _, p := range parts {
		b = appendKeyString(b, p)
	}
	return b
}

func shareGroupRecord(group string, sg *shareGroup) Record {
	v := shareGroupValue{Epoch: sg.epoch, TargetEpoch: &sg.targetEpoch, AssignedAtMs: max(millis(sg.assignedAt), 0),
		SubscriptionHash: sg.subscriptionHash, InitializedKept: sg.initialized != nil}
	if len(sg.initialized) > 0 {
		v.Initialized = make(map[string]int32, len(sg.initialized))
		for id, n := range sg.initialized {
			v.Initialized[hex.EncodeToString(id[:])] = n
		}
	}
	data, _ := json.Marshal(v)
	return Record{Key: shareKey(shareGroupKeyVersion, group), Value: data}
}

func shareMemberRecord(group string, m *shareMember) Record {
	v, _ := json.Marshal(shareMemberValue{
		RackID: m.rackID, ClientID: m.clientID, ClientHost: m.clientHost, SubscribedNames: m.subscribedNames,
		Epoch: m.epoch, Assignment: encodeAssignment(m.assignment), Target: encodeAssignment(m.target),
	})
	return Record{Key: shareKey(shareMemberKeyVersion, group, m.id), Value: v}
}

// decodeShareRecord decodes a record of key version 0x5311 or 0x5312.
func decodeShareRecord(version int16, r Record) (decoded, error) {
	group, rest, err := readKeyString(r.Key[2:])
	if err != nil {
		return decoded{}, err
	}
	if version == shareGroupKeyVersion {
		d := decoded{kind: kindShareGroup, group: group}
		if r.Value != nil {
			d.shareGroup = &shareGroupValue{}
			if err := json.Unmarshal(r.Value, d.shareGroup); err != nil {
				return decoded{}, fmt.Errorf("%w: share group value: %v", ErrCorruptRecord, err)
			}
		}
		return d, nil
	}
	member, _, err := readKeyString(rest)
	if err != nil {
		return decoded{}, err
	}
	d := decoded{kind: kindShareMember, group: group, member: member}
	if r.Value != nil {
		d.shareMember = &shareMemberValue{}
		if err := json.Unmarshal(r.Value, d.shareMember); err != nil {
			return decoded{}, fmt.Errorf("%w: share member value: %v", ErrCorruptRecord, err)
		}
	}
	return d, nil
}

// replayShare applies a share group record to a partition's groups.
func replayShare(groups map[string]*group, partition int32, d decoded) error {
	g := groups[d.group]
	switch d.kind {
	case kindShareGroup:
		if d.shareGroup == nil {
			if g != nil && g.share != nil {
				g.share = nil
				if len(g.offsets) == 0 && g.consumer == nil && g.protocolType == "" {
					delete(groups, d.group)
				}
			}
			return nil
		}
		g = shareGroupOf(groups, partition, d.group)
		g.share.epoch, g.share.subscriptionHash = d.shareGroup.Epoch, d.shareGroup.SubscriptionHash
		g.share.targetEpoch, g.share.assignedAt = d.shareGroup.Epoch, time.Time{}
		if d.shareGroup.TargetEpoch != nil {
			g.share.targetEpoch = *d.shareGroup.TargetEpoch
		}
		if d.shareGroup.AssignedAtMs > 0 {
			g.share.assignedAt = time.UnixMilli(d.shareGroup.AssignedAtMs)
		}
		g.share.initialized = nil
		if d.shareGroup.InitializedKept || len(d.shareGroup.Initialized) > 0 {
			g.share.initialized = make(map[TopicID]int32, len(d.shareGroup.Initialized))
		}
		for s, n := range d.shareGroup.Initialized {
			id, err := decodeTopicID(s)
			if err != nil {
				return fmt.Errorf("share group %s: %w", d.group, err)
			}
			g.share.initialized[id] = n
		}
	case kindShareMember:
		if d.shareMember == nil {
			if g != nil && g.share != nil {
				delete(g.share.members, d.member)
			}
			return nil
		}
		g = shareGroupOf(groups, partition, d.group)
		v := d.shareMember
		m := g.share.members[d.member]
		if m == nil {
			m = &shareMember{id: d.member}
			g.share.members[d.member] = m
		}
		var err error
		if m.assignment, err = decodeAssignment(v.Assignment); err != nil {
			return err
		}
		if m.target, err = decodeAssignment(v.Target); err != nil {
			return err
		}
		m.rackID, m.clientID, m.clientHost = v.RackID, v.ClientID, v.ClientHost
		m.subscribedNames, m.epoch = v.SubscribedNames, v.Epoch
	}
	return nil
}

func shareGroupOf(groups map[string]*group, partition int32, id string) *group {
	g := groups[id]
	if g == nil {
		g = newGroup(id, partition, time.Time{})
		groups[id] = g
	}
	if g.share == nil {
		g.share = &shareGroup{members: map[string]*shareMember{}, topicsVersion: -1}
	}
	return g
}

// stateName is Kafka's share group state: Empty or Stable (a share group has no
// rebalance to wait for).
func (sg *shareGroup) stateName() string {
	if len(sg.members) == 0 {
		return "Empty"
	}
	return "Stable"
}

// successor returns a copy of the group's persisted fields over members, for a change
// to build on.
func (sg *shareGroup) successor(members map[string]*shareMember) *shareGroup {
	return &shareGroup{epoch: sg.epoch, targetEpoch: sg.targetEpoch, assignedAt: sg.assignedAt,
		subscriptionHash: sg.subscriptionHash, initialized: sg.initialized, members: members}
}

// subscriptionHashOf hashes the subscribed topics' ids and partition counts.
func (sg *shareGroup) subscriptionHashOf(members map[string]*shareMember, topics *Topics) uint64 {
	cg := &consumerGroup{members: map[string]*consumerMember{}}
	for id, m := range members {
		cg.members[id] = &consumerMember{id: id, subscribedNames: m.subscribedNames}
	}
	return cg.subscriptionHashOf(topics)
}

// initializedFor returns the group's initialized partition counts for an assignment
// of members over topics, and the partitions to initialize before they are assigned:
// a subscribed topic met for the first time counts whole; one the group knows counts
// what it had, and the partitions it gained since are to be initialized unless that is
// under way. Topics that no longer exist are dropped. With initialize false (no
// Options.InitShareState) every subscribed topic counts whole.
func (sg *shareGroup) initializedFor(members map[string]*shareMember, topics *Topics, initialize bool) (map[TopicID]int32, []shareInit) {
	out := map[TopicID]int32{}
	for id, n := range sg.initialized {
		if _, ok := topics.ByID[id]; ok {
			out[id] = n
		}
	}
	subscribed := map[string]bool{}
	for _, m := range members {
		for _, name := range m.subscribedNames {
			subscribed[name] = true
		}
	}
	var pending []shareInit
	for _, name := range slices.Sorted(maps.Keys(subscribed)) {
		t, ok := topics.ByName[name]
		if !ok {
			continue
		}
		n, known := out[t.ID]
		switch {
		case !known || !initialize:
			out[t.ID] = t.Partitions
		case n < t.Partitions && sg.initializing[t.ID] < t.Partitions:
			pending = append(pending, shareInit{topic: t.ID, from: n, to: t.Partitions})
		}
	}
	return out, pending
}

// assignShare is the simple assignor (see the file comment), over the first
// counts[topic] partitions of each topic counts names (all of the others).
func assignShare(members map[string]*shareMember, topics *Topics, counts map[TopicID]int32) map[string]Assignment {
	ids := slices.Sorted(maps.Keys(members))
	out := map[string]Assignment{}
	for _, id := range ids {
		out[id] = Assignment{}
	}
	for _, name := range topics.Names {
		var subs []string
		for _, id := range ids {
			if slices.Contains(members[id].subscribedNames, name) {
				subs = append(subs, id)
			}
		}
		if len(subs) == 0 {
			continue
		}
		t := topics.ByName[name]
		parts := t.Partitions
		if n, ok := counts[t.ID]; ok {
			parts = min(parts, n)
		}
		for p := range parts {
			out[subs[int(p)%len(subs)]].add(t.ID, p)
		}
		if parts > 0 {
			for j := int(parts); j < len(subs); j++ {
				out[subs[j]].add(t.ID, int32(j%int(parts)))
			}
		}
	}
	return out
}

// ShareGroupHeartbeat handles a ShareGroupHeartbeat request (v1): join (epoch 0),
// heartbeat, leave (-1). The channel receives exactly one response, once the records
// are committed.
func (c *Coordinator) ShareGroupHeartbeat(req *kmsg.ShareGroupHeartbeatRequest, clientID, clientHost string) <-chan *kmsg.ShareGroupHeartbeatResponse {
	ch := make(chan *kmsg.ShareGroupHeartbeatResponse, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	part, records, after, code, msg := c.shareHeartbeatLocked(req, resp, clientID, clientHost, now)
	if code != kerrNone {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		ch <- resp
		return ch
	}
	c.writeConsumerLocked(part, req.GroupID, records, func(err error) {
		if err != nil {
			out := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
			out.ErrorCode = appendErrorCode(err)
			ch <- out
			return
		}
		ch <- resp
	})
	if after != nil {
		after()
	}
	if g := part.groups[req.GroupID]; g != nil {
		c.settleGroupLocked(part, g)
	}
	return ch
}

func (c *Coordinator) shareHeartbeatLocked(req *kmsg.ShareGroupHeartbeatRequest, resp *kmsg.ShareGroupHeartbeatResponse, clientID, clientHost string, now time.Time) (*partition, []Record, func(), int16, string) {
	fail := func(code int16, msg string) (*partition, []Record, func(), int16, string) {
		return nil, nil, nil, code, msg
	}
	switch {
	case req.GroupID == "":
		return fail(kerrInvalidRequest, "GroupId can't be empty.")
	case req.MemberID == "":
		return fail(kerrInvalidRequest, "MemberId can't be empty.")
	case req.MemberEpoch < leaveEpoch:
		return fail(kerrInvalidRequest, "MemberEpoch is invalid.")
	case req.MemberEpoch == 0 && len(req.SubscribedTopicNames) == 0:
		return fail(kerrInvalidRequest, "SubscribedTopicNames must be set in first request.")
	case req.RackID != nil && *req.RackID == "":
		return fail(kerrInvalidRequest, "RackId can't be empty.")
	}
	part, code := c.partitionOfLocked(req.GroupID)
	if code != kerrNone {
		return fail(code, "")
	}
	g := part.groups[req.GroupID]
	if g != nil && g.state == StateDead {
		// Deleted, its tombstones not yet written: the retry finds it gone.
		return fail(kerrCoordinatorNotAvailable, "")
	}
	if g != nil && g.share == nil {
		return fail(kerrGroupIDNotFound, "Group "+req.GroupID+" is not a share group.")
	}
	var sg *shareGroup
	if g != nil {
		sg = g.share
	}
	id := req.MemberID
	resp.MemberID = &id
	if req.MemberEpoch == leaveEpoch {
		if sg == nil || sg.members[id] == nil {
			return fail(kerrUnknownMemberID, "")
		}
		resp.MemberEpoch = leaveEpoch
		c.logger.Info("share group member left", "group", req.GroupID, "member", id)
		return part, c.shareMemberGoneRecords(req.GroupID, sg, id), nil, kerrNone, ""
	}
	if sg == nil {
		if req.MemberEpoch != 0 {
			return fail(kerrUnknownMemberID, "")
		}
		sg = &shareGroup{members: map[string]*shareMember{}, topicsVersion: -1}
	}
	old := sg.members[id]
	var m *shareMember
	switch {
	case old == nil && req.MemberEpoch != 0:
		return fail(kerrUnknownMemberID, "")
	case old == nil:
		if int32(len(sg.members)) >= c.cfg.ShareMaxSize {
			return fail(kerrGroupMaxSizeReached, "")
		}
		m = &shareMember{id: id, assignment: Assignment{}, target: Assignment{}}
	default:
		if req.MemberEpoch != 0 && req.MemberEpoch != old.epoch {
			return fail(kerrFencedMemberEpoch, "")
		}
		m = &shareMember{}
		*m = *old
		m.assignment, m.target = old.assignment.clone(), old.target.clone()
	}
	before := *m
	m.clientID, m.clientHost = clientID, clientHost
	if req.RackID != nil {
		m.rackID = *req.RackID
	}
	changed := old == nil
	if req.SubscribedTopicNames != nil {
		names := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(names)
		names = slices.Compact(names)
		if !slices.Equal(names, m.subscribedNames) {
			m.subscribedNames, changed = names, true
		}
	}
	members := maps.Clone(sg.members)
	members[id] = m
	topics := c.currentTopics()
	next := sg.successor(members)
	var pending []shareInit
	if changed || topics.Version != sg.topicsVersion {
		next.subscriptionHash = next.subscriptionHashOf(members, topics)
		if changed || next.subscriptionHash != sg.subscriptionHash {
			next.epoch++
		}
		initialized, inits := sg.initializedFor(members, topics, c.initShare != nil)
		if next.epoch != sg.epoch {
			next.initialized = initialized
		}
		pending = inits
	}
	timeouts := c.groupTimeouts(req.GroupID)
	var others []Record
	assignIn := assignmentDueIn(sg.assignedAt, *timeouts.ShareAssignment, now)
	if next.epoch > next.targetEpoch && assignIn == 0 {
		m.target, others = shareTargetRecords(req.GroupID, members, topics, next.initialized, id)
		next.targetEpoch, next.assignedAt = next.epoch, now
		c.logger.Info("share group assignment computed", "group", req.GroupID, "epoch", next.epoch, "members", len(members))
	}
	if next.epoch == next.targetEpoch {
		assignIn = 0
	}
	var records []Record
	if g == nil || next.epoch != sg.epoch || next.targetEpoch != sg.targetEpoch {
		records = append(records, shareGroupRecord(req.GroupID, next))
	}
	records = append(records, others...)
	m.epoch = next.targetEpoch
	m.assignment = m.target.clone()
	if old == nil || !shareMemberEqual(&before, m) {
		records = append(records, shareMemberRecord(req.GroupID, m))
	}
	resp.MemberEpoch = m.epoch
	resp.HeartbeatIntervalMillis = int32(timeouts.ShareHeartbeat.Milliseconds())
	if assignIn > 0 {
		// The group waits for its next assignment: the member is asked back when it is
		// due (Kafka keeps the heartbeat interval).
		resp.HeartbeatIntervalMillis = min(resp.HeartbeatIntervalMillis, heartbeatMillis(assignIn))
	}
	if req.MemberEpoch == 0 || !before.assignment.equal(m.assignment) {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		a.TopicPartitions = []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}
		for _, t := range sortedTopicIDs(m.assignment) {
			a.TopicPartitions = append(a.TopicPartitions, kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{TopicID: t, Partitions: slices.Clone(m.assignment[t])})
		}
		resp.Assignment = &a
	}
	version := topics.Version
	after := func() {
		if g := part.groups[req.GroupID]; g != nil && g.share != nil {
			g.share.topicsVersion = version
			if live := g.share.members[id]; live != nil {
				live.sessionDeadline = now.Add(timeouts.ShareSession)
			}
			c.startShareInitsLocked(req.GroupID, g.share, pending, topics)
		}
	}
	return part, records, after, kerrNone, ""
}

// shareTargetRecords runs the assignor over members: it returns self's new target
// and the records of the other members whose target changed (they take it at their
// next heartbeat).
func shareTargetRecords(groupID string, members map[string]*shareMember, topics *Topics, counts map[TopicID]int32, self string) (Assignment, []Record) {
	targets := assignShare(members, topics, counts)
	var records []Record
	for _, mid := range slices.Sorted(maps.Keys(targets)) {
		if mid == self || members[mid].target.equal(targets[mid]) {
			continue
		}
		u := *members[mid]
		u.target = targets[mid]
		records = append(records, shareMemberRecord(groupID, &u))
	}
	return targets[self], records
}

// shareMemberGoneRecords are the records of a member leaving the group (or its
// session expiring): its tombstone and the next group epoch, whose assignment the next
// heartbeat of a member that stays computes, so that the partitions it had go to them.
func (c *Coordinator) shareMemberGoneRecords(groupID string, sg *shareGroup, id string) []Record {
	next := sg.successor(maps.Clone(sg.members))
	delete(next.members, id)
	next.epoch++
	next.subscriptionHash = next.subscriptionHashOf(next.members, c.currentTopics())
	return []Record{{Key: shareKey(shareMemberKeyVersion, groupID, id)}, shareGroupRecord(groupID, next)}
}

// startShareInitsLocked initializes the share state of a group's pending partitions
// in the background (Options.InitShareState); shareInitDone then takes them into the
// group's assignment.
func (c *Coordinator) startShareInitsLocked(groupID string, sg *shareGroup, pending []shareInit, topics *Topics) {
	for _, p := range pending {
		if sg.initializing == nil {
			sg.initializing = map[TopicID]int32{}
		}
		sg.initializing[p.topic] = p.to
		c.logger.Info("initializing the share state of new partitions at offset 0", "group", groupID,
			"topic", topics.ByID[p.topic], "partitions", fmt.Sprintf("%d-%d", p.from, p.to-1))
		c.wg.Go(func() {
			c.shareInitDone(groupID, p, c.initShare(c.ctx, groupID, p.topic, p.from, p.to))
		})
	}
}

// shareInitDone records that a group's partitions were initialized (or failed to be,
// to be tried again at the next heartbeat): the group epoch moves and the partitions
// join the members' targets.
func (c *Coordinator) shareInitDone(groupID string, p shareInit, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return
	}
	part, code := c.partitionOfLocked(groupID)
	if code != kerrNone {
		return
	}
	g := part.groups[groupID]
	if g == nil || g.share == nil || g.state == StateDead {
		return
	}
	sg := g.share
	if sg.initializing[p.topic] == p.to {
		delete(sg.initializing, p.topic)
	}
	topics := c.currentTopics()
	if err != nil {
		c.logger.Warn("initializing the share state of new partitions failed; trying again at the next heartbeat",
			"group", groupID, "topic", topics.ByID[p.topic], "partitions", fmt.Sprintf("%d-%d", p.from, p.to-1), "err", err)
		sg.topicsVersion = -1
		return
	}
	if n, ok := sg.initialized[p.topic]; !ok || n >= p.to {
		return
	}
	// The next group epoch: the next heartbeat assigns the partitions.
	next := sg.successor(sg.members)
	next.epoch++
	next.initialized = maps.Clone(sg.initialized)
	next.initialized[p.topic] = p.to
	c.writeConsumerLocked(part, groupID, []Record{shareGroupRecord(groupID, next)}, func(error) {})
}

// ForgetShareTopics drops topics from an empty share group's initialized partitions
// once DeleteShareGroupOffsets has deleted their state, so that the group meets them
// as new topics if it subscribes to them again. The channel receives 0 or an error
// code.
func (c *Coordinator) ForgetShareTopics(groupID string, ids []TopicID) <-chan int16 {
	return c.forgetShareTopics(groupID, ids, true)
}

// ForgetDeletedShareTopics drops deleted topics from a share group's topics (those
// initialized and those being initialized), whether it has members or not, once their
// share state was deleted: Kafka's group coordinator does so when partitions are
// deleted (onPartitionsDeleted). The channel receives 0 or an error code.
func (c *Coordinator) ForgetDeletedShareTopics(groupID string, ids []TopicID) <-chan int16 {
	return c.forgetShareTopics(groupID, ids, false)
}

func (c *Coordinator) forgetShareTopics(groupID string, ids []TopicID, onlyEmpty bool) <-chan int16 {
	ch := make(chan int16, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	part, code := c.partitionOfLocked(groupID)
	if code != kerrNone {
		ch <- code
		return ch
	}
	g := part.groups[groupID]
	if g == nil || g.share == nil || g.state == StateDead || (onlyEmpty && len(g.share.members) > 0) {
		ch <- kerrNone // nothing to forget; a group being deleted forgets everything
		return ch
	}
	sg := g.share
	initialized := maps.Clone(sg.initialized)
	for _, id := range ids {
		delete(initialized, id)
		if !onlyEmpty {
			delete(sg.initializing, id)
		}
	}
	if len(initialized) == len(sg.initialized) {
		ch <- kerrNone
		return ch
	}
	next := sg.successor(sg.members)
	next.initialized = initialized
	c.writeConsumerLocked(part, groupID, []Record{shareGroupRecord(groupID, next)}, func(err error) {
		if err != nil {
			ch <- appendErrorCode(err)
			return
		}
		ch <- kerrNone
	})
	return ch
}

// ShareGroupsOnTopics returns the share groups this node coordinates that may hold
// share state on any of the deleted topics (names by id), each with those it may hold
// state on: those among its topics (all of them for a group recorded before its
// topics were kept), and those a member subscribes to or is assigned, as a member's
// heartbeat drops a deleted topic from the group's topics as soon as it sees it gone,
// possibly before its state is deleted. A partition still loading is left out.
func (c *Coordinator) ShareGroupsOnTopics(deleted map[TopicID]string) map[string][]TopicID {
	if len(deleted) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out map[string][]TopicID
	for _, part := range c.mu.partitions {
		if part.loading {
			continue
		}
		for id, g := range part.groups {
			if g.share == nil || g.state == StateDead {
				continue
			}
			held, all := g.share.stateTopics()
			var on []TopicID
			for t, name := range deleted {
				if all || slices.Contains(held, t) || g.share.memberOn(t, name) {
					on = append(on, t)
				}
			}
			if len(on) > 0 {
				if out == nil {
					out = map[string][]TopicID{}
				}
				out[id] = on
			}
		}
	}
	return out
}

// memberOn reports whether a member subscribes to the topic name or is assigned
// (or targeted) partitions of the topic id.
func (sg *shareGroup) memberOn(id TopicID, name string) bool {
	for _, m := range sg.members {
		if slices.Contains(m.subscribedNames, name) || len(m.assignment[id]) > 0 || len(m.target[id]) > 0 {
			return true
		}
	}
	return false
}

func shareMemberEqual(a, b *shareMember) bool {
	return a.rackID == b.rackID && a.clientID == b.clientID && a.clientHost == b.clientHost &&
		slices.Equal(a.subscribedNames, b.subscribedNames) && a.epoch == b.epoch &&
		a.assignment.equal(b.assignment) && a.target.equal(b.target)
}

// ShareGroupDescribe handles a ShareGroupDescribe request (v1). The answer is sent
// once what it shows is committed (committedRead).
func (c *Coordinator) ShareGroupDescribe(req *kmsg.ShareGroupDescribeRequest) <-chan *kmsg.ShareGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	resp.Groups = make([]kmsg.ShareGroupDescribeResponseGroup, len(req.GroupIDs))
	ch := make(chan *kmsg.ShareGroupDescribeResponse, 1)
	describeCommitted(c, req.GroupIDs, resp.Groups,
		func(id string) kmsg.ShareGroupDescribeResponseGroup { return c.describeShareGroupLocked(req, id) },
		func(id, msg string) kmsg.ShareGroupDescribeResponseGroup {
			out := kmsg.NewShareGroupDescribeResponseGroup()
			out.GroupID, out.ErrorCode, out.ErrorMessage = id, kerrNotCoordinator, &msg
			return out
		},
		func() { ch <- resp })
	return ch
}

// describeShareGroupLocked answers ShareGroupDescribe for one group.
func (c *Coordinator) describeShareGroupLocked(req *kmsg.ShareGroupDescribeRequest, id string) kmsg.ShareGroupDescribeResponseGroup {
	out := kmsg.NewShareGroupDescribeResponseGroup()
	out.GroupID = id
	if req.IncludeAuthorizedOperations {
		out.AuthorizedOperations = groupAuthorizedOperations
	}
	g, code, msg := c.groupOfTypeLocked(id, "share")
	if code != kerrNone {
		out.ErrorCode, out.ErrorMessage = code, msg
		return out
	}
	topics := c.currentTopics()
	sg := g.share
	out.GroupState = sg.stateName()
	out.GroupEpoch, out.AssignmentEpoch, out.Assignor = sg.epoch, sg.targetEpoch, shareAssignorName
	for _, mid := range slices.Sorted(maps.Keys(sg.members)) {
		m := sg.members[mid]
		dm := kmsg.NewShareGroupDescribeResponseGroupMember()
		dm.MemberID, dm.MemberEpoch, dm.ClientID, dm.ClientHost = m.id, m.epoch, m.clientID, m.clientHost
		if m.rackID != "" {
			dm.RackID = strPtr(m.rackID)
		}
		dm.SubscribedTopicNames = append([]string{}, m.subscribedNames...)
		for _, t := range sortedTopicIDs(m.assignment) {
			dm.Assignment.TopicPartitions = append(dm.Assignment.TopicPartitions, kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{
				TopicID: t, Topic: topics.ByID[t], Partitions: slices.Clone(m.assignment[t]),
			})
		}
		out.Members = append(out.Members, dm)
	}
	return out
}

// expireShareMembersLocked removes share members whose session expired.
func (c *Coordinator) expireShareMembersLocked(part *partition, g *group, now time.Time) {
	if g.share == nil {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(g.share.members)) {
		m := g.share.members[id]
		if m == nil || !due(m.sessionDeadline, now) {
			continue
		}
		m.sessionDeadline = time.Time{}
		c.logger.Info("share group member expired", "group", g.id, "member", id)
		c.writeConsumerLocked(part, g.id, c.shareMemberGoneRecords(g.id, g.share, id), func(error) {})
		if part.groups[g.id] == nil || part.groups[g.id].share == nil {
			return
		}
	}
}

// shareNextDeadline is the earliest session deadline of the group's share members.
func (g *group) shareNextDeadline() time.Time {
	var next time.Time
	if g.share != nil {
		for _, m := range g.share.members {
			next = earliest(next, m.sessionDeadline)
		}
	}
	return next
}

// ShareStateTopics reports whether group is a share group and, if so, the topics it
// may hold share state on: those it has assigned and those AlterShareGroupOffsets
// named (Kafka's initialized partitions). all is true for a group recorded before
// Samsa kept them, whose state may lie on any topic.
func (c *Coordinator) ShareStateTopics(group string) (code int16, exists bool, ids []TopicID, all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	part, code := c.partitionOfLocked(group)
	if code != kerrNone {
		return code, false, nil, false
	}
	g := part.groups[group]
	if g == nil || g.share == nil || g.state == StateDead {
		return kerrNone, false, nil, false
	}
	ids, all = g.share.stateTopics()
	return kerrNone, true, ids, all
}

// stateTopics are the topics the group may hold share state on: those initialized
// and those being initialized; all for a group recorded before Samsa kept them.
func (sg *shareGroup) stateTopics() (ids []TopicID, all bool) {
	ids = slices.Collect(maps.Keys(sg.initialized))
	for id := range sg.initializing {
		if _, ok := sg.initialized[id]; !ok {
			ids = append(ids, id)
		}
	}
	return ids, sg.initialized == nil
}

// ShareGroupEmpty reports whether a share group exists and has no members.
func (c *Coordinator) ShareGroupEmpty(group string) (code int16, exists, empty bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	part, code := c.partitionOfLocked(group)
	if code != kerrNone {
		return code, false, false
	}
	g := part.groups[group]
	if g != nil && g.state == StateDead {
		return kerrCoordinatorNotAvailable, false, false // being deleted: the retry finds it gone
	}
	if g == nil || g.share == nil {
		return kerrNone, false, false
	}
	return kerrNone, true, len(g.share.members) == 0
}

// EnsureShareGroup creates group as an empty share group if it does not exist (Kafka's
// AlterShareGroupOffsets may name a group nobody joined yet), and adds to the topics
// it may hold share state on those of topics (partition counts by id) it does not
// have yet, before their state is written. The channel receives 0, or the
// coordinator error, GROUP_ID_NOT_FOUND for a group of another type, or
// NON_EMPTY_GROUP for a share group with members.
func (c *Coordinator) EnsureShareGroup(group string, topics map[TopicID]int32) <-chan int16 {
	ch := make(chan int16, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	part, code := c.partitionOfLocked(group)
	if code != kerrNone {
		ch <- code
		return ch
	}
	g := part.groups[group]
	var next *shareGroup
	switch {
	case g == nil:
		next = &shareGroup{initialized: maps.Clone(topics), members: map[string]*shareMember{}}
		if next.initialized == nil {
			next.initialized = map[TopicID]int32{}
		}
	case g.state == StateDead: // being deleted: the retry finds it gone
		ch <- kerrCoordinatorNotAvailable
		return ch
	case g.share == nil:
		ch <- kerrGroupIDNotFound
		return ch
	case len(g.share.members) > 0:
		ch <- kerrNonEmptyGroup
		return ch
	default:
		sg := g.share
		for id, n := range topics {
			if _, ok := sg.initialized[id]; ok || sg.initialized == nil {
				continue
			}
			if next == nil {
				next = sg.successor(sg.members)
				next.initialized = maps.Clone(sg.initialized)
			}
			next.initialized[id] = n
		}
		if next == nil {
			ch <- kerrNone
			return ch
		}
	}
	c.writeConsumerLocked(part, group, []Record{shareGroupRecord(group, next)}, func(err error) {
		if err != nil {
			ch <- appendErrorCode(err)
			return
		}
		ch <- kerrNone
	})
	return ch
}
