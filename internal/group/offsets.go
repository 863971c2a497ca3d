package group

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit handles an OffsetCommit request (v0–v9). The channel receives exactly
// one response, once the offsets are committed to __consumer_offsets (or at once on
// error). A commit with generation -1 and no member id into a group without members
// is a "simple consumer" commit and creates the group if needed.
func (c *Coordinator) OffsetCommit(req *kmsg.OffsetCommitRequest) <-chan *kmsg.OffsetCommitResponse {
	ch := make(chan *kmsg.OffsetCommitResponse, 1)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.commitLocked(req, resp, ch, c.clock.Now())
	c.settleLocked(req.Group)
	return ch
}

func setAllCommitErrors(resp *kmsg.OffsetCommitResponse, code int16) {
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			resp.Topics[i].Partitions[j].ErrorCode = code
		}
	}
}

func (c *Coordinator) commitLocked(req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, ch chan *kmsg.OffsetCommitResponse, now time.Time) {
	fail := func(code int16) {
		setAllCommitErrors(resp, code)
		ch <- resp
	}
	part, code := c.partitionOfLocked(req.Group)
	if code != kerrNone {
		fail(code)
		return
	}
	generation, memberID, instanceID := req.Generation, req.MemberID, req.InstanceID
	if req.Version == 0 {
		generation, memberID, instanceID = -1, "", nil
	}
	g := part.groups[req.Group]
	if g == nil {
		if generation >= 0 {
			// Kafka answers GROUP_ID_NOT_FOUND from v9, ILLEGAL_GENERATION before.
			if req.Version >= 9 {
				fail(kerrGroupIDNotFound)
			} else {
				fail(kerrIllegalGeneration)
			}
			return
		}
		g = newGroup(req.Group, part.id, now)
		part.groups[req.Group] = g
	}
	cleanup := func() {
		if g.useless() && part.groups[g.id] == g {
			delete(part.groups, g.id)
		}
	}
	if g.share != nil {
		cleanup()
		fail(kerrGroupIDNotFound)
		return
	}
	var check *assignmentEpochCheck
	if g.consumer != nil {
		code, check = validateConsumerCommit(g, memberID, generation, req.Version, false)
	} else {
		code = validateCommit(g, memberID, instanceID, generation)
	}
	if code != kerrNone {
		cleanup()
		// Refused from memory, which may hold writes not committed yet (a member's
		// removal when its session expired): as Kafka answers a write without records,
		// the answer waits for them, and is their retriable error when one fails.
		c.answerAfterQueuedWritesLocked(req.Group, code, fail)
		return
	}
	if m := g.members[memberID]; m != nil {
		m.heartbeatDeadline = now.Add(m.sessionTimeout)
	}
	var expire time.Time
	if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis >= 0 {
		expire = now.Add(time.Duration(req.RetentionTimeMillis) * time.Millisecond)
	}
	type commit struct {
		ti, pi int
		tp     TopicPartition
		o      CommittedOffset
	}
	var commits []commit
	var records []Record
	for ti, t := range req.Topics {
		for pi, p := range t.Partitions {
			rp := &resp.Topics[ti].Partitions[pi]
			meta := ""
			if p.Metadata != nil {
				meta = *p.Metadata
			}
			switch {
			case c.topicExists != nil && !c.topicExists(t.Topic, p.Partition):
				rp.ErrorCode = kerrUnknownTopicOrPartition
			case len(meta) > c.cfg.MaxMetadataSize:
				rp.ErrorCode = kerrOffsetMetadataTooLarge
			default:
				leaderEpoch := p.LeaderEpoch
				if req.Version < 6 {
					leaderEpoch = -1
				}
				cm := commit{ti: ti, pi: pi, tp: TopicPartition{Topic: t.Topic, Partition: p.Partition},
					o: CommittedOffset{Offset: p.Offset, LeaderEpoch: leaderEpoch, Metadata: meta,
						CommitTime: time.UnixMilli(now.UnixMilli()), ExpireTime: expire}}
				commits = append(commits, cm)
				records = append(records, offsetRecord(g.id, cm.tp, cm.o))
			}
		}
	}
	tps := make([]TopicPartition, len(commits))
	for i, cm := range commits {
		tps[i] = cm.tp
	}
	if check != nil {
		if code := check.refuses(c.currentTopics(), tps); code != kerrNone {
			// As in Kafka, the whole request fails: every partition that reached the
			// validation (an unknown one keeps its error) answers the code.
			cleanup()
			c.answerAfterQueuedWritesLocked(req.Group, code, func(code int16) {
				for i := range resp.Topics {
					for j := range resp.Topics[i].Partitions {
						if rp := &resp.Topics[i].Partitions[j]; rp.ErrorCode != kerrUnknownTopicOrPartition {
							rp.ErrorCode = code
						}
					}
				}
				ch <- resp
			})
			return
		}
	}
	if len(records) == 0 {
		cleanup()
		ch <- resp
		return
	}
	groupID := g.id
	c.appendCommitsLocked(part, g, tps, records, func(err error) {
		if err != nil {
			code := appendErrorCode(err)
			for _, cm := range commits {
				resp.Topics[cm.ti].Partitions[cm.pi].ErrorCode = code
			}
			if c.mu.partitions[part.id] == part {
				cleanup()
			}
		} else {
			for _, cm := range commits {
				o := cm.o
				replayOffset(part.groups, part.id, groupID, cm.tp, &o)
			}
		}
		ch <- resp
	})
}

