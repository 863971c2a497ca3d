package group

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeTopics is a mutable topic set for the coordinator's Topics option.
type fakeTopics struct {
	version   int64
	parts     map[string]int32
	racks     map[string][][]string
	authorize bool // Topics.AuthorizeRegex
}

func (f *fakeTopics) snapshot() *Topics {
	out := &Topics{Version: f.version, ByName: map[string]TopicInfo{}, ByID: map[TopicID]string{}, AuthorizeRegex: f.authorize}
	for name, n := range f.parts {
		info := TopicInfo{Name: name, ID: topicIDOf(name), Partitions: n, Racks: f.racks[name]}
		out.ByName[name] = info
		out.ByID[info.ID] = name
		out.Names = append(out.Names, name)
	}
	slices.Sort(out.Names)
	return out
}

func (f *fakeTopics) set(name string, n int32) {
	f.parts[name] = n
	f.version++
}

func topicIDOf(name string) TopicID {
	var id TopicID
	copy(id[:], name)
	id[15] = 1
	return id
}

// cmember is a simulated KIP-848 client: it owns what the coordinator last assigned it
// and reports that in every heartbeat, as franz-go does.
type cmember struct {
	id       string
	instance string
	epoch    int32
	owned    Assignment
	topics   []string
	regex    string
	assignor string
	rack     string
	gone     bool
	// describable is what its heartbeats say it may describe (nil: every topic).
	describable func(topic string) bool
}

func newConsumerHarness(t *testing.T, mutate func(*Config)) (*harness, *fakeTopics) {
	t.Helper()
	ft := &fakeTopics{parts: map[string]int32{}}
	h := &harness{t: t, log: newMemLog(), cfg: testConfig()}
	h.cfg.ConsumerSessionTimeout = 10 * time.Second
	h.cfg.ConsumerHeartbeatInterval = time.Second
	if mutate != nil {
		mutate(&h.cfg)
	}
	h.clock = newFakeClock()
	h.topics = ft.snapshot
	h.start()
	return h, ft
}

func (h *harness) cgHeartbeat(group string, m *cmember, full bool) *kmsg.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	resp := recv(h.t, h.c.ConsumerGroupHeartbeat(m.heartbeat(group, full), "client", "/127.0.0.1", m.describable))
	m.apply(resp)
	return resp
}

// heartbeat is m's next ConsumerGroupHeartbeat to group: full sends its subscription
// and owned partitions too, as a join or a full heartbeat does.
func (m *cmember) heartbeat(group string, full bool) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group = group
	req.MemberID = m.id
	req.MemberEpoch = m.epoch
	req.RebalanceTimeoutMillis = -1
	if m.instance != "" {
		req.InstanceID = &m.instance
	}
	if full || m.epoch == 0 {
		req.RebalanceTimeoutMillis = 5000
		if m.regex != "" {
			req.SubscribedTopicRegex = &m.regex
		} else {
			req.SubscribedTopicNames = m.topics
		}
		if m.assignor != "" {
			req.ServerAssignor = &m.assignor
		}
		if m.rack != "" {
			req.RackID = &m.rack
		}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if m.epoch != 0 {
			for _, t := range sortedTopicIDs(m.owned) {
				rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
				rt.TopicID = t
				rt.Partitions = m.owned[t]
				req.Topics = append(req.Topics, rt)
			}
		}
	}
	return req
}

// apply takes a successful heartbeat's answer: m's epoch and, when sent, its
// assignment.
func (m *cmember) apply(resp *kmsg.ConsumerGroupHeartbeatResponse) {
	if resp.ErrorCode != 0 {
		return
	}
	m.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		m.owned = Assignment{}
		for _, t := range resp.Assignment.Topics {
			for _, p := range t.Partitions {
				m.owned.add(TopicID(t.TopicID), p)
			}
		}
	}
}

// checkExclusive fails if two live simulated members own the same partition.
func checkExclusive(t *testing.T, members []*cmember) {
	t.Helper()
	seen := map[TopicID]map[int32]string{}
	for _, m := range members {
		if m.gone {
			continue
		}
		for tid, ps := range m.owned {
			if seen[tid] == nil {
				seen[tid] = map[int32]string{}
			}
			for _, p := range ps {
				if other, ok := seen[tid][p]; ok {
					t.Fatalf("partition %x/%d owned by %s and %s", tid[:2], p, other, m.id)
				}
				seen[tid][p] = m.id
			}
		}
	}
}

