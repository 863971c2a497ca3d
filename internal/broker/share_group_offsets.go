package broker

// The share group offset APIs (KIP-932), served by the group's coordinator:
//
//	DescribeShareGroupOffsets (90) v0–1  each partition's share-partition start offset
//	                                     (SPSO; -1 without state) and, from v1, its lag:
//	                                     records below the high watermark not yet
//	                                     acknowledged or archived
//	AlterShareGroupOffsets    (91) v0    moves the start of partitions of an empty group
//	                                     (created if unknown); what was in flight is
//	                                     dropped
//	DeleteShareGroupOffsets   (92) v0    deletes the state of topics of an empty group
//
// A group that is not a share group answers GROUP_ID_NOT_FOUND; altering or deleting
// the offsets of a group with members answers NON_EMPTY_GROUP.
//
// Altering, deleting offsets and deleting a group (DeleteGroups) run one at a time per
// group (Broker.groupAdmin), from the group check to the last state write, so that
// one's state write cannot land after another's: a DeleteGroups racing an alter would
// otherwise leave the alter's state behind for a new group of that name. The share
// partitions are dropped from memory before their state is written and again after,
// so that a fetch that read the old state in between does not keep serving it.
//
// DescribeShareGroupOffsets without topics answers for the partitions with state of
// the topics the group may hold state on (group.Coordinator.ShareStateTopics: those it
// assigned and those AlterShareGroupOffsets named, which it records before writing the
// state), as Kafka answers from the group's initialized partitions: its lookups grow
// with the group's topics, not the cluster's. A group asking for all its topics more
// than once is answered once, at its first mention: each would otherwise cost the
// state of all the group's partitions again.
//
// AlterShareGroupOffsets takes start offsets as they come, as Kafka's group
// coordinator does (it hands them to the share coordinator unchecked): -1 leaves the
// start unknown, so that the next fetch starts where share.auto.offset.reset says
// (Samsa reads any other negative start the same way; Kafka would keep it as the
// start), and an offset past the log end is kept, the partition acquiring nothing
// until the log reaches it. A partition named twice is answered at each mention and
// keeps the last offset, initialized once, as in Kafka.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/group"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/share"
)

func init() {
	register(kmsg.DescribeShareGroupOffsets, 0, 1, (*Broker).handleDescribeShareGroupOffsets)
	register(kmsg.AlterShareGroupOffsets, 0, 0, (*Broker).handleAlterShareGroupOffsets)
	register(kmsg.DeleteShareGroupOffsets, 0, 0, (*Broker).handleDeleteShareGroupOffsets)
}

// shareLag counts the records of a partition below hw that are not done: from the
// start offset, less those whose delivery is complete (KIP-1226's count).
func shareLag(sum shareSummary, hw int64) int64 {
	if hw <= sum.start {
		return 0
	}
	return max(hw-sum.start-sum.deliveryComplete, 0)
}

func (b *Broker) handleDescribeShareGroupOffsets(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	ctx, cancel := b.requestContext(0)
	defer cancel()
	img := b.image()
	groups := distinctAll(r.Groups, func(g kmsg.DescribeShareGroupOffsetsRequestGroup) (string, bool) { return g.GroupID, g.Topics == nil })
	for _, rg := range groups {
		out := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		out.GroupID = rg.GroupID
		code, ok, ids, all := b.groups.ShareStateTopics(rg.GroupID)
		switch {
		case code != 0:
			out.ErrorCode = code
		case !ok:
			out.ErrorCode = kerr.GroupIDNotFound.Code
			out.ErrorMessage = kmsg.StringPtr("Group " + rg.GroupID + " is not a share group.")
		case rg.Topics == nil:
			out.Topics = b.describeShareOffsets(ctx, img, rg, shareStateKeys(img, rg.GroupID, ids, all))
		default:
			out.Topics = b.describeShareOffsets(ctx, img, rg, nil)
		}
		resp.Groups = append(resp.Groups, out)
	}
	return reply(resp)
}

