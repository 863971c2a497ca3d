package group

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestJoinSyncHappyPath(t *testing.T) {
	for n := 1; n <= 4; n++ {
		t.Run(fmt.Sprintf("%d members", n), func(t *testing.T) {
			h := newHarness(t, nil)
			opts := make([]joinOpts, n)
			ids, leader, gen := h.stable("g", opts...)
			if gen != 1 {
				t.Fatalf("generation %d, want 1", gen)
			}
			seen := map[string]bool{}
			for _, id := range ids {
				if seen[id] {
					t.Fatalf("duplicate member id %s", id)
				}
				seen[id] = true
				if code := h.heartbeat("g", id, gen, ""); code != 0 {
					t.Fatalf("heartbeat %s: %d", id, code)
				}
			}
			if !seen[leader] {
				t.Fatalf("leader %q is not a member", leader)
			}
			d := h.describe("g")
			if d.State != "Stable" || d.Protocol != "range" || d.ProtocolType != "consumer" || len(d.Members) != n {
				t.Fatalf("describe: %+v", d)
			}
			for _, m := range d.Members {
				if string(m.MemberAssignment) != "a:"+m.MemberID {
					t.Fatalf("describe assignment of %s: %q", m.MemberID, m.MemberAssignment)
				}
			}
		})
	}
}

func TestLeaderGetsMembersFollowersDoNot(t *testing.T) {
	h := newHarness(t, nil)
	a := h.newMemberID("g", joinOpts{})
	b := h.newMemberID("g", joinOpts{})
	ja := h.join("g", joinOpts{member: a, protocols: []kmsg.JoinGroupRequestProtocol{proto("range", []byte("meta-a"))}})
	jb := h.join("g", joinOpts{member: b, protocols: []kmsg.JoinGroupRequestProtocol{proto("range", []byte("meta-b"))}})
	h.clock.Advance(3 * time.Second)
	none(t, ja) // a second member arrived during the initial delay: it is extended
	h.clock.Advance(3 * time.Second)
	ra, rb := recv(t, ja), recv(t, jb)
	if ra.LeaderID != a || rb.LeaderID != a {
		t.Fatalf("leader %q/%q, want %q (first to join)", ra.LeaderID, rb.LeaderID, a)
	}
	if len(rb.Members) != 0 {
		t.Fatalf("follower got %d members", len(rb.Members))
	}
	got := map[string]string{}
	for _, m := range ra.Members {
		got[m.MemberID] = string(m.ProtocolMetadata)
	}
	if got[a] != "meta-a" || got[b] != "meta-b" || len(got) != 2 {
		t.Fatalf("leader members: %v", got)
	}
	if ra.Protocol == nil || *ra.Protocol != "range" || ra.ProtocolType == nil || *ra.ProtocolType != "consumer" {
		t.Fatalf("protocol %v type %v", ra.Protocol, ra.ProtocolType)
	}
	// A follower's SyncGroup waits for the leader's assignment.
	sb := h.sync("g", b, ra.Generation, nil)
	none(t, sb)
	sa := h.sync("g", a, ra.Generation, map[string][]byte{a: []byte("x"), b: []byte("y"), "stranger": []byte("z")})
	if r := recv(t, sb); r.ErrorCode != 0 || string(r.MemberAssignment) != "y" {
		t.Fatalf("follower sync: %+v", r)
	}
	if r := recv(t, sa); r.ErrorCode != 0 || string(r.MemberAssignment) != "x" {
		t.Fatalf("leader sync: %+v", r)
	}
}