// settle heartbeats every live member until all own their share and the group is
// Stable; it checks exclusive ownership after every heartbeat.
func settle(t *testing.T, h *harness, group string, members []*cmember, total int) {
	t.Helper()
	for round := range 50 {
		for _, m := range members {
			if m.gone {
				continue
			}
			if r := h.cgHeartbeat(group, m, true); r.ErrorCode != 0 {
				t.Fatalf("round %d: heartbeat of %s: error %d", round, m.id, r.ErrorCode)
			}
			checkExclusive(t, members)
			checkAssignmentEpochs(t, h, group)
		}
		owned, live := 0, 0
		minOwned, maxOwned := 1<<30, 0
		for _, m := range members {
			if !m.gone {
				live++
				owned += m.owned.size()
				minOwned, maxOwned = min(minOwned, m.owned.size()), max(maxOwned, m.owned.size())
			}
		}
		if owned == total && maxOwned-minOwned <= 1 && describeState(t, h, group) == "Stable" {
			return
		}
		passAssignmentInterval(t, h, group)
	}
	t.Fatalf("group %s did not settle", group)
}

// passAssignmentInterval moves the clock past the group's assignment interval when the
// group waits for its next target assignment (KIP-1263), as time passes between a
// member's heartbeats.
func passAssignmentInterval(t *testing.T, h *harness, group string) {
	t.Helper()
	if describeState(t, h, group) == "Assigning" {
		h.clock.Advance(h.cfg.ConsumerAssignmentInterval)
	}
}

func describeState(t *testing.T, h *harness, group string) string {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp := <-h.c.ConsumerGroupDescribe(req)
	if resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("describe %s: error %d", group, resp.Groups[0].ErrorCode)
	}
	return resp.Groups[0].State
}

func TestConsumerGroupJoinLeaveReconcile(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.set("t", 12)
	var members []*cmember
	for i := range 4 {
		m := &cmember{id: fmt.Sprintf("m%d", i), topics: []string{"t"}}
		members = append(members, m)
		settle(t, h, "g", members, 12)
	}
	for _, m := range members {
		if m.owned.size() != 3 {
			t.Fatalf("%s owns %d partitions, want 3", m.id, m.owned.size())
		}
	}
	// A member leaves: the others take its partitions, nobody else moves.
	before := map[string]Assignment{}
	for _, m := range members {
		before[m.id] = m.owned.clone()
	}
	leaving := members[1]
	leaving.epoch = leaveEpoch
	if r := h.cgHeartbeat("g", leaving, false); r.ErrorCode != 0 || r.MemberEpoch != leaveEpoch {
		t.Fatalf("leave: error %d epoch %d", r.ErrorCode, r.MemberEpoch)
	}
	leaving.gone = true
	settle(t, h, "g", members, 12)
	for _, m := range members {
		if m.gone {
			continue
		}
		for tid, ps := range before[m.id] {
			for _, p := range ps {
				if !m.owned.has(tid, p) {
					t.Fatalf("%s lost partition %d it kept before the leave", m.id, p)
				}
			}
		}
	}

	// A restart replays the records: same epochs, same assignments.
	epoch := members[0].epoch
	h.start()
	for _, m := range members {
		if m.gone {
			continue
		}
		r := h.cgHeartbeat("g", m, true)
		if r.ErrorCode != 0 || r.MemberEpoch != epoch {
			t.Fatalf("after restart %s: error %d epoch %d, want %d", m.id, r.ErrorCode, r.MemberEpoch, epoch)
		}
	}
	checkExclusive(t, members)
}

