package group

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// csim is a simulated classic member that speaks the consumer protocol's embedded
// subscription: cooperative (it reports the partitions it owns when it joins again and
// keeps them meanwhile) or eager (it gives them all up first).
type csim struct {
	id     string
	gen    int32
	eager  bool
	topics []string
	owned  map[string][]int32 // topic -> sorted partitions
}

func (s *csim) meta() []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 1
	m.Topics = s.topics
	for _, t := range slices.Sorted(maps.Keys(s.owned)) {
		op := kmsg.NewConsumerMemberMetadataOwnedPartition()
		op.Topic, op.Partitions = t, s.owned[t]
		m.OwnedPartitions = append(m.OwnedPartitions, op)
	}
	return m.AppendTo(nil)
}

// classicJoin sends the member's JoinGroup (with the KIP-394 handshake when it has no
// id yet) and returns the response.
func (h *harness) classicJoin(group string, s *csim) *kmsg.JoinGroupResponse {
	h.t.Helper()
	if s.eager {
		s.owned = map[string][]int32{}
	}
	o := joinOpts{member: s.id, session: 10 * time.Second, protocols: []kmsg.JoinGroupRequestProtocol{proto("cooperative-sticky", s.meta())}}
	if s.id == "" {
		s.id = h.newMemberID(group, o)
		o.member = s.id
	}
	r := recv(h.t, h.join(group, o))
	if r.ErrorCode == 0 {
		s.gen = r.Generation
	}
	return r
}

// joined waits for a classic JoinGroup's answer, moving the clock past the initial
// rebalance delay meanwhile.
func (h *harness) joined(ch <-chan *kmsg.JoinGroupResponse) *kmsg.JoinGroupResponse {
	h.t.Helper()
	for range 20 {
		select {
		case r := <-ch:
			return r
		default:
			h.clock.Advance(h.cfg.InitialRebalanceDelay + time.Millisecond)
		}
	}
	return recv(h.t, ch)
}