func TestMemberIDHandshake(t *testing.T) {
	h := newHarness(t, nil)
	// v4+: an unknown member gets MEMBER_ID_REQUIRED and an id, which is then accepted.
	r := recv(t, h.join("g", joinOpts{}))
	if r.ErrorCode != kerrMemberIDRequired || r.MemberID == "" || r.Generation != -1 {
		t.Fatalf("first join: %+v", r)
	}
	j := h.join("g", joinOpts{member: r.MemberID})
	h.clock.Advance(3 * time.Second)
	if r2 := recv(t, j); r2.ErrorCode != 0 || r2.MemberID != r.MemberID || r2.Generation != 1 {
		t.Fatalf("second join: %+v", r2)
	}
	// A made-up member id is refused.
	if r3 := recv(t, h.join("g", joinOpts{member: "made-up"})); r3.ErrorCode != kerrUnknownMemberID {
		t.Fatalf("made-up member: %+v", r3)
	}
	// v3 and older join directly, without the handshake.
	j4 := h.join("old", joinOpts{version: 3})
	h.clock.Advance(3 * time.Second)
	if r4 := recv(t, j4); r4.ErrorCode != 0 || r4.MemberID == "" || r4.Generation != 1 {
		t.Fatalf("v3 join: %+v", r4)
	}
	// A known member id for a group that does not exist.
	if r5 := recv(t, h.join("nope", joinOpts{member: "x"})); r5.ErrorCode != kerrUnknownMemberID {
		t.Fatalf("join unknown group with member id: %+v", r5)
	}
}

func TestProtocolSelection(t *testing.T) {
	p := func(names ...string) []kmsg.JoinGroupRequestProtocol {
		var out []kmsg.JoinGroupRequestProtocol
		for _, n := range names {
			out = append(out, proto(n, []byte(n)))
		}
		return out
	}
	tests := []struct {
		name    string
		members [][]kmsg.JoinGroupRequestProtocol
		want    string
	}{
		{"only common protocol", [][]kmsg.JoinGroupRequestProtocol{p("range", "roundrobin"), p("roundrobin", "range"), p("roundrobin")}, "roundrobin"},
		{"majority preference", [][]kmsg.JoinGroupRequestProtocol{p("a", "b"), p("b", "a"), p("a", "b")}, "a"},
		{"cooperative first", [][]kmsg.JoinGroupRequestProtocol{p("cooperative-sticky", "range"), p("cooperative-sticky", "range")}, "cooperative-sticky"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			var chans []<-chan *kmsg.JoinGroupResponse
			for _, protos := range tt.members {
				id := h.newMemberID("g", joinOpts{protocols: protos})
				chans = append(chans, h.join("g", joinOpts{member: id, protocols: protos}))
			}
			h.clock.Advance(time.Minute)
			for _, ch := range chans {
				r := recv(t, ch)
				if r.ErrorCode != 0 || r.Protocol == nil || *r.Protocol != tt.want {
					t.Fatalf("join: error %d protocol %v, want %s", r.ErrorCode, r.Protocol, tt.want)
				}
			}
		})
	}

	h := newHarness(t, nil)
	h.stable("g", joinOpts{protocols: p("range", "roundrobin")})
	// No protocol in common with the group, or another protocol type: refused.
	if r := recv(t, h.join("g", joinOpts{protocols: p("sticky")})); r.ErrorCode != kerrInconsistentGroupProtocol {
		t.Fatalf("incompatible protocol: %+v", r)
	}
	if r := recv(t, h.join("g", joinOpts{protocolType: "connect", protocols: p("range")})); r.ErrorCode != kerrInconsistentGroupProtocol {
		t.Fatalf("other protocol type: %+v", r)
	}
	// A new group needs a protocol type and at least one protocol.
	if r := recv(t, h.join("new", joinOpts{protocols: []kmsg.JoinGroupRequestProtocol{}})); r.ErrorCode != kerrInconsistentGroupProtocol {
		t.Fatalf("no protocols: %+v", r)
	}
	if s := h.describe("new").State; s != "Dead" {
		t.Fatalf("a refused join left group state %s", s)
	}
}

