package group

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// smember is a simulated share group member: it keeps the assignment the
// coordinator last sent it, as a share consumer does.
type smember struct {
	id     string
	epoch  int32
	topics []string
	owned  Assignment
}

// shHeartbeat sends one ShareGroupHeartbeat of m (its subscription only when it
// joins, as clients do) and applies the response.
func (h *harness) shHeartbeat(group string, m *smember) *kmsg.ShareGroupHeartbeatResponse {
	h.t.Helper()
	resp := recv(h.t, h.c.ShareGroupHeartbeat(m.heartbeat(group), "client", "/127.0.0.1"))
	m.apply(resp)
	return resp
}

// heartbeat is m's next ShareGroupHeartbeat to group (a join sends its subscription).
func (m *smember) heartbeat(group string) *kmsg.ShareGroupHeartbeatRequest {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID = group
	req.MemberID = m.id
	req.MemberEpoch = m.epoch
	if m.epoch == 0 {
		req.SubscribedTopicNames = m.topics
	}
	return req
}

// apply takes a successful heartbeat's answer: m's epoch and, when sent, its
// assignment.
func (m *smember) apply(resp *kmsg.ShareGroupHeartbeatResponse) {
	if resp.ErrorCode != 0 {
		return
	}
	m.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		m.owned = Assignment{}
		for _, t := range resp.Assignment.TopicPartitions {
			for _, p := range t.Partitions {
				m.owned.add(TopicID(t.TopicID), p)
			}
		}
	}
}