// classicSync sends the member's SyncGroup (as a follower) and takes the assignment.
func (h *harness) classicSync(group string, s *csim) *kmsg.SyncGroupResponse {
	h.t.Helper()
	r := recv(h.t, h.sync(group, s.id, s.gen, nil))
	if r.ErrorCode != 0 {
		return r
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(r.MemberAssignment); err != nil {
		h.t.Fatalf("member %s: assignment %x: %v", s.id, r.MemberAssignment, err)
	}
	s.owned = map[string][]int32{}
	for _, at := range a.Topics {
		s.owned[at.Topic] = slices.Sorted(slices.Values(at.Partitions))
	}
	return r
}

// classicStep heartbeats; asked to, the member joins and syncs again.
func (h *harness) classicStep(group string, s *csim) {
	h.t.Helper()
	switch code := h.heartbeat(group, s.id, s.gen, ""); code {
	case 0:
	case kerrRebalanceInProgress, kerrIllegalGeneration:
		if r := h.classicJoin(group, s); r.ErrorCode != 0 {
			h.t.Fatalf("member %s: join: error %d", s.id, r.ErrorCode)
		}
		if r := h.classicSync(group, s); r.ErrorCode != 0 && r.ErrorCode != kerrRebalanceInProgress {
			h.t.Fatalf("member %s: sync: error %d", s.id, r.ErrorCode)
		}
	default:
		h.t.Fatalf("member %s: heartbeat: error %d", s.id, code)
	}
}

// classicPair makes a classic group of two cooperative members on topic t (four
// partitions: a gets 0–1, b 2–3) through the classic protocol, a leading.
func classicPair(t *testing.T, h *harness, group string) (*csim, *csim) {
	t.Helper()
	a, b := &csim{topics: []string{"t"}}, &csim{topics: []string{"t"}}
	o := joinOpts{session: 10 * time.Second}
	for _, s := range []*csim{a, b} {
		s.id = h.newMemberID(group, o)
	}
	ja := h.join(group, joinOpts{member: a.id, session: 10 * time.Second, protocols: []kmsg.JoinGroupRequestProtocol{proto("cooperative-sticky", a.meta())}})
	jb := h.join(group, joinOpts{member: b.id, session: 10 * time.Second, protocols: []kmsg.JoinGroupRequestProtocol{proto("cooperative-sticky", b.meta())}})
	ra, rb := h.joined(ja), h.joined(jb)
	if ra.ErrorCode != 0 || rb.ErrorCode != 0 || ra.LeaderID != a.id {
		t.Fatalf("classic joins: %d %d, leader %q (want %q)", ra.ErrorCode, rb.ErrorCode, ra.LeaderID, a.id)
	}
	a.gen, b.gen = ra.Generation, rb.Generation
	assign := func(ps ...int32) []byte {
		m := kmsg.NewConsumerMemberAssignment()
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = "t", ps
		m.Topics = append(m.Topics, at)
		return m.AppendTo(nil)
	}
	sb := h.sync(group, b.id, b.gen, nil)
	sa := h.sync(group, a.id, a.gen, map[string][]byte{a.id: assign(0, 1), b.id: assign(2, 3)})
	for _, x := range []struct {
		s *csim
		r *kmsg.SyncGroupResponse
	}{{a, recv(t, sa)}, {b, recv(t, sb)}} {
		if x.r.ErrorCode != 0 {
			t.Fatalf("classic sync of %s: error %d", x.s.id, x.r.ErrorCode)
		}
		var m kmsg.ConsumerMemberAssignment
		if err := m.ReadFrom(x.r.MemberAssignment); err != nil {
			t.Fatal(err)
		}
		x.s.owned = map[string][]int32{"t": m.Topics[0].Partitions}
	}
	return a, b
}

// checkMixedExclusive fails if two members own a partition of t.
func checkMixedExclusive(t *testing.T, consumers []*cmember, classics []*csim) int {
	t.Helper()
	owner := map[int32]string{}
	take := func(who string, p int32) {
		if o, ok := owner[p]; ok {
			t.Fatalf("partition %d owned by %s and %s", p, o, who)
		}
		owner[p] = who
	}
	for _, m := range consumers {
		if !m.gone {
			for _, p := range m.owned[topicIDOf("t")] {
				take(m.id, p)
			}
		}
	}
	for _, s := range classics {
		for _, p := range s.owned["t"] {
			take(s.id, p)
		}
	}
	return len(owner)
}

// settleMixed runs consumer heartbeats and classic heartbeats (joining and syncing
// again when asked) until the group is Stable with all partitions owned, checking
// after every step that no partition has two owners.
func settleMixed(t *testing.T, h *harness, group string, consumers []*cmember, classics []*csim, partitions int) {
	t.Helper()
	for round := range 50 {
		for _, m := range consumers {
			if r := h.cgHeartbeat(group, m, true); r.ErrorCode != 0 {
				t.Fatalf("round %d: heartbeat of %s: error %d", round, m.id, r.ErrorCode)
			}
			checkMixedExclusive(t, consumers, classics)
		}
		for _, s := range classics {
			h.classicStep(group, s)
			checkMixedExclusive(t, consumers, classics)
		}
		if checkMixedExclusive(t, consumers, classics) == partitions && describeState(t, h, group) == "Stable" {
			return
		}
		passAssignmentInterval(t, h, group)
	}
	t.Fatalf("group %s did not settle", group)
}

func memberTypesOf(t *testing.T, h *harness, group string) map[string]int8 {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Version = 1 // MemberType
	req.Groups = []string{group}
	resp := <-h.c.ConsumerGroupDescribe(req)
	if resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("describe %s: error %d", group, resp.Groups[0].ErrorCode)
	}
	out := map[string]int8{}
	for _, m := range resp.Groups[0].Members {
		out[m.MemberID] = m.MemberType
	}
	return out
}