func TestInitialRebalanceDelay(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = 3 * time.Second })
	a := h.newMemberID("g", joinOpts{})
	ja := h.join("g", joinOpts{member: a, rebalance: 8 * time.Second})
	h.clock.Advance(2 * time.Second)
	none(t, ja)
	// Members that join during the delay extend it, by at most another delay each time,
	// never beyond the rebalance timeout.
	b := h.newMemberID("g", joinOpts{})
	jb := h.join("g", joinOpts{member: b, rebalance: 8 * time.Second})
	h.clock.Advance(time.Second) // t=3s: extended to 6s
	none(t, ja)
	c := h.newMemberID("g", joinOpts{})
	jc := h.join("g", joinOpts{member: c, rebalance: 8 * time.Second})
	h.clock.Advance(3 * time.Second) // t=6s: remaining rebalance time 2s
	none(t, ja)
	h.clock.Advance(2 * time.Second) // t=8s: done
	for _, ch := range []<-chan *kmsg.JoinGroupResponse{ja, jb, jc} {
		if r := recv(t, ch); r.ErrorCode != 0 || r.Generation != 1 {
			t.Fatalf("join: %+v", r)
		}
	}

	// With no delay a single member completes its join at once.
	h0 := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = 0 })
	id := h0.newMemberID("g", joinOpts{})
	if r := recv(t, h0.join("g", joinOpts{member: id})); r.ErrorCode != 0 || r.Generation != 1 || r.LeaderID != id {
		t.Fatalf("join without delay: %+v", r)
	}
}

func TestHeartbeatExpiryRemovesMember(t *testing.T) {
	h := newHarness(t, nil)
	ids, _, gen := h.stable("g", joinOpts{}, joinOpts{})
	a, b := ids[0], ids[1]
	h.clock.Advance(6 * time.Second)
	if code := h.heartbeat("g", a, gen, ""); code != 0 {
		t.Fatalf("heartbeat: %d", code)
	}
	h.clock.Advance(6 * time.Second) // b has been silent for 12s > 10s session timeout
	if code := h.heartbeat("g", a, gen, ""); code != kerrRebalanceInProgress {
		t.Fatalf("heartbeat after b expired: %d, want REBALANCE_IN_PROGRESS", code)
	}
	if code := h.heartbeat("g", b, gen, ""); code != kerrUnknownMemberID {
		t.Fatalf("expired member heartbeat: %d", code)
	}
	r := recv(t, h.join("g", joinOpts{member: a}))
	if r.ErrorCode != 0 || r.Generation != gen+1 || r.LeaderID != a || len(r.Members) != 1 {
		t.Fatalf("rejoin: %+v", r)
	}
	if code := h.heartbeat("g", a, gen, ""); code != kerrIllegalGeneration {
		t.Fatalf("old generation heartbeat: %d", code)
	}
}

func TestRebalanceTimeoutDropsMembersThatDoNotRejoin(t *testing.T) {
	h := newHarness(t, nil)
	ids, leader, gen := h.stable("g", joinOpts{rebalance: 20 * time.Second}, joinOpts{rebalance: 20 * time.Second})
	follower := ids[0]
	if follower == leader {
		follower = ids[1]
	}
	// The leader rejoining starts a rebalance; the follower keeps heartbeating but never
	// rejoins (a consumer stuck in processing past max.poll.interval.ms).
	jl := h.join("g", joinOpts{member: leader, rebalance: 20 * time.Second})
	for range 3 {
		h.clock.Advance(5 * time.Second)
		if code := h.heartbeat("g", follower, gen, ""); code != kerrRebalanceInProgress {
			t.Fatalf("follower heartbeat during rebalance: %d", code)
		}
		none(t, jl)
	}
	h.clock.Advance(5 * time.Second)
	r := recv(t, jl)
	if r.ErrorCode != 0 || r.Generation != gen+1 || len(r.Members) != 1 || r.Members[0].MemberID != leader {
		t.Fatalf("leader join after rebalance timeout: %+v", r)
	}
	if code := h.heartbeat("g", follower, gen, ""); code != kerrUnknownMemberID {
		t.Fatalf("dropped follower heartbeat: %d", code)
	}
	// The dropped consumer comes back and rejoins as a new member.
	id := h.newMemberID("g", joinOpts{})
	jn := h.join("g", joinOpts{member: id})
	none(t, jn)
	if code := h.heartbeat("g", leader, gen+1, ""); code != kerrRebalanceInProgress {
		t.Fatalf("leader heartbeat: %d", code)
	}
	jl2 := h.join("g", joinOpts{member: leader})
	if r := recv(t, jn); r.ErrorCode != 0 || r.Generation != gen+2 {
		t.Fatalf("new member join: %+v", r)
	}
	if r := recv(t, jl2); r.ErrorCode != 0 || len(r.Members) != 2 {
		t.Fatalf("leader rejoin: %+v", r)
	}
}