// TestShareGroupMemberGoneReassigns: when a share group member leaves or its
// session expires, the partitions it had go to the members that stay, at their
// next heartbeat. Otherwise no member fetches them and their records (released
// by the member that left) are never delivered again.
func TestShareGroupMemberGoneReassigns(t *testing.T) {
	for _, tc := range []struct {
		name string
		gone func(h *harness, stay []*smember, leaver *smember)
	}{
		{"leave", func(h *harness, _ []*smember, leaver *smember) {
			leaver.epoch = leaveEpoch
			if r := h.shHeartbeat("g", leaver); r.ErrorCode != 0 {
				h.t.Fatalf("leave: error %d", r.ErrorCode)
			}
		}},
		{"session expired", func(h *harness, stay []*smember, leaver *smember) {
			for range 2 * int(h.cfg.ShareSessionTimeout/time.Second) {
				h.clock.Advance(time.Second)
				for _, m := range stay {
					if r := h.shHeartbeat("g", m); r.ErrorCode != 0 {
						h.t.Fatalf("heartbeat of %s: error %d", m.id, r.ErrorCode)
					}
				}
			}
			if r := h.shHeartbeat("g", leaver); r.ErrorCode != kerrUnknownMemberID {
				h.t.Fatalf("heartbeat of the expired member: error %d, want UNKNOWN_MEMBER_ID", r.ErrorCode)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, ft := newConsumerHarness(t, func(c *Config) { c.ShareSessionTimeout = 5 * time.Second })
			ft.set("t", 3)
			a := &smember{id: "a", topics: []string{"t"}}
			b := &smember{id: "b", topics: []string{"t"}}
			c := &smember{id: "c", topics: []string{"t"}}
			all := []*smember{a, b, c}
			for range 3 { // join, then pick up the assignments of the later joins
				h.clock.Advance(h.cfg.ShareAssignmentInterval) // each round's changes are assigned at once
				for _, m := range all {
					if r := h.shHeartbeat("g", m); r.ErrorCode != 0 {
						t.Fatalf("heartbeat of %s: error %d", m.id, r.ErrorCode)
					}
				}
			}
			for _, m := range all {
				if m.owned.size() != 1 {
					t.Fatalf("before: %s owns %v, want one partition each", m.id, m.owned)
				}
			}

			tc.gone(h, []*smember{a, b}, c)
			for range 2 {
				h.clock.Advance(h.cfg.ShareAssignmentInterval)
				for _, m := range []*smember{a, b} {
					if r := h.shHeartbeat("g", m); r.ErrorCode != 0 {
						t.Fatalf("heartbeat of %s after %s: error %d", m.id, tc.name, r.ErrorCode)
					}
				}
			}
			for p := range int32(3) {
				if !a.owned.has(topicIDOf("t"), p) && !b.owned.has(topicIDOf("t"), p) {
					t.Fatalf("after %s: partition %d has no member (a owns %v, b owns %v)", tc.name, p, a.owned, b.owned)
				}
			}
		})
	}
}

// shareInitCall is one InitShareState call of the coordinator, answered through
// result.
type shareInitCall struct {
	group    string
	topic    TopicID
	from, to int32
	result   chan error
}

// shareInitsSucceed makes the harness's InitShareState succeed at once and returns
// the calls it gets (up to 4 unread); h.start() must follow.
func (h *harness) shareInitsSucceed() <-chan shareInitCall {
	calls := make(chan shareInitCall, 4)
	h.initShare = func(ctx context.Context, group string, topic TopicID, from, to int32) error {
		calls <- shareInitCall{group: group, topic: topic, from: from, to: to}
		return nil
	}
	return calls
}

// TestShareGroupNewPartitionsInitialized: the partitions a topic gains after a share
// group first assigned it are assigned only once their share state has been
// initialized (at offset 0, by the broker), so that share.auto.offset.reset=latest
// does not skip what was written to them before their first fetch (Kafka 4.1,
// KAFKA-20742); a failed initialization is tried again at the next heartbeat; the
// group remembers what it initialized across a coordinator restart; a topic met for
// the first time is assigned whole, without initialization.
func TestShareGroupNewPartitionsInitialized(t *testing.T) {
	calls := make(chan shareInitCall, 4)
	h, ft := newConsumerHarness(t, nil)
	h.initShare = func(ctx context.Context, group string, topic TopicID, from, to int32) error {
		c := shareInitCall{group, topic, from, to, make(chan error)}
		calls <- c
		select {
		case err := <-c.result:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	h.start()
	tid := topicIDOf("t")
	owns := func(m *smember, want int32) {
		t.Helper()
		for p := range int32(8) {
			if got := m.owned.has(tid, p); got != (p < want) {
				t.Fatalf("%s owns %v, want partitions 0-%d of t", m.id, m.owned, want-1)
			}
		}
	}
	noCall := func() {
		t.Helper()
		select {
		case c := <-calls:
			t.Fatalf("unexpected InitShareState of partitions %d-%d", c.from, c.to-1)
		default:
		}
	}
	nextCall := func(from, to int32) shareInitCall {
		t.Helper()
		select {
		case c := <-calls:
			if c.group != "g" || c.topic != tid || c.from != from || c.to != to {
				t.Fatalf("InitShareState(%s, %x, %d, %d), want g, t, %d, %d", c.group, c.topic, c.from, c.to, from, to)
			}
			return c
		case <-time.After(10 * time.Second):
			t.Fatalf("no InitShareState of partitions %d-%d", from, to-1)
		}
		return shareInitCall{}
	}
	heartbeat := func(m *smember) {
		t.Helper()
		h.clock.Advance(h.cfg.ShareAssignmentInterval) // a change is assigned at once
		if r := h.shHeartbeat("g", m); r.ErrorCode != 0 {
			t.Fatalf("heartbeat of %s: error %d", m.id, r.ErrorCode)
		}
	}

	ft.set("t", 2)
	a := &smember{id: "a", topics: []string{"t"}}
	heartbeat(a)
	owns(a, 2) // a new topic: assigned whole, its start left to share.auto.offset.reset
	noCall()

	ft.set("t", 4)
	heartbeat(a)
	owns(a, 2) // held back until initialized
	c := nextCall(2, 4)
	heartbeat(a) // under way: not asked again
	noCall()
	c.result <- errors.New("share coordinator unavailable")
	waitFor(t, "the failed initialization to be tried again", func() bool {
		heartbeat(a)
		select {
		case c = <-calls:
			return true
		default:
			return false
		}
	})
	if c.from != 2 || c.to != 4 {
		t.Fatalf("retried InitShareState of partitions %d-%d, want 2-3", c.from, c.to-1)
	}
	owns(a, 2)
	epoch := a.epoch
	c.result <- nil
	waitFor(t, "the group epoch to move once the partitions are initialized", func() bool {
		heartbeat(a)
		return a.epoch > epoch
	})
	owns(a, 4)

	// A restarted coordinator knows the topic had 4 initialized partitions.
	h.start()
	ft.set("t", 5)
	heartbeat(a)
	owns(a, 4)
	nextCall(4, 5).result <- nil
	waitFor(t, "partition 4 to be assigned", func() bool {
		heartbeat(a)
		return a.owned.has(tid, 4)
	})

	// A member subscribing to another topic: met for the first time, assigned whole.
	ft.set("u", 3)
	b := &smember{id: "b", topics: []string{"u"}}
	heartbeat(b)
	if b.owned.size() != 3 {
		t.Fatalf("b owns %v, want the 3 partitions of u", b.owned)
	}
	noCall()
}

// TestShareGroupForgetTopics: once DeleteShareGroupOffsets deleted a topic's share
// state, the group meets the topic as new: its partitions, including those it gained
// since, are assigned at once and start where share.auto.offset.reset says.
func TestShareGroupForgetTopics(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	calls := h.shareInitsSucceed()
	h.start()
	ft.set("t", 2)
	a := &smember{id: "a", topics: []string{"t"}}
	if r := h.shHeartbeat("g", a); r.ErrorCode != 0 || a.owned.size() != 2 {
		t.Fatalf("join: error %d, owns %v", r.ErrorCode, a.owned)
	}
	if code := recv(t, h.c.ForgetShareTopics("g", []TopicID{topicIDOf("t")})); code != 0 {
		t.Fatalf("ForgetShareTopics with a member: error %d, want 0 (nothing forgotten)", code)
	}
	a.epoch = leaveEpoch
	if r := h.shHeartbeat("g", a); r.ErrorCode != 0 {
		t.Fatalf("leave: error %d", r.ErrorCode)
	}
	if code := recv(t, h.c.ForgetShareTopics("g", []TopicID{topicIDOf("t")})); code != 0 {
		t.Fatalf("ForgetShareTopics: error %d", code)
	}
	h.start() // the forgetting is durable
	ft.set("t", 4)
	h.clock.Advance(h.cfg.ShareAssignmentInterval) // b's join is assigned at once
	b := &smember{id: "b", topics: []string{"t"}}
	if r := h.shHeartbeat("g", b); r.ErrorCode != 0 || b.owned.size() != 4 {
		t.Fatalf("join after the topic was forgotten: error %d, owns %v, want all 4 partitions", r.ErrorCode, b.owned)
	}
	select {
	case c := <-calls:
		t.Fatalf("InitShareState of partitions %d-%d of a forgotten topic", c.from, c.to-1)
	default:
	}
}

// stateTopics is ShareStateTopics of group, failing the test on an error code; ids
// sorted.
func stateTopics(t *testing.T, c *Coordinator, group string) (exists bool, ids []TopicID, all bool) {
	t.Helper()
	code, exists, ids, all := c.ShareStateTopics(group)
	if code != 0 {
		t.Fatalf("ShareStateTopics(%s): error %d", group, code)
	}
	slices.SortFunc(ids, func(a, b TopicID) int { return bytes.Compare(a[:], b[:]) })
	return exists, ids, all
}

// TestShareStateTopics: a share group knows every topic it may hold share state on —
// those it assigned and those AlterShareGroupOffsets named (EnsureShareGroup) — across
// a restart, so that DescribeShareGroupOffsets of all topics and DeleteGroups look at
// those topics only. A group created empty knows none (not "any topic"); one recorded
// before Samsa kept them may have state anywhere. Naming a topic the group has does not
// change its initialized partition count, so partitions it gained since are still
// initialized at offset 0 when a member next subscribes.
func TestShareStateTopics(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	calls := h.shareInitsSucceed()
	// A share group recorded before it kept its topics: no initialized_kept.
	legacy := Record{Key: shareKey(shareGroupKeyVersion, "legacy"), Value: []byte(`{"epoch":3,"subscription_hash":0}`)}
	h.log.parts[h.c.PartitionFor("legacy")] = append(h.log.parts[h.c.PartitionFor("legacy")], legacy)
	h.start()
	ft.set("a", 2)
	ft.set("b", 3)

	if code := recv(t, h.c.EnsureShareGroup("empty", nil)); code != 0 {
		t.Fatalf("EnsureShareGroup(empty): error %d", code)
	}
	if code := recv(t, h.c.EnsureShareGroup("g", map[TopicID]int32{topicIDOf("b"): 3})); code != 0 {
		t.Fatalf("EnsureShareGroup(g, b): error %d", code)
	}
	m := &smember{id: "m", topics: []string{"a"}}
	if r := h.shHeartbeat("g", m); r.ErrorCode != 0 || m.owned.size() != 2 {
		t.Fatalf("join: error %d, owns %v", r.ErrorCode, m.owned)
	}
	if code := recv(t, h.c.EnsureShareGroup("g", nil)); code != kerrNonEmptyGroup {
		t.Fatalf("EnsureShareGroup with a member: error %d, want NON_EMPTY_GROUP", code)
	}
	m.epoch = leaveEpoch
	if r := h.shHeartbeat("g", m); r.ErrorCode != 0 {
		t.Fatalf("leave: error %d", r.ErrorCode)
	}
	// a gains partitions while nobody subscribes; naming a (now 4 partitions) keeps
	// the group's count of 2.
	ft.set("a", 4)
	if code := recv(t, h.c.EnsureShareGroup("g", map[TopicID]int32{topicIDOf("a"): 4})); code != 0 {
		t.Fatalf("EnsureShareGroup(g, a): error %d", code)
	}

	h.start() // what the group knows is durable
	if exists, _, _ := stateTopics(t, h.c, "none"); exists {
		t.Fatalf("a group that does not exist exists")
	}
	if exists, ids, all := stateTopics(t, h.c, "empty"); !exists || len(ids) != 0 || all {
		t.Errorf("empty group: exists %v, topics %v, all %v; want no topics", exists, ids, all)
	}
	if exists, _, all := stateTopics(t, h.c, "legacy"); !exists || !all {
		t.Errorf("group recorded before its topics were kept: exists %v, all %v; want any topic", exists, all)
	}
	want := []TopicID{topicIDOf("a"), topicIDOf("b")}
	slices.SortFunc(want, func(a, b TopicID) int { return bytes.Compare(a[:], b[:]) })
	if exists, ids, all := stateTopics(t, h.c, "g"); !exists || !slices.Equal(ids, want) || all {
		t.Errorf("group g: exists %v, topics %v, all %v; want a and b", exists, ids, all)
	}

	n := &smember{id: "n", topics: []string{"a"}}
	if r := h.shHeartbeat("g", n); r.ErrorCode != 0 {
		t.Fatalf("join again: error %d", r.ErrorCode)
	}
	select {
	case c := <-calls:
		if c.topic != topicIDOf("a") || c.from != 2 || c.to != 4 {
			t.Errorf("InitShareState of %v partitions %d-%d, want a's 2-3", c.topic, c.from, c.to-1)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the partitions a gained were not initialized")
	}
}

// TestShareGroupsOnDeletedTopics: the share groups that may hold state on a deleted
// topic are found whether the topic is still among the group's topics (an empty
// group named it) or a member's heartbeat already dropped it from them on seeing it
// gone (the member subscribes to it), and ForgetDeletedShareTopics drops it from the
// group's topics.
func TestShareGroupsOnDeletedTopics(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	h.shareInitsSucceed()
	h.start()
	ft.set("t", 2)
	ft.set("u", 1)
	if code := recv(t, h.c.EnsureShareGroup("empty", map[TopicID]int32{topicIDOf("u"): 1})); code != 0 {
		t.Fatalf("EnsureShareGroup: error %d", code)
	}
	a := &smember{id: "a", topics: []string{"t"}}
	if r := h.shHeartbeat("g", a); r.ErrorCode != 0 || a.owned.size() != 2 {
		t.Fatalf("join: error %d, owns %v", r.ErrorCode, a.owned)
	}
	delete(ft.parts, "t")
	delete(ft.parts, "u")
	ft.version++
	h.clock.Advance(h.cfg.ShareAssignmentInterval) // the change is assigned at once
	if r := h.shHeartbeat("g", a); r.ErrorCode != 0 || a.owned.size() != 0 {
		t.Fatalf("heartbeat after the deletion: error %d, owns %v", r.ErrorCode, a.owned)
	}
	if _, ids, _ := stateTopics(t, h.c, "g"); slices.Contains(ids, topicIDOf("t")) {
		t.Fatalf("the heartbeat kept the deleted topic among the group's topics")
	}
	got := h.c.ShareGroupsOnTopics(map[TopicID]string{topicIDOf("t"): "t", topicIDOf("u"): "u"})
	if !slices.Equal(got["g"], []TopicID{topicIDOf("t")}) || !slices.Equal(got["empty"], []TopicID{topicIDOf("u")}) || len(got) != 2 {
		t.Fatalf("groups on the deleted topics: %v; want g on t and empty on u", got)
	}
	if code := recv(t, h.c.ForgetDeletedShareTopics("empty", []TopicID{topicIDOf("u")})); code != 0 {
		t.Fatalf("ForgetDeletedShareTopics: error %d", code)
	}
	h.start() // the forgetting is durable
	if exists, ids, _ := stateTopics(t, h.c, "empty"); !exists || len(ids) != 0 {
		t.Fatalf("empty group after forgetting u: exists %v, topics %v", exists, ids)
	}
}