// TestClassicGroupUpgradeOnline: a consumer member joining a classic group with
// members converts it when group.consumer.migration.policy allows an upgrade; the
// classic members reconcile through the classic protocol, no partition ever owned
// twice, the offsets kept; a restart keeps the classic members serving.
func TestClassicGroupUpgradeOnline(t *testing.T) {
	for _, policy := range []string{"bidirectional", "upgrade", "downgrade", "disabled"} {
		t.Run(policy, func(t *testing.T) {
			h, ft := newConsumerHarness(t, func(c *Config) { c.MigrationPolicy = policy })
			ft.set("t", 4)
			a, b := classicPair(t, h, "g")
			tp := TopicPartition{"t", 0}
			if code := commitErrors(h.commit("g", a.id, a.gen, map[TopicPartition]int64{tp: 7}))[tp]; code != 0 {
				t.Fatalf("classic commit: error %d", code)
			}
			n := &cmember{id: "n", topics: []string{"t"}}
			r := h.cgHeartbeat("g", n, true)
			if policy == "downgrade" || policy == "disabled" {
				if r.ErrorCode != kerrGroupIDNotFound {
					t.Fatalf("consumer member into a classic group with members under %s: error %d, want %d", policy, r.ErrorCode, kerrGroupIDNotFound)
				}
				if code := h.heartbeat("g", a.id, a.gen, ""); code != 0 {
					t.Fatalf("classic heartbeat after the refused upgrade: error %d", code)
				}
				return
			}
			if r.ErrorCode != 0 {
				t.Fatalf("consumer member into a classic group with members: error %d", r.ErrorCode)
			}
			if got, want := memberTypesOf(t, h, "g"), map[string]int8{a.id: 0, b.id: 0, "n": 1}; !maps.Equal(got, want) {
				t.Fatalf("member types: %v, want %v", got, want)
			}
			// The classic members are behind the new epoch: they are asked to join again.
			if code := h.heartbeat("g", a.id, a.gen, ""); code != kerrRebalanceInProgress {
				t.Fatalf("classic heartbeat after the upgrade: error %d, want REBALANCE_IN_PROGRESS", code)
			}
			consumers, classics := []*cmember{n}, []*csim{a, b}
			settleMixed(t, h, "g", consumers, classics, 4)
			for _, s := range classics {
				if len(s.owned["t"]) == 0 {
					t.Fatalf("classic member %s owns nothing after settling", s.id)
				}
			}
			if o := h.c.CommittedOffsets("g")[tp]; o.Offset != 7 {
				t.Fatalf("offset after the upgrade: %d, want 7", o.Offset)
			}
			// A classic member commits at its generation (the member epoch), with
			// OffsetCommit below v9; at an older generation only the partitions it has
			// held since then (KIP-1251, as for a consumer-protocol member); a newer
			// generation, or a partition that fails, is ILLEGAL_GENERATION.
			if code := commitErrors(h.commit("g", a.id, a.gen, map[TopicPartition]int64{tp: 9}))[tp]; code != 0 {
				t.Fatalf("classic commit into the consumer group: error %d", code)
			}
			am := memberSnapshot(t, h, "g", a.id)
			tid := topicIDOf("t")
			var held, other TopicPartition
			var heldSince int32
			for p := range int32(4) {
				if e, ok := am.assignmentEpoch(tid, p); ok {
					held, heldSince = TopicPartition{"t", p}, e
				} else {
					other = TopicPartition{"t", p}
				}
			}
			if heldSince >= a.gen {
				t.Fatalf("classic member %s at generation %d holds %v since %d: no older generation to commit at", a.id, a.gen, held, heldSince)
			}
			if code := commitErrors(h.commit("g", a.id, heldSince, map[TopicPartition]int64{held: 10}))[held]; code != 0 {
				t.Fatalf("classic commit at an old generation of a partition held since then: error %d", code)
			}
			for _, c := range []struct {
				gen int32
				tp  TopicPartition
			}{{heldSince - 1, held}, {heldSince, other}, {a.gen + 1, held}} {
				if code := commitErrors(h.commit("g", a.id, c.gen, map[TopicPartition]int64{c.tp: 11}))[c.tp]; code != kerrIllegalGeneration {
					t.Fatalf("classic commit at generation %d of %v (held since %d, member at %d): error %d, want ILLEGAL_GENERATION", c.gen, c.tp, heldSince, a.gen, code)
				}
			}

			// After a restart the classic members go on at their generation.
			h.start()
			for _, s := range classics {
				if code := h.heartbeat("g", s.id, s.gen, ""); code != 0 {
					t.Fatalf("classic heartbeat of %s after a restart: error %d", s.id, code)
				}
			}
			if got := memberTypesOf(t, h, "g"); got[a.id] != 0 || got[b.id] != 0 || got["n"] != 1 {
				t.Fatalf("member types after a restart: %v", got)
			}
			// A new consumer member: the classic members give up partitions for it.
			n2 := &cmember{id: "n2", topics: []string{"t"}}
			consumers = append(consumers, n2)
			settleMixed(t, h, "g", consumers, classics, 4)
			for _, m := range consumers {
				if m.owned.size() != 1 {
					t.Fatalf("consumer member %s owns %d partitions, want 1", m.id, m.owned.size())
				}
			}
		})
	}
}