func TestPendingSyncExpiry(t *testing.T) {
	h := newHarness(t, nil)
	a := h.newMemberID("g", joinOpts{})
	b := h.newMemberID("g", joinOpts{})
	ja := h.join("g", joinOpts{member: a, rebalance: 20 * time.Second})
	jb := h.join("g", joinOpts{member: b, rebalance: 20 * time.Second})
	h.clock.Advance(6 * time.Second)
	ra, rb := recv(t, ja), recv(t, jb)
	leader := ra.LeaderID
	other := b
	if leader == b {
		other = a
	}
	_ = rb
	// Only the leader syncs; the other member never does.
	sl := h.sync("g", leader, ra.Generation, map[string][]byte{a: []byte("x"), b: []byte("y")})
	recv(t, sl)
	for range 4 {
		h.clock.Advance(5 * time.Second)
		h.heartbeat("g", leader, ra.Generation, "")
		// The other member is alive (it heartbeats) but never sends SyncGroup.
		h.heartbeat("g", other, ra.Generation, "")
	}
	if code := h.heartbeat("g", other, ra.Generation, ""); code != kerrUnknownMemberID {
		t.Fatalf("member that never synced: heartbeat %d, want UNKNOWN_MEMBER_ID", code)
	}
	if s := h.describe("g").State; s != "PreparingRebalance" {
		t.Fatalf("state %s", s)
	}
}

func TestStaticMemberRejoinKeepsAssignment(t *testing.T) {
	for _, version := range []int16{5, 8, 9} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			h := newHarness(t, nil)
			ids, leader, gen := h.stable("g",
				joinOpts{instance: "i1", version: version}, joinOpts{instance: "i2", version: version}, joinOpts{instance: "i3", version: version})
			for i, inst := range []string{"i1", "i2", "i3"} {
				old := ids[i]
				wasLeader := old == leader
				r := recv(t, h.join("g", joinOpts{instance: inst, version: version}))
				if r.ErrorCode != 0 || r.Generation != gen || r.MemberID == "" || r.MemberID == old {
					t.Fatalf("%s rejoin: %+v", inst, r)
				}
				switch {
				case wasLeader && version >= 9:
					if r.LeaderID != r.MemberID || !r.SkipAssignment || len(r.Members) != 3 {
						t.Fatalf("returning leader (KIP-814): %+v", r)
					}
				default:
					if r.LeaderID == r.MemberID || len(r.Members) != 0 || r.SkipAssignment {
						t.Fatalf("returning member must act as follower: %+v", r)
					}
				}
				s := recv(t, h.sync("g", r.MemberID, r.Generation, nil))
				if s.ErrorCode != 0 || string(s.MemberAssignment) != "a:"+old {
					t.Fatalf("%s sync: error %d assignment %q, want a:%s", inst, s.ErrorCode, s.MemberAssignment, old)
				}
				// The previous incarnation is fenced.
				if code := h.heartbeat("g", old, gen, inst); code != kerrFencedInstanceID {
					t.Fatalf("old incarnation heartbeat: %d, want FENCED_INSTANCE_ID", code)
				}
				if code := h.heartbeat("g", r.MemberID, gen, inst); code != 0 {
					t.Fatalf("new incarnation heartbeat: %d", code)
				}
				if leader == old {
					leader = r.MemberID
				}
				ids[i] = r.MemberID
			}
			d := h.describe("g")
			if d.State != "Stable" || len(d.Members) != 3 {
				t.Fatalf("after rolling restart: %+v", d)
			}
		})
	}
}