func TestConsumerGroupRandomChurn(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.set("a", 7)
	ft.set("b", 5)
	rng := rand.New(rand.NewPCG(1, 2))
	var members []*cmember
	next := 0
	for step := range 400 {
		var live []*cmember
		for _, m := range members {
			if !m.gone {
				live = append(live, m)
			}
		}
		switch op := rng.IntN(10); {
		case op == 0 && len(live) < 6:
			members = append(members, &cmember{id: fmt.Sprintf("m%d", next), topics: []string{"a", "b"}})
			next++
		case op == 1 && len(live) > 1:
			m := live[rng.IntN(len(live))]
			m.epoch = leaveEpoch
			h.cgHeartbeat("g", m, false)
			m.gone = true
		case op == 2 && step%50 == 0:
			h.start()
		default:
			if len(live) > 0 {
				m := live[rng.IntN(len(live))]
				if r := h.cgHeartbeat("g", m, rng.IntN(2) == 0); r.ErrorCode != 0 {
					t.Fatalf("step %d: heartbeat of %s: error %d", step, m.id, r.ErrorCode)
				}
			}
		}
		checkExclusive(t, members)
		checkAssignmentEpochs(t, h, "g")
	}
	if len(members) == 0 {
		t.Fatal("no member joined")
	}
	settle(t, h, "g", members, 12)
}

func TestConsumerGroupSessionExpiryAndStatic(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.set("t", 4)
	a := &cmember{id: "a", instance: "ia", topics: []string{"t"}}
	b := &cmember{id: "b", topics: []string{"t"}}
	members := []*cmember{a, b}
	settle(t, h, "g", members, 4)

	// The static member leaves for a while: its partitions stay with it.
	kept := a.owned.clone()
	epoch := a.epoch
	a.epoch = staticLeaveEpoch
	if r := h.cgHeartbeat("g", a, false); r.ErrorCode != 0 {
		t.Fatalf("static leave: error %d", r.ErrorCode)
	}
	a.gone = true
	h.cgHeartbeat("g", b, true)
	if b.owned.intersects(kept) {
		t.Fatal("partitions of a static member that left temporarily went to another member")
	}
	// Its next incarnation (a new member id) gets them back at the same epoch.
	a2 := &cmember{id: "a2", instance: "ia", topics: []string{"t"}}
	r := h.cgHeartbeat("g", a2, true)
	if r.ErrorCode != 0 || !a2.owned.equal(kept) || a2.epoch != epoch {
		t.Fatalf("static rejoin: error %d, owns %v (want %v), epoch %d (want %d)", r.ErrorCode, a2.owned, kept, a2.epoch, epoch)
	}
	// A second live incarnation is refused.
	a3 := &cmember{id: "a3", instance: "ia", topics: []string{"t"}}
	if r := h.cgHeartbeat("g", a3, true); r.ErrorCode != kerrUnreleasedInstanceID {
		t.Fatalf("second incarnation: error %d, want UNRELEASED_INSTANCE_ID", r.ErrorCode)
	}

	// b stops heartbeating: after the session timeout a2 gets everything.
	members = []*cmember{a2, b}
	for range 12 {
		h.clock.Advance(time.Second)
		h.cgHeartbeat("g", a2, true)
	}
	b.gone = true
	settle(t, h, "g", members, 4)
	if a2.owned.size() != 4 {
		t.Fatalf("a2 owns %d partitions after b expired, want 4", a2.owned.size())
	}
	if r := h.cgHeartbeat("g", b, true); r.ErrorCode != kerrUnknownMemberID {
		t.Fatalf("expired member heartbeat: error %d, want UNKNOWN_MEMBER_ID", r.ErrorCode)
	}
}