// mixedGroup makes group g of two classic members a and b (classicPair) and the
// consumer member n on topic t's four partitions, settled, then restarts the
// coordinator under the migration policy given.
func mixedGroup(t *testing.T, n *cmember, policy string) (*harness, *csim, *csim) {
	t.Helper()
	h, ft := newConsumerHarness(t, func(c *Config) {
		c.MigrationPolicy = "bidirectional"
	})
	ft.set("t", 4)
	a, b := classicPair(t, h, "g")
	if r := h.cgHeartbeat("g", n, true); r.ErrorCode != 0 {
		t.Fatalf("upgrade: error %d", r.ErrorCode)
	}
	settleMixed(t, h, "g", []*cmember{n}, []*csim{a, b}, 4)
	h.cfg.MigrationPolicy = policy
	h.start() // the policy is read at start
	return h, a, b
}

// TestConsumerGroupDowngradeOnline: once the last consumer member leaves and only
// classic members are left, the group goes back to the classic protocol when the
// policy allows a downgrade, and rebalances as a classic group; otherwise it stays a
// consumer group of classic members.
func TestConsumerGroupDowngradeOnline(t *testing.T) {
	for _, policy := range []string{"bidirectional", "downgrade", "upgrade"} {
		t.Run(policy, func(t *testing.T) {
			n := &cmember{id: "n", topics: []string{"t"}}
			h, a, b := mixedGroup(t, n, policy)
			n.epoch = leaveEpoch
			if r := h.cgHeartbeat("g", n, false); r.ErrorCode != 0 {
				t.Fatalf("consumer member leaving: error %d", r.ErrorCode)
			}
			n.gone, n.owned = true, nil
			if policy == "upgrade" {
				if got := memberTypesOf(t, h, "g"); len(got) != 2 || got[a.id] != 0 || got[b.id] != 0 {
					t.Fatalf("members after the leave under %s: %v, want the two classic members", policy, got)
				}
				settleMixed(t, h, "g", nil, []*csim{a, b}, 4)
				return
			}
			d := h.describe("g")
			if d.ErrorCode != 0 || d.State != "PreparingRebalance" || len(d.Members) != 2 || d.ProtocolType != "consumer" {
				t.Fatalf("group after the downgrade: %+v", d)
			}
			// A classic rebalance: both join, the leader assigns.
			for _, s := range []*csim{a, b} {
				if code := h.heartbeat("g", s.id, s.gen, ""); code != kerrRebalanceInProgress && code != kerrIllegalGeneration {
					t.Fatalf("classic heartbeat after the downgrade: error %d", code)
				}
			}
			ja := h.join("g", joinOpts{member: a.id, session: 10 * time.Second, protocols: []kmsg.JoinGroupRequestProtocol{proto("cooperative-sticky", a.meta())}})
			jb := h.join("g", joinOpts{member: b.id, session: 10 * time.Second, protocols: []kmsg.JoinGroupRequestProtocol{proto("cooperative-sticky", b.meta())}})
			ra, rb := h.joined(ja), h.joined(jb)
			if ra.ErrorCode != 0 || rb.ErrorCode != 0 || ra.Generation != rb.Generation || ra.LeaderID == "" || len(ra.Members)+len(rb.Members) != 2 {
				t.Fatalf("classic rebalance after the downgrade: %+v / %+v", ra, rb)
			}
			if got := fmt.Sprint(h.describe("g").State); got != "CompletingRebalance" {
				t.Fatalf("state after the joins: %s", got)
			}
		})
	}
}