func TestStaticMemberWithNewProtocolRebalances(t *testing.T) {
	h := newHarness(t, nil)
	_, _, gen := h.stable("g", joinOpts{instance: "i1"})
	// The only member now prefers another protocol: the selected protocol would change.
	j := h.join("g", joinOpts{instance: "i1", protocols: []kmsg.JoinGroupRequestProtocol{proto("roundrobin", nil), proto("range", nil)}})
	r := recv(t, j)
	if r.ErrorCode != 0 || r.Generation != gen+1 || r.Protocol == nil || *r.Protocol != "roundrobin" {
		t.Fatalf("rejoin with a new preferred protocol: %+v", r)
	}
}

func TestFencing(t *testing.T) {
	h := newHarness(t, nil)
	ids, _, gen := h.stable("g", joinOpts{instance: "i1"})
	wrong := "not-" + ids[0]
	if code := h.heartbeat("g", wrong, gen, "i1"); code != kerrFencedInstanceID {
		t.Fatalf("heartbeat: %d", code)
	}
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.Generation = "g", wrong, gen
	inst := "i1"
	req.InstanceID = &inst
	if r := recv(t, h.c.SyncGroup(req)); r.ErrorCode != kerrFencedInstanceID {
		t.Fatalf("sync: %d", r.ErrorCode)
	}
	if r := recv(t, h.join("g", joinOpts{member: wrong, instance: "i1"})); r.ErrorCode != kerrFencedInstanceID {
		t.Fatalf("join: %d", r.ErrorCode)
	}
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 3
	leave.Group = "g"
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: wrong, InstanceID: &inst}}
	if r := h.c.LeaveGroup(leave); r.ErrorCode != 0 || r.Members[0].ErrorCode != kerrFencedInstanceID {
		t.Fatalf("leave: %+v", r)
	}
	cr := kmsg.NewPtrOffsetCommitRequest()
	cr.Version = 8
	cr.Group, cr.MemberID, cr.Generation, cr.InstanceID = "g", wrong, gen, &inst
	cr.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	if r := recv(t, h.c.OffsetCommit(cr)); r.Topics[0].Partitions[0].ErrorCode != kerrFencedInstanceID {
		t.Fatalf("commit: %+v", r)
	}
}

func TestGroupMaxSize(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxSize = 2 })
	h.stable("g", joinOpts{}, joinOpts{})
	r := recv(t, h.join("g", joinOpts{}))
	if r.ErrorCode != kerrGroupMaxSizeReached {
		t.Fatalf("third member: %+v", r)
	}
}

func TestSessionTimeoutBounds(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MinSessionTimeout = 6 * time.Second; c.MaxSessionTimeout = 30 * time.Second })
	for _, s := range []time.Duration{5 * time.Second, 31 * time.Second} {
		if r := recv(t, h.join("g", joinOpts{session: s})); r.ErrorCode != kerrInvalidSessionTimeout {
			t.Fatalf("session %v: %+v", s, r)
		}
	}
	if r := recv(t, h.join("g", joinOpts{session: 6 * time.Second})); r.ErrorCode != kerrMemberIDRequired {
		t.Fatalf("session at the minimum: %+v", r)
	}
}