// TestGroupTimeoutsPerGroup: a group's own session timeout and heartbeat interval
// (its GROUP configs) apply to its members only; other groups keep the coordinator's.
func TestGroupTimeoutsPerGroup(t *testing.T) {
	ft := &fakeTopics{parts: map[string]int32{}}
	h := &harness{t: t, log: newMemLog(), cfg: testConfig(), clock: newFakeClock(), topics: ft.snapshot}
	h.cfg.ConsumerSessionTimeout, h.cfg.ConsumerHeartbeatInterval = 10*time.Second, time.Second
	h.cfg.ShareSessionTimeout, h.cfg.ShareHeartbeatInterval = 10*time.Second, time.Second
	h.timeouts = func(group string) Timeouts {
		if group == "short" || group == "share-short" {
			return Timeouts{ConsumerSession: 3 * time.Second, ConsumerHeartbeat: 500 * time.Millisecond,
				ShareSession: 3 * time.Second, ShareHeartbeat: 400 * time.Millisecond}
		}
		return Timeouts{}
	}
	h.start()
	ft.set("t", 2)
	for _, c := range []struct {
		group string
		want  int32
	}{{"short", 500}, {"long", 1000}} {
		if r := h.cgHeartbeat(c.group, &cmember{id: c.group, topics: []string{"t"}}, true); r.ErrorCode != 0 || r.HeartbeatIntervalMillis != c.want {
			t.Fatalf("consumer group %s: error %d, heartbeat interval %d ms, want %d", c.group, r.ErrorCode, r.HeartbeatIntervalMillis, c.want)
		}
	}
	for _, c := range []struct {
		group string
		want  int32
	}{{"share-short", 400}, {"share-long", 1000}} {
		if r := h.shHeartbeat(c.group, &smember{id: c.group, topics: []string{"t"}}); r.ErrorCode != 0 || r.HeartbeatIntervalMillis != c.want {
			t.Fatalf("share group %s: error %d, heartbeat interval %d ms, want %d", c.group, r.ErrorCode, r.HeartbeatIntervalMillis, c.want)
		}
	}

	h.clock.Advance(4 * time.Second) // past the short groups' 3 s sessions, within the others' 10 s
	for _, c := range []struct {
		group string
		want  int
	}{{"short", 0}, {"long", 1}} {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{c.group}
		if n := len((<-h.c.ConsumerGroupDescribe(req)).Groups[0].Members); n != c.want {
			t.Errorf("consumer group %s has %d members 4 s after its member's last heartbeat, want %d", c.group, n, c.want)
		}
	}
	for _, c := range []struct {
		group string
		want  int
	}{{"share-short", 0}, {"share-long", 1}} {
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.GroupIDs = []string{c.group}
		if n := len((<-h.c.ShareGroupDescribe(req)).Groups[0].Members); n != c.want {
			t.Errorf("share group %s has %d members 4 s after its member's last heartbeat, want %d", c.group, n, c.want)
		}
	}
}

func TestConsumerGroupRegexAndNewTopics(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.set("orders-1", 2)
	ft.set("other", 2)
	m := &cmember{id: "m", regex: "orders-.*"}
	settle(t, h, "g", []*cmember{m}, 2)
	ft.set("orders-2", 3) // created later: assigned at the next heartbeat
	settle(t, h, "g", []*cmember{m}, 5)
	if m.owned[topicIDOf("other")] != nil {
		t.Fatal("a topic the regex does not match was assigned")
	}
	bad := &cmember{id: "x", regex: "("}
	if r := h.cgHeartbeat("g", bad, true); r.ErrorCode != kerrInvalidRegularExpression {
		t.Fatalf("bad regex: error %d", r.ErrorCode)
	}
}