// TestConsumerGroupDowngradeByStaticReplacement: a static member of the consumer
// protocol restarted with the classic protocol (same group.instance.id) replaces its
// earlier incarnation; when that was the group's last member of the consumer protocol
// and the policy allows a downgrade, the group goes back to the classic protocol with
// the new member in it, and rebalances as a classic group, as in Kafka. Otherwise it
// stays a consumer group of classic members.
func TestConsumerGroupDowngradeByStaticReplacement(t *testing.T) {
	for _, policy := range []string{"bidirectional", "downgrade", "upgrade"} {
		t.Run(policy, func(t *testing.T) {
			n := &cmember{id: "n", instance: "n-static", topics: []string{"t"}}
			h, a, b := mixedGroup(t, n, policy)
			// n restarts as a classic member under its instance id.
			s := &csim{topics: []string{"t"}, owned: map[string][]int32{"t": slices.Clone(n.owned[topicIDOf("t")])}}
			r := recv(t, h.join("g", joinOpts{instance: "n-static", session: 10 * time.Second,
				protocols: []kmsg.JoinGroupRequestProtocol{proto("cooperative-sticky", s.meta())}}))
			if r.ErrorCode != 0 || r.MemberID == "" || r.MemberID == n.id {
				t.Fatalf("static classic join replacing %s: %+v", n.id, r)
			}
			s.id, s.gen = r.MemberID, r.Generation
			n.gone, n.owned = true, nil
			if policy == "upgrade" {
				if got := memberTypesOf(t, h, "g"); len(got) != 3 || got[a.id] != 0 || got[b.id] != 0 || got[s.id] != 0 {
					t.Fatalf("members after the replacement under %s: %v, want three classic members", policy, got)
				}
				settleMixed(t, h, "g", nil, []*csim{a, b, s}, 4)
				return
			}
			d := h.describe("g")
			if d.ErrorCode != 0 || d.State != "PreparingRebalance" || len(d.Members) != 3 || d.ProtocolType != "consumer" {
				t.Fatalf("group after the static replacement: %+v", d)
			}
			if sr := h.classicSync("g", s); sr.ErrorCode != kerrRebalanceInProgress {
				t.Fatalf("the new member's SyncGroup after the downgrade: error %d, want REBALANCE_IN_PROGRESS", sr.ErrorCode)
			}
			h.start() // what was written is a classic group of the three
			if d := h.describe("g"); d.ErrorCode != 0 || len(d.Members) != 3 || d.ProtocolType != "consumer" {
				t.Fatalf("group loaded after the downgrade: %+v", d)
			}
			// A classic rebalance of the three, the static member keeping its instance id.
			var chs []<-chan *kmsg.JoinGroupResponse
			for _, c := range []*csim{a, b, s} {
				o := joinOpts{member: c.id, session: 10 * time.Second, protocols: []kmsg.JoinGroupRequestProtocol{proto("cooperative-sticky", c.meta())}}
				if c == s {
					o.instance = "n-static"
				}
				chs = append(chs, h.join("g", o))
			}
			gens := map[int32]bool{}
			leaders := 0
			for i, ch := range chs {
				jr := h.joined(ch)
				if jr.ErrorCode != 0 {
					t.Fatalf("classic join %d after the downgrade: error %d", i, jr.ErrorCode)
				}
				gens[jr.Generation] = true
				if len(jr.Members) > 0 {
					leaders++
				}
			}
			if len(gens) != 1 || leaders != 1 {
				t.Fatalf("classic rebalance after the downgrade: generations %v, %d leaders", gens, leaders)
			}
			if got := fmt.Sprint(h.describe("g").State); got != "CompletingRebalance" {
				t.Fatalf("state after the joins: %s", got)
			}
		})
	}
}

// TestClassicMemberInConsumerGroupExpires: a classic member that stops heartbeating
// is removed after its own session timeout; the partitions go to the others.
func TestClassicMemberInConsumerGroupExpires(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.set("t", 4)
	a, b := classicPair(t, h, "g")
	n := &cmember{id: "n", topics: []string{"t"}}
	if r := h.cgHeartbeat("g", n, true); r.ErrorCode != 0 {
		t.Fatalf("upgrade: error %d", r.ErrorCode)
	}
	settleMixed(t, h, "g", []*cmember{n}, []*csim{a, b}, 4)
	// b goes silent; a and n go on heartbeating past b's 10 s session.
	for range 12 {
		h.clock.Advance(time.Second)
		h.classicStep("g", a)
		h.cgHeartbeat("g", n, true)
	}
	if got := memberTypesOf(t, h, "g"); len(got) != 2 || got[a.id] != 0 || got["n"] != 1 {
		t.Fatalf("members after %s's session expired: %v, want %s (classic) and n", b.id, got, a.id)
	}
	if code := h.heartbeat("g", b.id, b.gen, ""); code != kerrUnknownMemberID {
		t.Fatalf("heartbeat of the expired classic member: error %d, want UNKNOWN_MEMBER_ID", code)
	}
	settleMixed(t, h, "g", []*cmember{n}, []*csim{a}, 4)
}