func TestSyncAndHeartbeatErrors(t *testing.T) {
	h := newHarness(t, nil)
	ids, _, gen := h.stable("g", joinOpts{}, joinOpts{})
	if r := recv(t, h.sync("g", ids[0], gen+1, nil)); r.ErrorCode != kerrIllegalGeneration {
		t.Fatalf("sync wrong generation: %d", r.ErrorCode)
	}
	if r := recv(t, h.sync("g", "ghost", gen, nil)); r.ErrorCode != kerrUnknownMemberID {
		t.Fatalf("sync unknown member: %d", r.ErrorCode)
	}
	if r := recv(t, h.sync("nope", "ghost", gen, nil)); r.ErrorCode != kerrUnknownMemberID {
		t.Fatalf("sync unknown group: %d", r.ErrorCode)
	}
	if code := h.heartbeat("", ids[0], gen, ""); code != kerrInvalidGroupID {
		t.Fatalf("heartbeat empty group id: %d", code)
	}
	// A new member joining puts the group into PreparingRebalance.
	id := h.newMemberID("g", joinOpts{})
	h.join("g", joinOpts{member: id})
	if r := recv(t, h.sync("g", ids[0], gen, nil)); r.ErrorCode != kerrRebalanceInProgress {
		t.Fatalf("sync during rebalance: %d", r.ErrorCode)
	}
}

func TestLeaveGroup(t *testing.T) {
	h := newHarness(t, nil)
	ids, _, gen := h.stable("g", joinOpts{instance: "i1"}, joinOpts{instance: "i2"}, joinOpts{})
	// v3+: a batch, static members given by instance id alone.
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = 5
	req.Group = "g"
	i1, i2, ix := "i1", "i2", "unknown"
	req.Members = []kmsg.LeaveGroupRequestMember{{InstanceID: &i1}, {InstanceID: &i2}, {InstanceID: &ix}}
	r := h.c.LeaveGroup(req)
	if r.ErrorCode != 0 || len(r.Members) != 3 || r.Members[0].ErrorCode != 0 || r.Members[1].ErrorCode != 0 || r.Members[2].ErrorCode != kerrUnknownMemberID {
		t.Fatalf("batched leave: %+v", r)
	}
	// The remaining dynamic member rejoins alone.
	jr := recv(t, h.join("g", joinOpts{member: ids[2]}))
	if jr.ErrorCode != 0 || jr.Generation != gen+1 || len(jr.Members) != 1 {
		t.Fatalf("rejoin after leave: %+v", jr)
	}
	// v0: a single member; the error is top-level.
	old := kmsg.NewPtrLeaveGroupRequest()
	old.Version = 0
	old.Group, old.MemberID = "g", "ghost"
	if r := h.c.LeaveGroup(old); r.ErrorCode != kerrUnknownMemberID {
		t.Fatalf("v0 leave of unknown member: %d", r.ErrorCode)
	}
	old.MemberID = ids[2]
	if r := h.c.LeaveGroup(old); r.ErrorCode != 0 {
		t.Fatalf("v0 leave: %d", r.ErrorCode)
	}
	h.clock.Advance(time.Millisecond)
	if s := h.describe("g").State; s != "Empty" {
		t.Fatalf("state after everyone left: %s", s)
	}
}

func TestListAndDescribeGroups(t *testing.T) {
	h := newHarness(t, nil)
	h.stable("stable", joinOpts{})
	h.commit("simple", "", -1, map[TopicPartition]int64{{"t", 0}: 1})
	list := func(version int16, states ...string) map[string]string {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = version
		req.StatesFilter = states
		out := map[string]string{}
		for _, g := range h.c.ListGroups(req).Groups {
			out[g.Group] = g.GroupState + "/" + g.ProtocolType
		}
		return out
	}
	if got := list(4); len(got) != 2 || got["stable"] != "Stable/consumer" || got["simple"] != "Empty/" {
		t.Fatalf("list: %v", got)
	}
	if got := list(4, "stable"); len(got) != 1 || got["stable"] == "" {
		t.Fatalf("list stable: %v", got)
	}
	if got := list(4, "Empty"); len(got) != 1 || got["simple"] == "" {
		t.Fatalf("list empty: %v", got)
	}
	if d := h.describe("unknown"); d.ErrorCode != 0 || d.State != "Dead" {
		t.Fatalf("describe unknown: %+v", d)
	}
}