// appendCommitsLocked hands the records of offset commits of g's partitions tps to
// the partition's writer, counted in g.queued until their replay.
func (c *Coordinator) appendCommitsLocked(part *partition, g *group, tps []TopicPartition, records []Record, replay func(err error)) {
	g.queue(tps)
	c.appendLocked(part, nil, records, func(err error) {
		g.unqueue(tps)
		replay(err)
	})
}

// queue counts commits of tps handed to the partition's writer; unqueue, in their
// replay, uncounts them.
func (g *group) queue(tps []TopicPartition) {
	if g.queued == nil {
		g.queued = map[TopicPartition]int{}
	}
	for _, tp := range tps {
		g.queued[tp]++
	}
}

func (g *group) unqueue(tps []TopicPartition) {
	for _, tp := range tps {
		if g.queued[tp]--; g.queued[tp] <= 0 {
			delete(g.queued, tp)
		}
	}
}

// validateCommit is Kafka's check of who may commit into a group.
func validateCommit(g *group, memberID string, instanceID *string, generation int32) int16 {
	if g.state == StateDead {
		return kerrCoordinatorNotAvailable
	}
	if generation < 0 && g.state == StateEmpty {
		// A commit from outside the group (the admin client, or a consumer that
		// assigns its partitions itself, whatever member or instance id it names).
		return kerrNone
	}
	if generation >= 0 || memberID != "" || instanceID != nil {
		if code := g.validateMember(memberID, instanceID); code != kerrNone {
			return code
		}
		if generation != g.generation {
			return kerrIllegalGeneration
		}
	} else if g.state != StateEmpty {
		// The group is managed by the coordinator: a commit from outside is refused.
		return kerrUnknownMemberID
	}
	if g.state == StateCompletingRebalance {
		return kerrRebalanceInProgress
	}
	return kerrNone
}

// validateConsumerCommit is Kafka's check of a commit into a consumer group
// (ConsumerGroup.validateOffsetCommit, Kafka 4.3): a commit from outside the group
// (no member, epoch -1) only while it has no members; a member's commit with
// OffsetCommit v9 or later (a transactional one, or a classic member's, with any
// version), at its member epoch, or at an older epoch for the partitions it has owned
// since then (KIP-1251). For an older epoch the check of the partitions is returned:
// every partition of the request must pass it. A newer epoch than the member's is
// refused. The code is STALE_MEMBER_EPOCH for a consumer-protocol member,
// ILLEGAL_GENERATION for a classic one and for a transactional commit before
// TxnOffsetCommit v6 (version is the request's, of either API).
func validateConsumerCommit(g *group, memberID string, epoch int32, version int16, transactional bool) (int16, *assignmentEpochCheck) {
	cg := g.consumer
	if g.state == StateDead { // being deleted
		return kerrCoordinatorNotAvailable, nil
	}
	if epoch < 0 && memberID == "" && len(cg.members) == 0 {
		return kerrNone, nil
	}
	m := cg.members[memberID]
	if m == nil {
		return kerrUnknownMemberID, nil
	}
	stale := kerrStaleMemberEpoch
	if m.classic != nil || transactional && version < 6 { // TxnOffsetCommit v6: KIP-1319
		stale = kerrIllegalGeneration
	}
	switch {
	case m.classic == nil && !transactional && version < 9:
		return kerrUnsupportedVersion, nil
	case epoch == m.epoch:
		return kerrNone, nil
	case epoch > m.epoch:
		return stale, nil
	}
	return kerrNone, &assignmentEpochCheck{m: m, epoch: epoch, code: stale}
}