// describeShareOffsets answers for the partitions rg names, or, when it names no
// topics, for those of keys (the partitions the group may hold state on) that have
// state.
func (b *Broker) describeShareOffsets(ctx context.Context, img *metadata.Image, rg kmsg.DescribeShareGroupOffsetsRequestGroup, keys []share.Key) []kmsg.DescribeShareGroupOffsetsResponseGroupTopic {
	named := map[share.Key]bool{}
	for _, t := range rg.Topics {
		if tp, ok := img.Topic(t.Topic); ok {
			for _, p := range t.Partitions {
				k := share.Key{Group: rg.GroupID, TopicID: tp.ID, Partition: p}
				if p >= 0 && int(p) < len(tp.Partitions) && !named[k] {
					named[k] = true
					keys = append(keys, k)
				}
			}
		}
	}
	sums, failed := b.shareStore.SummaryEach(ctx, keys)

	want := map[string][]int32{}
	var names []string
	if rg.Topics == nil {
		for _, k := range keys {
			if !sums[k].found {
				continue
			}
			if t, ok := img.TopicByID(metadata.TopicID(k.TopicID)); ok {
				if _, seen := want[t.Name]; !seen {
					names = append(names, t.Name)
				}
				want[t.Name] = append(want[t.Name], k.Partition)
			}
		}
		slices.Sort(names)
	} else {
		for _, t := range rg.Topics {
			names = append(names, t.Topic)
			want[t.Topic] = t.Partitions
		}
	}
	var out []kmsg.DescribeShareGroupOffsetsResponseGroupTopic
	for _, name := range names {
		ot := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
		ot.Topic = name
		t, ok := img.Topic(name)
		ps := slices.Clone(want[name])
		slices.Sort(ps)
		for _, p := range ps {
			op := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
			op.Partition, op.StartOffset, op.LeaderEpoch, op.Lag = p, -1, -1, -1
			if !ok || p < 0 || int(p) >= len(t.Partitions) {
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
				ot.Partitions = append(ot.Partitions, op)
				continue
			}
			ot.TopicID = t.ID
			k := share.Key{Group: rg.GroupID, TopicID: t.ID, Partition: p}
			switch sum := sums[k]; {
			case failed[k] != nil:
				op.ErrorCode = shareErrorCode(failed[k])
			case sum.found:
				op.StartOffset = sum.start
				if part := b.replicas.Get(name, p); part != nil {
					op.Lag = shareLag(sum, part.HighWatermark())
					op.LeaderEpoch = part.LeaderEpoch()
				}
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		out = append(out, ot)
	}
	return out
}

// emptyShareGroup checks that a group is a share group without members.
func (b *Broker) emptyShareGroup(groupID string) (int16, string) {
	code, exists, empty := b.groups.ShareGroupEmpty(groupID)
	switch {
	case code != 0:
		return code, ""
	case !exists:
		return kerr.GroupIDNotFound.Code, "Group " + groupID + " is not a share group."
	case !empty:
		return kerr.NonEmptyGroup.Code, "Share group " + groupID + " has members; its offsets change only while it is empty."
	}
	return 0, ""
}

func (b *Broker) handleAlterShareGroupOffsets(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := r.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	img := b.image()
	// The group records the topics first, so that it never has state on a topic it
	// does not know of (DescribeShareGroupOffsets of all topics looks at its topics).
	topics := map[group.TopicID]int32{}
	for _, rt := range r.Topics {
		if t, ok := img.Topic(rt.Topic); ok {
			topics[group.TopicID(t.ID)] = int32(len(t.Partitions))
		}
	}
	defer b.groupAdmin.lock(r.GroupID)()
	if code := <-b.groups.EnsureShareGroup(r.GroupID, topics); code != 0 {
		resp.ErrorCode = code
		return reply(resp)
	}
	// Each partition is reset once, to the last start it is named with, the partitions
	// in one request per share coordinator (shareStore's callEach).
	key := func(rt kmsg.AlterShareGroupOffsetsRequestTopic, p int32) (share.Key, bool) {
		t, ok := img.Topic(rt.Topic)
		if !ok || p < 0 || int(p) >= len(t.Partitions) {
			return share.Key{}, false
		}
		return share.Key{Group: r.GroupID, TopicID: t.ID, Partition: p}, true
	}
	starts := map[share.Key]int64{}
	var keys []share.Key
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			if k, ok := key(rt, rp.Partition); ok {
				if _, named := starts[k]; !named {
					keys = append(keys, k)
				}
				starts[k] = rp.StartOffset
			}
		}
	}
	ctx, cancel := b.requestContext(0)
	defer cancel()
	failed := b.resetShareStates(ctx, starts)
	for _, rt := range r.Topics {
		ot := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		if t, ok := img.Topic(rt.Topic); ok {
			ot.TopicID = t.ID
		}
		for _, rp := range rt.Partitions {
			op := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			op.Partition = rp.Partition
			k, ok := key(rt, rp.Partition)
			switch {
			case !ok:
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case failed[k] != nil:
				op.ErrorCode = shareErrorCode(failed[k])
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return reply(resp)
}

func (b *Broker) handleDeleteShareGroupOffsets(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	defer b.groupAdmin.lock(r.GroupID)()
	if code, msg := b.emptyShareGroup(r.GroupID); code != 0 {
		resp.ErrorCode = code
		resp.ErrorMessage = kmsg.StringPtr(msg)
		return reply(resp)
	}
	ctx, cancel := b.requestContext(0)
	defer cancel()
	img := b.image()
	var deleted []group.TopicID
	for _, rt := range r.Topics {
		ot := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		t, ok := img.Topic(rt.Topic)
		if !ok {
			ot.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, ot)
			continue
		}
		ot.TopicID = t.ID
		if err := b.deleteShareStates(ctx, shareKeysOf(r.GroupID, t)); err != nil {
			ot.ErrorCode = shareErrorCode(err)
		} else {
			deleted = append(deleted, group.TopicID(t.ID))
		}
		resp.Topics = append(resp.Topics, ot)
	}
	if len(deleted) > 0 {
		if code := <-b.groups.ForgetShareTopics(r.GroupID, deleted); code != 0 {
			resp.ErrorCode = code
		}
	}
	return reply(resp)
}

// resetShareStates starts share partitions afresh, each at its offset in starts,
// under their next state epochs (InitializeShareGroupState), so that a leader still
// holding the old state in memory has its next write fenced and reads the state
// again. It returns the failures by key.
func (b *Broker) resetShareStates(ctx context.Context, starts map[share.Key]int64) map[share.Key]error {
	sums, failed := b.shareStore.SummaryEach(ctx, slices.SortedFunc(maps.Keys(starts), compareShareKeys))
	inits := make(map[share.Key]shareInit, len(sums))
	for k, sum := range sums {
		b.forgetShare(k)
		inits[k] = shareInit{stateEpoch: sum.stateEpoch + 1, start: starts[k]}
	}
	maps.Copy(failed, b.shareStore.InitializeEach(ctx, inits))
	for k := range inits {
		b.forgetShare(k)
	}
	return failed
}

// initNewShareState starts the share state of partitions [from, to) of a share
// group's topic at offset 0 where they have none: the group coordinator's
// InitShareState, for the partitions a topic gained after the group first assigned it
// (Kafka 4.1, KAFKA-20742: share.auto.offset.reset=latest would skip what was written
// to them before their first fetch). A partition that has state keeps it.
//
// It runs under the group's admin lock, and not for a group deleted meanwhile, so
// that its state writes cannot land after DeleteGroups deleted the group's state.
func (b *Broker) initNewShareState(ctx context.Context, groupID string, topic group.TopicID, from, to int32) error {
	ctx, cancel := context.WithTimeout(ctx, shareStoreTimeout)
	defer cancel()
	unlock, err := b.groupAdmin.lockContext(ctx, groupID)
	if err != nil {
		return err
	}
	defer unlock()
	if _, exists, _, _ := b.groups.ShareStateTopics(groupID); !exists {
		return fmt.Errorf("share group %s was deleted", groupID)
	}
	// A topic deleted meanwhile has had its share state deleted
	// (deleteDeletedShareStates, under this lock): none is written for it again.
	if _, ok := b.image().TopicByID(metadata.TopicID(topic)); !ok {
		return fmt.Errorf("topic %s was deleted", metadataTopicID(topic))
	}
	var keys []share.Key
	for p := from; p < to; p++ {
		keys = append(keys, share.Key{Group: groupID, TopicID: topic, Partition: p})
	}
	sums, failed := b.shareStore.SummaryEach(ctx, keys)
	inits := map[share.Key]shareInit{}
	for k, sum := range sums {
		if !sum.found {
			b.forgetShare(k)
			inits[k] = shareInit{stateEpoch: sum.stateEpoch + 1, start: 0}
		}
	}
	maps.Copy(failed, b.shareStore.InitializeEach(ctx, inits))
	if k, err := firstFailure(keys, failed); err != nil {
		return fmt.Errorf("share partition %d: %w", k.Partition, err)
	}
	return nil
}

// deleteShareStates deletes the state of share partitions and returns the first
// failure.
func (b *Broker) deleteShareStates(ctx context.Context, keys []share.Key) error {
	for _, k := range keys {
		b.forgetShare(k)
	}
	_, err := firstFailure(keys, b.shareStore.DeleteEach(ctx, keys))
	for _, k := range keys {
		b.forgetShare(k)
	}
	return err
}

// groupLocks serialises operations per group id.
type groupLocks struct {
	mu   sync.Mutex
	held map[string]chan struct{} // closed when released
}

// lock takes the locks of groups (in order, each once) and returns their release.
func (l *groupLocks) lock(groups ...string) (unlock func()) {
	unlock, _ = l.lockContext(context.Background(), groups...)
	return unlock
}

// lockContext is lock giving up when ctx ends (with nothing held).
func (l *groupLocks) lockContext(ctx context.Context, groups ...string) (unlock func(), err error) {
	groups = slices.Compact(slices.Sorted(slices.Values(groups)))
	unlock = func() {}
	for i, g := range groups {
		for {
			l.mu.Lock()
			released, busy := l.held[g]
			if !busy {
				if l.held == nil {
					l.held = map[string]chan struct{}{}
				}
				l.held[g] = make(chan struct{})
				l.mu.Unlock()
				break
			}
			l.mu.Unlock()
			select {
			case <-released:
			case <-ctx.Done():
				l.release(groups[:i])
				return unlock, ctx.Err()
			}
		}
	}
	return func() { l.release(groups) }, nil
}

func (l *groupLocks) release(groups []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, g := range groups {
		close(l.held[g])
		delete(l.held, g)
	}
}

// deletedTopics returns the topics of prev that next no longer has (by id: a topic
// deleted and created again is among them), as prev has them; nil if none.
func deletedTopics(prev, next *metadata.Image) map[group.TopicID]*metadata.Topic {
	if prev == nil {
		return nil
	}
	var out map[group.TopicID]*metadata.Topic
	for _, t := range prev.Topics() {
		if _, ok := next.TopicByID(t.ID); !ok {
			if out == nil {
				out = map[group.TopicID]*metadata.Topic{}
			}
			out[group.TopicID(t.ID)] = t
		}
	}
	return out
}

// deleteDeletedShareStates drops the share partitions of deleted topics from memory,
// deletes the share state that the share groups this node coordinates held on them, then drops the topics from the groups, as
// Kafka's group coordinator does when partitions are deleted (onPartitionsDeleted,
// which deletes their share state): otherwise the state would stay in
// __share_group_state for good (DeleteGroups and DeleteShareGroupOffsets find a
// group's topics by name, in the image, where a deleted topic no longer is). Each
// group is done under its admin lock; a failure is logged and the state left.
func (b *Broker) deleteDeletedShareStates(ctx context.Context, deleted map[group.TopicID]*metadata.Topic) {
	names := make(map[group.TopicID]string, len(deleted))
	for id, t := range deleted {
		b.shares.ForgetTopic(id) // on every node: the share partitions it led leave memory
		names[id] = t.Name
	}
	groups := b.groups.ShareGroupsOnTopics(names)
	for _, groupID := range slices.Sorted(maps.Keys(groups)) {
		ids := groups[groupID]
		var keys []share.Key
		for _, id := range ids {
			for p := range int32(len(deleted[id].Partitions)) {
				keys = append(keys, share.Key{Group: groupID, TopicID: id, Partition: p})
			}
		}
		unlock, err := b.groupAdmin.lockContext(ctx, groupID)
		if err != nil {
			return
		}
		dctx, cancel := context.WithTimeout(ctx, shareStoreTimeout)
		if err = b.deleteShareStates(dctx, keys); err == nil {
			select { // the broker closing does not wait for the group's write
			case code := <-b.groups.ForgetDeletedShareTopics(groupID, ids):
				if code != 0 {
					err = kerr.ErrorForCode(code)
				}
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		cancel()
		unlock()
		if err != nil {
			b.logger.Warn("deleting the share state of deleted topics failed", "group", groupID, "err", err)
			continue
		}
		b.logger.Info("deleted the share state of deleted topics", "group", groupID, "share_partitions", len(keys))
	}
}

// deletedShareTopics queues the topics deleted from the image (metadata subscribers
// must not block) for deleteDeletedShareStates, which run takes them to in order. It
// is safe for concurrent use.
type deletedShareTopics struct {
	mu      sync.Mutex
	pending []map[group.TopicID]*metadata.Topic
	wake    chan struct{}
}

func (q *deletedShareTopics) add(deleted map[group.TopicID]*metadata.Topic) {
	if len(deleted) == 0 {
		return
	}
	q.mu.Lock()
	q.pending = append(q.pending, deleted)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// run hands each queued deletion to fn until ctx ends.
func (q *deletedShareTopics) run(ctx context.Context, fn func(context.Context, map[group.TopicID]*metadata.Topic)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.wake:
		}
		q.mu.Lock()
		pending := q.pending
		q.pending = nil
		q.mu.Unlock()
		for _, deleted := range pending {
			fn(ctx, deleted)
		}
	}
}