func TestFollowerRejoinWithSameMetadataKeepsGeneration(t *testing.T) {
	h := newHarness(t, nil)
	ids, leader, gen := h.stable("g", joinOpts{}, joinOpts{})
	follower := ids[0]
	if follower == leader {
		follower = ids[1]
	}
	r := recv(t, h.join("g", joinOpts{member: follower}))
	if r.ErrorCode != 0 || r.Generation != gen || r.LeaderID != leader || len(r.Members) != 0 {
		t.Fatalf("follower rejoin: %+v", r)
	}
	if s := h.describe("g").State; s != "Stable" {
		t.Fatalf("state %s", s)
	}
	// With new metadata (a changed subscription) it triggers a rebalance.
	j := h.join("g", joinOpts{member: follower, protocols: []kmsg.JoinGroupRequestProtocol{proto("range", consumerMeta("t", "u"))}})
	none(t, j)
	if s := h.describe("g").State; s != "PreparingRebalance" {
		t.Fatalf("state %s", s)
	}
	jl := h.join("g", joinOpts{member: leader})
	if r := recv(t, jl); r.ErrorCode != 0 || r.Generation != gen+1 || len(r.Members) != 2 {
		t.Fatalf("leader: %+v", r)
	}
	recv(t, j)
}

func TestPendingMemberHoldsRebalanceUntilItExpires(t *testing.T) {
	h := newHarness(t, nil)
	ids, _, gen := h.stable("g", joinOpts{})
	h.newMemberID("g", joinOpts{session: 10 * time.Second}) // never comes back
	j := h.join("g", joinOpts{member: ids[0]})
	none(t, j) // waits for the pending member
	h.clock.Advance(5 * time.Second)
	none(t, j)
	h.heartbeat("g", ids[0], gen, "")
	h.clock.Advance(5 * time.Second)
	if r := recv(t, j); r.ErrorCode != 0 || r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("join after the pending member expired: %+v", r)
	}
}

// TestDescribeUnknownGroupV6: from v6 DescribeGroups answers a group that does not
// exist GROUP_ID_NOT_FOUND (KIP-1043), still Dead, as Kafka does; before v6 it is
// Dead without an error. A group that only holds committed offsets exists (Empty).
func TestDescribeUnknownGroupV6(t *testing.T) {
	h := newHarness(t, nil)
	h.commit("simple", "", -1, map[TopicPartition]int64{{"t", 0}: 1})
	describe := func(version int16, group string) kmsg.DescribeGroupsResponseGroup {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version = version
		req.Groups = []string{group}
		return h.c.DescribeGroups(req).Groups[0]
	}
	if d := describe(6, "unknown"); d.ErrorCode != kerrGroupIDNotFound || d.State != "Dead" || d.ErrorMessage == nil {
		t.Errorf("v6 unknown: %+v, want GROUP_ID_NOT_FOUND, Dead, a message", d)
	}
	if d := describe(5, "unknown"); d.ErrorCode != 0 || d.State != "Dead" {
		t.Errorf("v5 unknown: %+v, want Dead without an error", d)
	}
	if d := describe(6, "simple"); d.ErrorCode != 0 || d.State != "Empty" {
		t.Errorf("v6 simple: %+v, want Empty without an error", d)
	}
}

// Kafka extends the initial rebalance delay whenever a member joins during it, for
// every rebalance out of Empty (previousState() == EMPTY in
// addMemberThenRebalanceOrCompleteJoin), not only a brand-new group's first one.
func TestInitialRebalanceDelayExtendedForAGroupEmptyAgain(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = 3 * time.Second })
	ids, _, _ := h.stable("g", joinOpts{})
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 0
	leave.Group, leave.MemberID = "g", ids[0]
	if r := h.c.LeaveGroup(leave); r.ErrorCode != 0 {
		t.Fatalf("leave: %d", r.ErrorCode)
	}
	if s := h.describe("g").State; s != "Empty" {
		t.Fatalf("state after leave: %s", s)
	}
	a := h.newMemberID("g", joinOpts{})
	ja := h.join("g", joinOpts{member: a})
	h.clock.Advance(2 * time.Second)
	b := h.newMemberID("g", joinOpts{})
	jb := h.join("g", joinOpts{member: b})
	h.clock.Advance(time.Second) // t=3s: extended to 6s
	none(t, ja)
	h.clock.Advance(3 * time.Second) // t=6s
	for _, ch := range []<-chan *kmsg.JoinGroupResponse{ja, jb} {
		if r := recv(t, ch); r.ErrorCode != 0 {
			t.Fatalf("join: %+v", r)
		}
	}
}