// assignmentEpochCheck is KIP-1251's check of a commit at an epoch older than its
// member's (Kafka's ConsumerGroup.createAssignmentEpochValidator): the member must
// own each partition (assigned or pending revocation), assigned to it at that epoch
// or before.
type assignmentEpochCheck struct {
	m     *consumerMember
	epoch int32
	code  int16 // what a partition that fails answers
}

// refuses returns the check's code if a partition of tps fails it, kerrNone if all
// pass. A partition is known by its topic's current id, as Kafka resolves it by name.
func (ck *assignmentEpochCheck) refuses(topics *Topics, tps []TopicPartition) int16 {
	for _, tp := range tps {
		info, ok := topics.ByName[tp.Topic]
		if !ok {
			return ck.code
		}
		if e, ok := ck.m.assignmentEpoch(info.ID, tp.Partition); !ok || ck.epoch < e {
			return ck.code
		}
	}
	return kerrNone
}

// fetchedPartition is one answer of OffsetFetch.
type fetchedPartition struct {
	partition int32
	offset    CommittedOffset
	found     bool
	// unstable: stable offsets were asked for and a transaction not decided yet
	// committed one (UNSTABLE_OFFSET_COMMIT).
	unstable bool
}

type fetchedTopic struct {
	topic      string
	partitions []fetchedPartition
}

type requestedTopic struct {
	topic      string
	partitions []int32
}