// TestConsumerGroupEpochFencing: a heartbeat at a newer epoch than the member's is
// fenced. A commit follows Kafka 4.3 (KIP-1251, ConsumerGroup.validateOffsetCommit):
// at the member epoch any partition; at an older epoch only partitions the member has
// owned since that epoch or before, and one partition that fails (assigned later, or
// not the member's) fails the whole request with STALE_MEMBER_EPOCH, nothing
// committed; a newer epoch is refused whole.
func TestConsumerGroupEpochFencing(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.set("t", 4)
	a := &cmember{id: "a", topics: []string{"t"}}
	settle(t, h, "g", []*cmember{a}, 4)
	stale := *a
	stale.epoch = a.epoch + 5
	if r := h.cgHeartbeat("g", &stale, false); r.ErrorCode != kerrFencedMemberEpoch {
		t.Fatalf("future epoch: error %d, want FENCED_MEMBER_EPOCH", r.ErrorCode)
	}
	e1 := a.epoch // a holds all four partitions since e1

	b := &cmember{id: "b", topics: []string{"t"}}
	members := []*cmember{a, b}
	settle(t, h, "g", members, 4)
	e2 := a.epoch
	tid := topicIDOf("t")
	kept, taken := a.owned[tid], b.owned[tid] // kept since e1; b's assigned at e2
	if e2 <= e1 || len(kept) != 2 || len(taken) != 2 || b.epoch != e2 {
		t.Fatalf("after b joined: a at %d owns %v, b at %d owns %v (a was at %d)", a.epoch, kept, b.epoch, taken, e1)
	}
	offset := int64(0) // each commit its own offset
	commit := func(member string, epoch int32, ps ...int32) []int16 {
		t.Helper()
		offset++
		return commitAt(t, h, member, epoch, offset, ps...)
	}
	want := func(what string, got []int16, code int16) {
		t.Helper()
		wantCodes(t, what, got, code)
	}
	committed := func(p int32) int64 { return h.c.CommittedOffsets("g")[TopicPartition{"t", p}].Offset }

	want("a at its epoch, its partitions", commit("a", e2, kept...), 0)
	want("a at its epoch, b's partition (not checked by partition)", commit("a", e2, taken[0]), 0)
	want("a at an older epoch, partitions held since then", commit("a", e1, kept...), 0)
	if got := committed(kept[1]); got != offset {
		t.Fatalf("offset of partition %d after a's commit at epoch %d: %d, want %d", kept[1], e1, got, offset)
	}
	before := committed(kept[0])
	want("a at an older epoch, one partition held and one of b's", commit("a", e1, kept[0], taken[0]), kerrStaleMemberEpoch)
	if got := committed(kept[0]); got != before {
		t.Fatalf("a refused commit moved partition %d's offset from %d to %d", kept[0], before, got)
	}
	want("a at an epoch older than its partitions' assignment", commit("a", e1-1, kept[0]), kerrStaleMemberEpoch)
	want("a at a newer epoch", commit("a", e2+1, kept...), kerrStaleMemberEpoch)
	want("b at an epoch older than its partitions' assignment", commit("b", e1, taken...), kerrStaleMemberEpoch)
	want("a member unknown", commit("ghost", e1, kept[0]), kerrUnknownMemberID)
	if code := commit("a", -1, kept[0])[0]; code != kerrStaleMemberEpoch {
		t.Fatalf("commit from outside a non-empty group with a's id: error %d, want STALE_MEMBER_EPOCH", code)
	}

	// b leaves: a gets b's partitions back at a later epoch. At e2 it may commit what it
	// has held since e1, not what it got at e3.
	b.epoch = leaveEpoch
	if r := h.cgHeartbeat("g", b, false); r.ErrorCode != 0 {
		t.Fatalf("b leaves: error %d", r.ErrorCode)
	}
	b.gone = true
	settle(t, h, "g", members, 4)
	e3 := a.epoch
	if e3 <= e2 {
		t.Fatalf("a's epoch after b left: %d, want above %d", e3, e2)
	}
	want("a at e2, partitions held since e1", commit("a", e2, kept...), 0)
	want("a at e2, a partition assigned at e3", commit("a", e2, taken[0]), kerrStaleMemberEpoch)
	want("a at e3, every partition", commit("a", e3, append(slices.Clone(kept), taken...)...), 0)
	want("a at e2, with a partition assigned at e3", commit("a", e2, kept[0], taken[1]), kerrStaleMemberEpoch)
}

func TestConsumerGroupRangeAndRacks(t *testing.T) {
	topics := &Topics{ByName: map[string]TopicInfo{}, ByID: map[TopicID]string{}}
	for _, name := range []string{"x", "y"} {
		info := TopicInfo{Name: name, ID: topicIDOf(name), Partitions: 5}
		topics.ByName[name] = info
		topics.Names = append(topics.Names, name)
	}
	members := []*assignMember{
		{id: "a", topics: map[string]bool{"x": true, "y": true}},
		{id: "b", topics: map[string]bool{"x": true, "y": true}},
	}
	assign(assignorRange, members, topics)
	if got := members[0].assignment[topicIDOf("x")]; !slices.Equal(got, []int32{0, 1, 2}) {
		t.Fatalf("range: a gets %v of x, want [0 1 2]", got)
	}
	if !slices.Equal(members[0].assignment[topicIDOf("x")], members[0].assignment[topicIDOf("y")]) {
		t.Fatal("range: topics with equal partition counts are not co-partitioned")
	}

	// Racks: each partition's replicas live in one rack; members prefer their rack.
	info := topics.ByName["x"]
	info.Racks = [][]string{{"r1"}, {"r2"}, {"r1"}, {"r2"}, {"r1"}}
	topics.ByName["x"] = info
	rack := []*assignMember{
		{id: "a", rack: "r1", topics: map[string]bool{"x": true}},
		{id: "b", rack: "r2", topics: map[string]bool{"x": true}},
	}
	assign(assignorUniform, rack, topics)
	matched := 0
	for _, m := range rack {
		for _, p := range m.assignment[topicIDOf("x")] {
			if slices.Contains(info.Racks[p], m.rack) {
				matched++
			}
		}
	}
	if matched < 4 {
		t.Fatalf("uniform with racks: %d of 5 partitions on a member of their rack, want at least 4 (%v / %v)", matched, rack[0].assignment, rack[1].assignment)
	}
}