// TestClassicRequestsToConsumerGroup: the classic protocol's refusals in a consumer
// group, as Kafka's coordinator gives them.
func TestClassicRequestsToConsumerGroup(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.set("t", 4)
	n := &cmember{id: "n", topics: []string{"t"}}
	settle(t, h, "g", []*cmember{n}, 4)
	// Another protocol type, or no protocol, is INCONSISTENT_GROUP_PROTOCOL.
	if r := recv(t, h.join("g", joinOpts{member: "x", protocolType: "connect"})); r.ErrorCode != kerrInconsistentGroupProtocol {
		t.Fatalf("join with protocol type connect: error %d", r.ErrorCode)
	}
	s := &csim{topics: []string{"t"}}
	if r := h.classicJoin("g", s); r.ErrorCode != 0 || r.ProtocolType == nil || *r.ProtocolType != "consumer" || r.LeaderID != "" {
		t.Fatalf("classic join into a consumer group: %+v", r)
	}
	// A second classic member must share a protocol with the first.
	if r := recv(t, h.join("g", joinOpts{member: "y", protocols: []kmsg.JoinGroupRequestProtocol{proto("range", consumerMeta("t"))}})); r.ErrorCode != kerrInconsistentGroupProtocol {
		t.Fatalf("classic join without a shared protocol: error %d", r.ErrorCode)
	}
	if code := h.heartbeat("g", s.id, s.gen+1, ""); code != kerrIllegalGeneration {
		t.Fatalf("heartbeat at another generation: error %d", code)
	}
	if code := h.heartbeat("g", "nobody", s.gen, ""); code != kerrUnknownMemberID {
		t.Fatalf("heartbeat of an unknown member: error %d", code)
	}
	if code := h.heartbeat("g", "n", 1, ""); code != kerrUnknownMemberID {
		t.Fatalf("classic heartbeat of a consumer protocol member: error %d", code)
	}
	if r := recv(t, h.sync("g", s.id, s.gen+1, nil)); r.ErrorCode != kerrIllegalGeneration {
		t.Fatalf("sync at another generation: error %d", r.ErrorCode)
	}
	settleMixed(t, h, "g", []*cmember{n}, []*csim{s}, 4)
	// LeaveGroup of a classic member is answered once its removal is written.
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 3
	leave.Group = "g"
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = s.id
	leave.Members = append(leave.Members, lm)
	if r := h.c.LeaveGroup(leave); r.ErrorCode != 0 || r.Members[0].ErrorCode != 0 {
		t.Fatalf("classic leave: %+v", r)
	}
	if got := memberTypesOf(t, h, "g"); len(got) != 1 || got["n"] != 1 {
		t.Fatalf("members after the classic leave: %v", got)
	}
	settle(t, h, "g", []*cmember{n}, 4)
}