// OffsetFetch handles an OffsetFetch request (v0–v9; v8+ asks for several groups).
// A partition without a committed offset answers offset -1.
func (c *Coordinator) OffsetFetch(req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			resp.Groups = append(resp.Groups, c.fetchGroupOffsets(req, rg))
		}
		return resp
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var want []requestedTopic
	if req.Topics != nil || req.Version < 2 {
		want = []requestedTopic{}
		for _, t := range req.Topics {
			want = append(want, requestedTopic{topic: t.Topic, partitions: t.Partitions})
		}
	}
	code, topics := c.fetchOffsetsLocked(req.Group, want, req.Version >= 7 && req.RequireStable)
	if code != kerrNone {
		if req.Version >= 2 {
			resp.ErrorCode = code
			return resp
		}
		// v0–v1 have no top-level error: report it on every partition asked for.
		topics = nil
		for _, t := range want {
			ft := fetchedTopic{topic: t.topic}
			for _, p := range t.partitions {
				ft.partitions = append(ft.partitions, fetchedPartition{partition: p})
			}
			topics = append(topics, ft)
		}
	}
	for _, t := range topics {
		ot := kmsg.NewOffsetFetchResponseTopic()
		ot.Topic = t.topic
		for _, p := range t.partitions {
			op := kmsg.NewOffsetFetchResponseTopicPartition()
			op.Partition = p.partition
			op.Offset, op.LeaderEpoch, op.Metadata = fetchedFields(p)
			op.ErrorCode = code
			if p.unstable {
				op.ErrorCode = kerrUnstableOffsetCommit
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp
}

// fetchGroupOffsets answers OffsetFetch v8+ for one group, under the lock for that
// group alone.
func (c *Coordinator) fetchGroupOffsets(req *kmsg.OffsetFetchRequest, rg kmsg.OffsetFetchRequestGroup) kmsg.OffsetFetchResponseGroup {
	c.mu.Lock()
	defer c.mu.Unlock()
	var want []requestedTopic
	if rg.Topics != nil {
		want = []requestedTopic{}
		for _, t := range rg.Topics {
			want = append(want, requestedTopic{topic: t.Topic, partitions: t.Partitions})
		}
	}
	code, topics := c.fetchOffsetsLocked(rg.Group, want, req.RequireStable)
	if code == kerrNone && req.Version >= 9 {
		code = c.validateConsumerFetchLocked(rg.Group, rg.MemberID, rg.MemberEpoch)
		if code != kerrNone {
			topics = nil
		}
	}
	out := kmsg.NewOffsetFetchResponseGroup()
	out.Group = rg.Group
	out.ErrorCode = code
	for _, t := range topics {
		ot := kmsg.NewOffsetFetchResponseGroupTopic()
		ot.Topic = t.topic
		for _, p := range t.partitions {
			op := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			op.Partition = p.partition
			op.Offset, op.LeaderEpoch, op.Metadata = fetchedFields(p)
			if p.unstable {
				op.ErrorCode = kerrUnstableOffsetCommit
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		out.Topics = append(out.Topics, ot)
	}
	return out
}

// validateConsumerFetchLocked is Kafka's check of an OffsetFetch (v9+) naming a member
// of a consumer group: the member must exist, at the epoch given. Kafka 4.3 keeps this
// exact check (ConsumerGroup.validateOffsetFetch): KIP-1251 relaxes commits only.
func (c *Coordinator) validateConsumerFetchLocked(groupID string, memberID *string, epoch int32) int16 {
	part, code := c.partitionOfLocked(groupID)
	if code != kerrNone || memberID == nil || *memberID == "" && epoch < 0 {
		return kerrNone
	}
	g := part.groups[groupID]
	if g == nil || g.consumer == nil {
		return kerrNone
	}
	m := g.consumer.members[*memberID]
	switch {
	case m == nil:
		return kerrUnknownMemberID
	case epoch != m.epoch:
		return kerrStaleMemberEpoch
	}
	return kerrNone
}

func fetchedFields(p fetchedPartition) (int64, int32, *string) {
	if !p.found || p.unstable {
		return -1, -1, strPtr("")
	}
	return p.offset.Offset, p.offset.LeaderEpoch, strPtr(p.offset.Metadata)
}

// fetchOffsetsLocked answers one group's offsets; want == nil asks for all of them.
// With requireStable (OffsetFetch v7+, KIP-447) a partition with an offset committed
// in a transaction not decided yet is marked unstable.
func (c *Coordinator) fetchOffsetsLocked(groupID string, want []requestedTopic, requireStable bool) (int16, []fetchedTopic) {
	part, code := c.partitionOfLocked(groupID)
	if code != kerrNone {
		return code, nil
	}
	var offsets map[TopicPartition]CommittedOffset
	g := part.groups[groupID]
	if g != nil && g.state != StateDead {
		offsets = g.offsets
	}
	var out []fetchedTopic
	if want == nil {
		out = allOffsets(offsets)
	} else {
		out = make([]fetchedTopic, 0, len(want))
		for _, t := range want {
			ft := fetchedTopic{topic: t.topic}
			for _, p := range t.partitions {
				o, ok := offsets[TopicPartition{Topic: t.topic, Partition: p}]
				ft.partitions = append(ft.partitions, fetchedPartition{partition: p, offset: o, found: ok})
			}
			out = append(out, ft)
		}
	}
	if requireStable && g != nil && len(g.txnOffsets) > 0 {
		for i := range out {
			for j := range out[i].partitions {
				p := &out[i].partitions[j]
				p.unstable = g.unstable(TopicPartition{Topic: out[i].topic, Partition: p.partition})
			}
		}
	}
	return kerrNone, out
}

func allOffsets(offsets map[TopicPartition]CommittedOffset) []fetchedTopic {
	tps := make([]TopicPartition, 0, len(offsets))
	for tp := range offsets {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, compareTopicPartition)
	var out []fetchedTopic
	for _, tp := range tps {
		if len(out) == 0 || out[len(out)-1].topic != tp.Topic {
			out = append(out, fetchedTopic{topic: tp.Topic})
		}
		last := &out[len(out)-1]
		last.partitions = append(last.partitions, fetchedPartition{partition: tp.Partition, offset: offsets[tp], found: true})
	}
	return out
}

func compareTopicPartition(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

// OffsetDelete handles an OffsetDelete request (v0). Offsets of topics the group is
// subscribed to (consumer protocol) are refused with GROUP_SUBSCRIBED_TO_TOPIC.
func (c *Coordinator) OffsetDelete(req *kmsg.OffsetDeleteRequest) <-chan *kmsg.OffsetDeleteResponse {
	ch := make(chan *kmsg.OffsetDeleteResponse, 1)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offsetDeleteLocked(req, resp, ch, c.clock.Now())
	return ch
}

func (c *Coordinator) offsetDeleteLocked(req *kmsg.OffsetDeleteRequest, resp *kmsg.OffsetDeleteResponse, ch chan *kmsg.OffsetDeleteResponse, now time.Time) {
	fail := func(code int16) {
		resp.ErrorCode = code
		ch <- resp
	}
	if req.Group == "" {
		fail(kerrInvalidGroupID)
		return
	}
	part, code := c.partitionOfLocked(req.Group)
	if code != kerrNone {
		fail(code)
		return
	}
	g := part.groups[req.Group]
	if g == nil || g.state == StateDead {
		fail(kerrGroupIDNotFound)
		return
	}
	if !g.is(StateEmpty) && g.protocolType != consumerProtocolType {
		fail(kerrNonEmptyGroup)
		return
	}
	subscribed := g.subscribedTo
	if g.consumer != nil && len(g.consumer.members) > 0 {
		topics := c.currentTopics()
		in := map[string]bool{}
		for _, m := range g.consumer.members {
			for t := range g.consumer.subscribedTopics(m, topics) {
				in[t] = true
			}
			for _, t := range m.subscribedNames {
				in[t] = true
			}
		}
		subscribed = func(t string) bool { return in[t] }
	}
	var eligible []TopicPartition
	var eligibleAt []*kmsg.OffsetDeleteResponseTopicPartition
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.NewOffsetDeleteResponseTopicPartition())
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for ti, t := range req.Topics {
		for pi, p := range t.Partitions {
			rp := &resp.Topics[ti].Partitions[pi]
			rp.Partition = p.Partition
			if (g.state != StateEmpty || g.consumer != nil) && subscribed(t.Topic) {
				rp.ErrorCode = kerrGroupSubscribedToTopic
				continue
			}
			eligible = append(eligible, TopicPartition{Topic: t.Topic, Partition: p.Partition})
			eligibleAt = append(eligibleAt, rp)
		}
	}
	c.removeOffsetsLocked(part, g, eligible, now, func(code int16) {
		for _, rp := range eligibleAt {
			rp.ErrorCode = code
		}
		ch <- resp
	})
}

// removeOffsetsLocked writes tombstones for the group's offsets in tps; an Empty group
// left without offsets is deleted with them (Kafka's cleanupGroupMetadata). done gets
// the outcome once the tombstones are committed and replayed.
func (c *Coordinator) removeOffsetsLocked(part *partition, g *group, tps []TopicPartition, now time.Time, done func(code int16)) {
	var removed []TopicPartition
	var records []Record
	seen := map[TopicPartition]bool{}
	for _, tp := range tps {
		if _, ok := g.offsets[tp]; (ok || g.unstable(tp) || g.queued[tp] > 0) && !seen[tp] {
			seen[tp] = true
			removed = append(removed, tp)
			records = append(records, offsetTombstone(g.id, tp))
		}
	}
	// A tombstone also deletes the offsets a transaction committed for the partition
	// and has not ended (replayOffset), as in Kafka, and those of commits still queued
	// (the writer appends them before it); the group dies only when nothing is left,
	// queued, pending or committed.
	left := false
	for tp := range g.offsets {
		left = left || !seen[tp]
	}
	for _, tp := range g.txnPartitions() {
		left = left || !seen[tp]
	}
	for tp := range g.queued {
		left = left || !seen[tp]
	}
	dead := g.state == StateEmpty && len(g.pending) == 0 && !left &&
		(g.consumer == nil || len(g.consumer.members) == 0) && (g.share == nil || len(g.share.members) == 0)
	if dead {
		records = append(records, groupTombstone(g.id))
		if g.consumer != nil {
			records = append(records, consumerGroupTombstone(g.id))
		}
		if g.share != nil {
			records = append(records, Record{Key: shareKey(shareGroupKeyVersion, g.id)})
		}
		g.transition(StateDead, now)
	}
	if len(records) == 0 {
		done(kerrNone)
		return
	}
	c.appendLocked(part, nil, records, func(err error) {
		owned := c.mu.partitions[part.id] == part
		if err != nil {
			if dead && owned && g.state == StateDead {
				g.transition(StateEmpty, c.clock.Now())
			}
			done(appendErrorCode(err))
			return
		}
		for _, tp := range removed {
			replayOffset(part.groups, part.id, g.id, tp, nil)
		}
		if dead && part.groups[g.id] == g && g.state == StateDead {
			delete(part.groups, g.id)
			c.logger.Info("group deleted", "group", g.id)
		}
		done(kerrNone)
	})
}

// RemoveTopicOffsets removes what every group committed for the topics named (they
// were deleted), as Kafka's group coordinator does when partitions are deleted
// (onPartitionsDeleted): tombstones on the __consumer_offsets partitions this node
// coordinates, so that a topic created again with the same name is not consumed
// from the old topic's offsets. A group left Empty without offsets is deleted with
// them. A partition still loading is left alone.
func (c *Coordinator) RemoveTopicOffsets(topics map[string]bool) {
	if len(topics) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return
	}
	now := c.clock.Now()
	for _, part := range c.mu.partitions {
		if part.loading {
			continue
		}
		for _, id := range slices.Sorted(maps.Keys(part.groups)) {
			g := part.groups[id]
			if g.state == StateDead {
				continue
			}
			var tps []TopicPartition
			for tp := range g.offsets {
				if topics[tp.Topic] {
					tps = append(tps, tp)
				}
			}
			for _, tp := range g.txnPartitions() {
				if topics[tp.Topic] {
					tps = append(tps, tp)
				}
			}
			for tp := range g.queued {
				if topics[tp.Topic] {
					tps = append(tps, tp)
				}
			}
			if len(tps) == 0 {
				continue
			}
			slices.SortFunc(tps, compareTopicPartition)
			c.logger.Info("removing offsets of deleted topics", "group", g.id, "offsets", len(tps))
			c.removeOffsetsLocked(part, g, tps, now, func(int16) {})
		}
	}
}

// expireOffsetsLocked removes offsets older than offsets.retention.minutes, with
// Kafka 2.1+ semantics: offsets of a group with members are kept (except those of
// topics a consumer group no longer subscribes to); once a group is Empty they expire
// a retention period after it became Empty. Standalone offsets expire a retention
// period after their commit.
func (c *Coordinator) expireOffsetsLocked(part *partition, now time.Time) {
	for _, id := range slices.Sorted(maps.Keys(part.groups)) {
		g := part.groups[id]
		if g.state == StateDead {
			continue
		}
		// An offset with a commit queued is fresh: its tombstone would land after it.
		expired := slices.DeleteFunc(expiredOffsets(g, now, c.cfg.OffsetsRetention),
			func(tp TopicPartition) bool { return g.queued[tp] > 0 })
		dead := g.state == StateEmpty && len(g.pending) == 0 && len(expired) == len(g.offsets) &&
			len(g.txnOffsets) == 0 && len(g.queued) == 0 && (g.consumer == nil || len(g.consumer.members) == 0) && g.share == nil
		if len(expired) == 0 && !dead {
			continue
		}
		c.logger.Info("expiring offsets", "group", g.id, "offsets", len(expired), "delete_group", dead)
		c.removeOffsetsLocked(part, g, expired, now, func(int16) {})
	}
}

func expiredOffsets(g *group, now time.Time, retention time.Duration) []TopicPartition {
	var base func(o CommittedOffset) time.Time
	var subscribed map[string]bool
	switch {
	case g.protocolType != "" && g.state == StateEmpty:
		base = func(o CommittedOffset) time.Time {
			if !g.stateTime.IsZero() {
				return g.stateTime
			}
			return o.CommitTime
		}
	case g.protocolType == consumerProtocolType && g.subscribedTopics != nil && g.state == StateStable:
		subscribed = g.subscribedTopics
		base = func(o CommittedOffset) time.Time { return o.CommitTime }
	case g.consumer != nil && len(g.consumer.members) > 0:
		return nil // a consumer group with members keeps its offsets
	case g.protocolType == "":
		base = func(o CommittedOffset) time.Time { return o.CommitTime }
	default:
		return nil
	}
	var out []TopicPartition
	for tp, o := range g.offsets {
		if subscribed != nil && subscribed[tp.Topic] || g.unstable(tp) {
			continue // Kafka keeps an offset while a transaction's commit of it is pending
		}
		if !o.ExpireTime.IsZero() {
			if !now.Before(o.ExpireTime) {
				out = append(out, tp)
			}
		} else if now.Sub(base(o)) >= retention {
			out = append(out, tp)
		}
	}
	slices.SortFunc(out, compareTopicPartition)
	return out
}