func TestConsumerGroupMigration(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.set("t", 2)
	// A classic group that only holds offsets is taken over by a consumer member.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version = 9
	commit.Group = "g"
	commit.Generation = -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Offset = 42
	rt.Partitions = append(rt.Partitions, rp)
	commit.Topics = append(commit.Topics, rt)
	if code := recv(t, h.c.OffsetCommit(commit)).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("simple commit: %d", code)
	}
	m := &cmember{id: "m", topics: []string{"t"}}
	settle(t, h, "g", []*cmember{m}, 2)
	m.epoch = leaveEpoch
	h.cgHeartbeat("g", m, false)
	// Empty again: classic members take it back, offsets kept.
	if r := recv(t, h.join("g", joinOpts{})); r.ErrorCode != kerrMemberIDRequired {
		t.Fatalf("classic join into an empty consumer group: error %d", r.ErrorCode)
	}
	if o := h.c.CommittedOffsets("g")[TopicPartition{"t", 0}]; o.Offset != 42 {
		t.Fatalf("offset after migration: %d, want 42", o.Offset)
	}
	h.start()
	if o := h.c.CommittedOffsets("g")[TopicPartition{"t", 0}]; o.Offset != 42 {
		t.Fatalf("offset after migration and restart: %d, want 42", o.Offset)
	}
}

// TestConsumerGroupMigrationWhateverPolicy: an empty group changes protocol in both
// directions, its offsets kept, whatever group.consumer.migration.policy says (as in
// Kafka, where the policy only governs converting a group that has members:
// consumer_classic_test.go).
func TestConsumerGroupMigrationWhateverPolicy(t *testing.T) {
	for _, policy := range []string{"disabled", "upgrade", "downgrade", "bidirectional"} {
		t.Run(policy, func(t *testing.T) {
			h, ft := newConsumerHarness(t, func(c *Config) { c.MigrationPolicy = policy })
			ft.set("t", 2)
			tp := TopicPartition{"t", 0}
			ids, _, gen := h.stable("g", joinOpts{})
			if code := commitErrors(h.commit("g", ids[0], gen, map[TopicPartition]int64{tp: 42}))[tp]; code != 0 {
				t.Fatalf("classic commit: error %d", code)
			}
			m := &cmember{id: "m", topics: []string{"t"}}
			leave := kmsg.NewPtrLeaveGroupRequest()
			leave.Version = 0
			leave.Group, leave.MemberID = "g", ids[0]
			if r := h.c.LeaveGroup(leave); r.ErrorCode != 0 {
				t.Fatalf("classic leave: error %d", r.ErrorCode)
			}
			// Empty: a consumer member takes it over.
			settle(t, h, "g", []*cmember{m}, 2)
			if o := h.c.CommittedOffsets("g")[tp]; o.Offset != 42 {
				t.Fatalf("offset after upgrade: %d, want 42", o.Offset)
			}
			m.epoch = leaveEpoch
			if code := h.cgHeartbeat("g", m, false).ErrorCode; code != 0 {
				t.Fatalf("consumer leave: error %d", code)
			}
			// Empty again: a classic member takes it back.
			if r := recv(t, h.join("g", joinOpts{})); r.ErrorCode != kerrMemberIDRequired {
				t.Fatalf("classic join into an empty consumer group: error %d, want %d", r.ErrorCode, kerrMemberIDRequired)
			}
			if o := h.c.CommittedOffsets("g")[tp]; o.Offset != 42 {
				t.Fatalf("offset after downgrade: %d, want 42", o.Offset)
			}
			h.start()
			if o := h.c.CommittedOffsets("g")[tp]; o.Offset != 42 {
				t.Fatalf("offset after both migrations and a restart: %d, want 42", o.Offset)
			}
		})
	}
}