// TestOnlineMigrationWriteFails: a conversion whose records cannot be written (a full
// disk) changes nothing: the partition is loaded again from its log, where the group
// is what it was — the classic group with its two members and their assignment before
// a failed upgrade, the consumer group with its three members before a failed
// downgrade — and the conversion succeeds once the log takes writes again.
func TestOnlineMigrationWriteFails(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.set("t", 4)
	a, b := classicPair(t, h, "g")
	full := errors.New("no space left on device")
	loaded := func(what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for h.describe("g").ErrorCode != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("the partition was not loaded again after the failed %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}

	h.log.setAppendErr(full)
	n := &cmember{id: "n", topics: []string{"t"}}
	if r := h.cgHeartbeat("g", n, true); r.ErrorCode == 0 {
		t.Fatal("the upgrade succeeded though its records could not be written")
	}
	h.log.setAppendErr(nil)
	loaded("upgrade")
	if d := h.describe("g"); d.State != "Stable" || len(d.Members) != 2 {
		t.Fatalf("classic group after the failed upgrade: %+v", d)
	}
	for _, s := range []*csim{a, b} {
		if code := h.heartbeat("g", s.id, s.gen, ""); code != 0 {
			t.Fatalf("classic heartbeat of %s after the failed upgrade: error %d", s.id, code)
		}
	}
	n.epoch = 0
	if r := h.cgHeartbeat("g", n, true); r.ErrorCode != 0 {
		t.Fatalf("upgrade once the log takes writes: error %d", r.ErrorCode)
	}
	settleMixed(t, h, "g", []*cmember{n}, []*csim{a, b}, 4)

	h.log.setAppendErr(full)
	n.epoch = leaveEpoch
	if r := h.cgHeartbeat("g", n, false); r.ErrorCode == 0 {
		t.Fatal("the downgrade succeeded though its records could not be written")
	}
	h.log.setAppendErr(nil)
	loaded("downgrade")
	if got := memberTypesOf(t, h, "g"); len(got) != 3 || got["n"] != 1 || got[a.id] != 0 || got[b.id] != 0 {
		t.Fatalf("members after the failed downgrade: %v", got)
	}
	if r := h.cgHeartbeat("g", n, false); r.ErrorCode != 0 {
		t.Fatalf("leave once the log takes writes: error %d", r.ErrorCode)
	}
	if d := h.describe("g"); d.ErrorCode != 0 || d.State != "PreparingRebalance" || len(d.Members) != 2 {
		t.Fatalf("group after the downgrade: %+v", d)
	}
}

// TestClassicHeartbeatWaitsForUpgradeWrite: a classic member's Heartbeat that arrives
// while the records of its group's upgrade are being written reads the consumer group
// they made in memory, where it is behind the group epoch. Answered at once, it said
// REBALANCE_IN_PROGRESS from a state that a failed write then took back, and the member
// joined again: a rebalance of the classic group that a full disk cannot store. Kafka's
// heartbeat is a write without records, answered once the writes before it are
// committed and failed with them: here it waits for them too, and answers a failed one
// with a retriable coordinator error; once the partition is reloaded the member's
// heartbeat finds its classic group as it was.
func TestClassicHeartbeatWaitsForUpgradeWrite(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.set("t", 4)
	a, b := classicPair(t, h, "g")
	// upgrade holds the writer on a joining member's upgrade, has a heartbeat while it
	// is held, and returns the answers of both once release lets the write end with
	// fail.
	upgrade := func(fail error) (*kmsg.ConsumerGroupHeartbeatResponse, int16) {
		t.Helper()
		release := h.holdConsumerJoin("g", "n")
		hb := make(chan int16, 1)
		go func() { hb <- h.heartbeat("g", a.id, a.gen, "") }()
		// The heartbeat has read the consumer group in memory once it asked a to join
		// again (its JoinGroup deadline).
		waitFor(t, "the heartbeat read the upgraded group", func() bool {
			h.c.mu.Lock()
			defer h.c.mu.Unlock()
			part := h.c.mu.partitions[h.c.PartitionFor("g")]
			g := part.groups["g"]
			return g != nil && g.consumer != nil && g.consumer.members[a.id] != nil && !g.consumer.members[a.id].classicDeadline.IsZero()
		})
		r := release(fail)
		return r, recv(t, hb)
	}

	// The upgrade fails to be written.
	r, code := upgrade(errors.New("no space left on device"))
	if r.ErrorCode == 0 {
		t.Fatal("the upgrade succeeded though its records could not be written")
	}
	if code != kerrNotCoordinator && code != kerrCoordinatorNotAvailable {
		t.Fatalf("a classic heartbeat across the failed upgrade: error %d, want NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE", code)
	}
	waitFor(t, "the partition loaded again after the failed upgrade", func() bool { return h.describe("g").ErrorCode == 0 })
	if d := h.describe("g"); d.State != "Stable" || len(d.Members) != 2 {
		t.Fatalf("classic group after the failed upgrade: %+v", d)
	}
	for _, s := range []*csim{a, b} {
		if code := h.heartbeat("g", s.id, s.gen, ""); code != 0 {
			t.Fatalf("classic heartbeat of %s after the failed upgrade: error %d", s.id, code)
		}
	}

	// The upgrade is written: the heartbeat answers from the consumer group it made,
	// where a is behind the new group epoch.
	r, code = upgrade(nil)
	if r.ErrorCode != 0 {
		t.Fatalf("the upgrade once the log takes writes: error %d", r.ErrorCode)
	}
	if code != kerrRebalanceInProgress {
		t.Fatalf("a classic heartbeat across the upgrade: error %d, want REBALANCE_IN_PROGRESS", code)
	}
}