// Kafka rebalances a classic group loaded with more members than group.max.size
// (GroupMetadataManager.onLoaded), so that the members beyond it are turned away
// (GROUP_MAX_SIZE_REACHED) when they rejoin.
func TestGroupOverMaxSizeAfterLoadRebalances(t *testing.T) {
	h := newHarness(t, nil)
	ids, _, gen := h.stable("g", joinOpts{}, joinOpts{}, joinOpts{})
	h.cfg.MaxSize = 2
	h.start()
	if s := h.describe("g").State; s != "PreparingRebalance" {
		t.Fatalf("state after load over capacity: %s", s)
	}
	if code := h.heartbeat("g", ids[0], gen, ""); code != kerrRebalanceInProgress {
		t.Fatalf("heartbeat: %d", code)
	}
	j0 := h.join("g", joinOpts{member: ids[0]})
	j1 := h.join("g", joinOpts{member: ids[1]})
	if r := recv(t, h.join("g", joinOpts{member: ids[2]})); r.ErrorCode != kerrGroupMaxSizeReached {
		t.Fatalf("third member rejoining: %+v", r)
	}
	for _, ch := range []<-chan *kmsg.JoinGroupResponse{j0, j1} {
		if r := recv(t, ch); r.ErrorCode != 0 || r.Generation != gen+1 {
			t.Fatalf("rejoin: %+v", r)
		}
	}
}

// Kafka's ClassicGroup.validateMember: a request naming a group.instance.id the group
// does not know is UNKNOWN_MEMBER_ID, even with the member id of a (dynamic) member.
func TestUnknownInstanceIDIsUnknownMember(t *testing.T) {
	h := newHarness(t, nil)
	ids, _, gen := h.stable("g", joinOpts{})
	if code := h.heartbeat("g", ids[0], gen, "ghost"); code != kerrUnknownMemberID {
		t.Errorf("heartbeat: %d", code)
	}
	sreq := kmsg.NewPtrSyncGroupRequest()
	sreq.Version = 5
	sreq.Group, sreq.MemberID, sreq.Generation, sreq.InstanceID = "g", ids[0], gen, strPtr("ghost")
	if code := recv(t, h.c.SyncGroup(sreq)).ErrorCode; code != kerrUnknownMemberID {
		t.Errorf("sync: %d", code)
	}
	creq := kmsg.NewPtrOffsetCommitRequest()
	creq.Version = 8
	creq.Group, creq.MemberID, creq.Generation, creq.InstanceID = "g", ids[0], gen, strPtr("ghost")
	creq.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	if code := recv(t, h.c.OffsetCommit(creq)).Topics[0].Partitions[0].ErrorCode; code != kerrUnknownMemberID {
		t.Errorf("commit: %d", code)
	}
	lreq := kmsg.NewPtrLeaveGroupRequest()
	lreq.Version = 5
	lreq.Group = "g"
	lreq.Members = []kmsg.LeaveGroupRequestMember{{MemberID: ids[0], InstanceID: strPtr("ghost")}}
	if r := h.c.LeaveGroup(lreq); len(r.Members) != 1 || r.Members[0].ErrorCode != kerrUnknownMemberID {
		t.Errorf("leave: %+v", r)
	}
	if s := h.describe("g").State; s != "Stable" {
		t.Fatalf("state: %s", s)
	}
}
