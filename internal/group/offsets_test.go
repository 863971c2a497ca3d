package group

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestCommitAndFetch(t *testing.T) {
	h := newHarness(t, nil)
	ids, _, gen := h.stable("g", joinOpts{}, joinOpts{})
	r := h.commit("g", ids[0], gen, map[TopicPartition]int64{{"t", 0}: 10, {"t", 1}: 20, {"u", 0}: 5})
	for tp, code := range commitErrors(r) {
		if code != 0 {
			t.Fatalf("commit %v: %d", tp, code)
		}
	}
	// v7: specific partitions, including one never committed.
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 7
	req.Group = "g"
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 1, 2}}}
	resp := h.c.OffsetFetch(req)
	want := []struct {
		off   int64
		epoch int32
		meta  string
	}{{10, 7, "m10"}, {20, 7, "m20"}, {-1, -1, ""}}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 {
		t.Fatalf("fetch: %+v", resp)
	}
	for i, p := range resp.Topics[0].Partitions {
		if p.Offset != want[i].off || p.LeaderEpoch != want[i].epoch || p.Metadata == nil || *p.Metadata != want[i].meta || p.ErrorCode != 0 {
			t.Fatalf("partition %d: %+v, want %+v", i, p, want[i])
		}
	}
	// Null topics: everything the group committed.
	if got := h.fetch("g"); len(got) != 3 || got[TopicPartition{"u", 0}] != 5 {
		t.Fatalf("fetch all: %v", got)
	}
	// v8: several groups at once, one of them unknown.
	req8 := kmsg.NewPtrOffsetFetchRequest()
	req8.Version = 8
	req8.Groups = []kmsg.OffsetFetchRequestGroup{
		{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "u", Partitions: []int32{0}}}},
		{Group: "other"},
	}
	r8 := h.c.OffsetFetch(req8)
	if len(r8.Groups) != 2 || r8.Groups[0].Topics[0].Partitions[0].Offset != 5 || r8.Groups[1].ErrorCode != 0 || len(r8.Groups[1].Topics) != 0 {
		t.Fatalf("v8 fetch: %+v", r8)
	}
	// A later commit wins.
	h.commit("g", ids[1], gen, map[TopicPartition]int64{{"t", 0}: 11})
	if got := h.fetch("g"); got[TopicPartition{"t", 0}] != 11 {
		t.Fatalf("after second commit: %v", got)
	}
}

func TestCommitValidation(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxMetadataSize = 8 })
	h.c.topicExists = func(topic string, p int32) bool { return topic == "t" && p < 2 }
	ids, _, gen := h.stable("g", joinOpts{}, joinOpts{})
	one := map[TopicPartition]int64{{"t", 0}: 1}
	tests := []struct {
		name   string
		group  string
		member string
		gen    int32
		want   int16
	}{
		{"wrong generation", "g", ids[0], gen + 1, kerrIllegalGeneration},
		{"unknown member", "g", "ghost", gen, kerrUnknownMemberID},
		{"simple commit into a group with members", "g", "", -1, kerrUnknownMemberID},
		{"member commit into an unknown group", "nope", "m", 1, kerrIllegalGeneration},
	}
	for _, tt := range tests {
		r := h.commit(tt.group, tt.member, tt.gen, one)
		if code := commitErrors(r)[TopicPartition{"t", 0}]; code != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, code, tt.want)
		}
	}
	// Per partition: unknown partitions and oversized metadata.
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.MemberID, req.Generation = "g", ids[0], gen
	long, short := "way too long metadata", "ok"
	req.Topics = []kmsg.OffsetCommitRequestTopic{
		{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 3, Metadata: &short}, {Partition: 1, Offset: 3, Metadata: &long}, {Partition: 9, Offset: 3}}},
		{Topic: "missing", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 3}}},
	}
	got := commitErrors(recv(t, h.c.OffsetCommit(req)))
	want := map[TopicPartition]int16{{"t", 0}: 0, {"t", 1}: kerrOffsetMetadataTooLarge, {"t", 9}: kerrUnknownTopicOrPartition, {"missing", 0}: kerrUnknownTopicOrPartition}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("per-partition errors %v, want %v", got, want)
	}
	if off := h.fetch("g"); len(off) != 1 || off[TopicPartition{"t", 0}] != 3 {
		t.Fatalf("only the valid partition is committed: %v", off)
	}
	// During CompletingRebalance commits are refused with REBALANCE_IN_PROGRESS.
	a := h.newMemberID("g", joinOpts{})
	ja := h.join("g", joinOpts{member: a})
	j0 := h.join("g", joinOpts{member: ids[0]})
	j1 := h.join("g", joinOpts{member: ids[1]})
	r := recv(t, ja)
	recv(t, j0)
	recv(t, j1)
	if code := commitErrors(h.commit("g", a, r.Generation, one))[TopicPartition{"t", 0}]; code != kerrRebalanceInProgress {
		t.Fatalf("commit while CompletingRebalance: %d", code)
	}
}

func TestSimpleConsumerCommit(t *testing.T) {
	h := newHarness(t, nil)
	r := h.commit("standalone", "", -1, map[TopicPartition]int64{{"t", 0}: 42})
	if code := commitErrors(r)[TopicPartition{"t", 0}]; code != 0 {
		t.Fatalf("simple commit: %d", code)
	}
	if got := h.fetch("standalone"); got[TopicPartition{"t", 0}] != 42 {
		t.Fatalf("fetch: %v", got)
	}
	d := h.describe("standalone")
	if d.State != "Empty" || d.ProtocolType != "" || len(d.Members) != 0 {
		t.Fatalf("describe: %+v", d)
	}
	// v0 has no generation or member: always a simple commit.
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 0
	req.Group = "standalone"
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 43}}}}
	if r := recv(t, h.c.OffsetCommit(req)); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("v0 commit: %+v", r)
	}
	if got := h.c.CommittedOffsets("standalone"); got[TopicPartition{"t", 0}].Offset != 43 || got[TopicPartition{"t", 0}].LeaderEpoch != -1 {
		t.Fatalf("committed: %+v", got)
	}
	// A consumer group can later form under the same name.
	ids, _, _ := h.stable("standalone", joinOpts{})
	if len(ids) != 1 {
		t.Fatal("no member")
	}
	if got := h.fetch("standalone"); got[TopicPartition{"t", 0}] != 43 {
		t.Fatalf("offsets kept when the group forms: %v", got)
	}
}

func TestReloadReproducesGroupsAndOffsets(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.NumPartitions = 3 })
	ids, leader, gen := h.stable("g", joinOpts{instance: "i1"}, joinOpts{})
	h.commit("g", ids[0], gen, map[TopicPartition]int64{{"t", 0}: 10, {"t", 1}: 11})
	h.commit("g", ids[1], gen, map[TopicPartition]int64{{"t", 1}: 12})
	h.commit("simple", "", -1, map[TopicPartition]int64{{"t", 0}: 7})
	e, _, _ := h.stable("empty", joinOpts{})
	h.commit("empty", e[0], 1, map[TopicPartition]int64{{"x", 0}: 1})
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 0
	leave.Group, leave.MemberID = "empty", e[0]
	h.c.LeaveGroup(leave)
	h.commit("gone", "", -1, map[TopicPartition]int64{{"t", 0}: 1})
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"gone"}
	if r := recv(t, h.c.DeleteGroups(del)); r.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete: %+v", r)
	}
	waitFor(t, "the empty group record", func() bool { return h.describe("empty").State == "Empty" })

	before := h.c.Groups()
	beforeOffsets := map[string]map[TopicPartition]CommittedOffset{}
	for _, g := range before {
		beforeOffsets[g.Group] = h.c.CommittedOffsets(g.Group)
	}
	describeBefore := describeString(h.describe("g"))
	waitFor(t, "all writes", func() bool {
		n := 0
		for p := range int32(3) {
			n += len(h.log.decodedAll(t, p))
		}
		return n >= 8
	})

	h.start() // a new coordinator replays the log
	after := h.c.Groups()
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("groups after reload:\n%v\nbefore:\n%v", after, before)
	}
	for _, g := range after {
		if got := h.c.CommittedOffsets(g.Group); fmt.Sprint(got) != fmt.Sprint(beforeOffsets[g.Group]) {
			t.Fatalf("offsets of %s after reload: %v, before %v", g.Group, got, beforeOffsets[g.Group])
		}
	}
	if h.c.CommittedOffsets("gone") != nil {
		t.Fatal("deleted group came back")
	}
	if d := describeString(h.describe("g")); d != describeBefore {
		t.Fatalf("describe after reload:\n%+v\nbefore:\n%+v", d, describeBefore)
	}
	// The members carry on where they were: same ids, same generation.
	for _, id := range ids {
		if code := h.heartbeat("g", id, gen, ""); code != 0 {
			t.Fatalf("heartbeat of %s after reload: %d", id, code)
		}
	}
	// And the leader's assignment is still served.
	if r := recv(t, h.sync("g", leader, gen, nil)); r.ErrorCode != 0 || string(r.MemberAssignment) != "a:"+leader {
		t.Fatalf("sync after reload: %+v", r)
	}
	// Members that do not come back expire after their session timeout.
	h.clock.Advance(11 * time.Second)
	if s := h.describe("g").State; s != "PreparingRebalance" && s != "Empty" {
		t.Fatalf("state after members expired: %s", s)
	}
}

func TestRecordsUseKafkaSchema(t *testing.T) {
	h := newHarness(t, nil)
	ids, _, gen := h.stable("g", joinOpts{instance: "i1"})
	h.commit("g", ids[0], gen, map[TopicPartition]int64{{"t", 0}: 10})
	var sawGroup, sawOffset bool
	h.log.mu.Lock()
	records := append([]Record(nil), h.log.parts[0]...)
	h.log.mu.Unlock()
	for _, r := range records {
		switch int16(r.Key[0])<<8 | int16(r.Key[1]) {
		case 1:
			var k kmsg.OffsetCommitKey
			var v kmsg.OffsetCommitValue
			if k.ReadFrom(r.Key) != nil || v.ReadFrom(r.Value) != nil {
				t.Fatal("offset record does not decode with Kafka's schema")
			}
			sawOffset = k.Group == "g" && k.Topic == "t" && v.Version == 3 && v.Offset == 10 && v.LeaderEpoch == 7 && v.Metadata == "m10"
		case 2:
			var k kmsg.GroupMetadataKey
			v := kmsg.NewGroupMetadataValue()
			if k.ReadFrom(r.Key) != nil || v.ReadFrom(r.Value) != nil {
				t.Fatal("group record does not decode with Kafka's schema")
			}
			sawGroup = k.Group == "g" && v.Version == 3 && v.Generation == gen && v.ProtocolType == "consumer" &&
				len(v.Members) == 1 && v.Members[0].InstanceID != nil && *v.Members[0].InstanceID == "i1" &&
				string(v.Members[0].Assignment) == "a:"+ids[0]
		default:
			t.Fatalf("unexpected key version in %x", r.Key)
		}
	}
	if !sawGroup || !sawOffset {
		t.Fatalf("group record %v, offset record %v", sawGroup, sawOffset)
	}
}

func TestOffsetExpiry(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.OffsetsRetention = time.Hour
		c.OffsetsRetentionCheckInterval = time.Minute
		c.MaxSessionTimeout = time.Hour
	})
	ids, _, gen := h.stable("active", joinOpts{session: 2 * time.Minute}) // members: offsets never expire
	h.commit("active", ids[0], gen, map[TopicPartition]int64{{"t", 0}: 1})
	e, _, egen := h.stable("left", joinOpts{session: 2 * time.Minute})
	h.commit("left", e[0], egen, map[TopicPartition]int64{{"t", 0}: 2})
	h.commit("simple", "", -1, map[TopicPartition]int64{{"t", 0}: 3})

	// "left" becomes Empty 30 minutes in: its offsets expire an hour after that.
	for range 30 {
		h.clock.Advance(time.Minute)
		h.heartbeat("active", ids[0], gen, "")
		h.heartbeat("left", e[0], egen, "")
	}
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 0
	leave.Group, leave.MemberID = "left", e[0]
	h.c.LeaveGroup(leave)
	for range 31 {
		h.clock.Advance(time.Minute)
		h.heartbeat("active", ids[0], gen, "")
	}
	// 61 minutes: the standalone offsets (committed at 0) are gone, the group with them.
	waitFor(t, "simple offsets expired", func() bool { return h.c.CommittedOffsets("simple") == nil })
	if got := h.c.CommittedOffsets("left"); len(got) != 1 {
		t.Fatalf("offsets of a group empty for 31 minutes: %v", got)
	}
	for range 30 {
		h.clock.Advance(time.Minute)
		h.heartbeat("active", ids[0], gen, "")
	}
	waitFor(t, "offsets of the empty group expired", func() bool { return h.c.CommittedOffsets("left") == nil })
	if got := h.c.CommittedOffsets("active"); len(got) != 1 {
		t.Fatalf("offsets of an active group expired: %v", got)
	}
	// Tombstones were written for the offsets and the groups.
	tombstones := map[string]bool{}
	waitFor(t, "tombstones", func() bool {
		for _, d := range h.log.decodedAll(t, 0) {
			if d.kind == kindOffset && d.offset == nil {
				tombstones["offset "+d.group] = true
			}
			if d.kind == kindGroup && d.meta == nil {
				tombstones["group "+d.group] = true
			}
		}
		return tombstones["group left"]
	})
	for _, want := range []string{"offset simple", "group simple", "offset left", "group left"} {
		if !tombstones[want] {
			t.Fatalf("no tombstone %q; have %v", want, tombstones)
		}
	}
	if tombstones["offset active"] {
		t.Fatal("tombstone for an active group's offset")
	}
	// After a reload they stay gone.
	h.start()
	if h.c.CommittedOffsets("left") != nil || h.c.CommittedOffsets("simple") != nil || len(h.c.CommittedOffsets("active")) != 1 {
		t.Fatalf("after reload: %v", h.c.Groups())
	}
}

func TestDeleteGroups(t *testing.T) {
	h := newHarness(t, nil)
	h.stable("busy", joinOpts{})
	h.commit("idle", "", -1, map[TopicPartition]int64{{"t", 0}: 1, {"t", 1}: 2})
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Version = 2
	req.Groups = []string{"busy", "idle", "unknown"}
	r := recv(t, h.c.DeleteGroups(req))
	got := map[string]int16{}
	for _, g := range r.Groups {
		got[g.Group] = g.ErrorCode
	}
	if got["busy"] != kerrNonEmptyGroup || got["idle"] != 0 || got["unknown"] != kerrGroupIDNotFound {
		t.Fatalf("delete: %v", got)
	}
	if h.c.CommittedOffsets("idle") != nil || h.describe("idle").State != "Dead" {
		t.Fatal("deleted group still there")
	}
	h.start()
	if h.c.CommittedOffsets("idle") != nil {
		t.Fatal("deleted group back after reload")
	}
}

func TestOffsetDelete(t *testing.T) {
	h := newHarness(t, nil)
	ids, _, gen := h.stable("g", joinOpts{protocols: []kmsg.JoinGroupRequestProtocol{proto("range", consumerMeta("t"))}})
	h.commit("g", ids[0], gen, map[TopicPartition]int64{{"t", 0}: 1, {"old", 0}: 2})
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = "g"
	req.Topics = []kmsg.OffsetDeleteRequestTopic{
		{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
		{Topic: "old", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
	}
	r := recv(t, h.c.OffsetDelete(req))
	if r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != kerrGroupSubscribedToTopic || r.Topics[1].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset delete: %+v", r)
	}
	if got := h.fetch("g"); got[TopicPartition{"t", 0}] != 1 || got[TopicPartition{"old", 0}] != -1 && len(got) != 1 {
		t.Fatalf("after delete: %v", got)
	}
	if _, ok := h.c.CommittedOffsets("g")[TopicPartition{"old", 0}]; ok {
		t.Fatal("offset of an unsubscribed topic not deleted")
	}
	req.Group = "unknown"
	if r := recv(t, h.c.OffsetDelete(req)); r.ErrorCode != kerrGroupIDNotFound {
		t.Fatalf("unknown group: %d", r.ErrorCode)
	}
}

func TestLoadingAndUnloading(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.NumPartitions = 2 })
	// Find a group on each partition.
	names := map[int32]string{}
	for i := 0; len(names) < 2; i++ {
		n := fmt.Sprintf("group-%d", i)
		if _, ok := names[h.c.PartitionFor(n)]; !ok {
			names[h.c.PartitionFor(n)] = n
		}
	}
	g0, g1 := names[0], names[1]
	h.commit(g1, "", -1, map[TopicPartition]int64{{"t", 0}: 5})

	// Partition 1 moves away: NOT_COORDINATOR, and a waiting JoinGroup is answered.
	id := h.newMemberID(g1, joinOpts{})
	waiting := h.join(g1, joinOpts{member: id})
	h.c.UnloadPartition(1)
	if r := recv(t, waiting); r.ErrorCode != kerrNotCoordinator {
		t.Fatalf("waiting join after unload: %+v", r)
	}
	if code := h.c.IsCoordinator(g1); code != kerrNotCoordinator {
		t.Fatalf("IsCoordinator after unload: %d", code)
	}
	if code := h.c.IsCoordinator(g0); code != 0 {
		t.Fatalf("IsCoordinator of the other partition: %d", code)
	}
	// While it loads again, its groups answer COORDINATOR_LOAD_IN_PROGRESS.
	gate := make(chan struct{})
	h.log.mu.Lock()
	h.log.loadGate = gate
	h.log.mu.Unlock()
	loaded := make(chan error, 1)
	go func() { loaded <- h.c.LoadPartition(context.Background(), 1) }()
	waitFor(t, "loading", func() bool { return h.c.IsCoordinator(g1) == kerrCoordinatorLoadInProgress })
	if r := recv(t, h.join(g1, joinOpts{})); r.ErrorCode != kerrCoordinatorLoadInProgress {
		t.Fatalf("join while loading: %+v", r)
	}
	if code := h.heartbeat(g1, "m", 1, ""); code != 0 {
		t.Fatalf("heartbeat while loading: %d (Kafka answers NONE)", code)
	}
	close(gate)
	if err := <-loaded; err != nil {
		t.Fatal(err)
	}
	if code := h.c.IsCoordinator(g1); code != 0 {
		t.Fatalf("after load: %d", code)
	}
	if got := h.fetch(g1); got[TopicPartition{"t", 0}] != 5 {
		t.Fatalf("offsets after reload: %v", got)
	}
	h.c.Close()
	if r := recv(t, h.join(g0, joinOpts{})); r.ErrorCode != kerrNotCoordinator {
		t.Fatalf("join after close: %+v", r)
	}
	if err := h.c.LoadPartition(context.Background(), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("load after close: %v", err)
	}
}

func TestAppendFailure(t *testing.T) {
	h := newHarness(t, nil)
	ids, _, gen := h.stable("g", joinOpts{}, joinOpts{})
	h.commit("g", ids[0], gen, map[TopicPartition]int64{{"t", 0}: 1})
	h.log.setAppendErr(errBoom)
	r := h.commit("g", ids[0], gen, map[TopicPartition]int64{{"t", 0}: 2})
	if code := commitErrors(r)[TopicPartition{"t", 0}]; code != kerrCoordinatorNotAvailable {
		t.Fatalf("commit with failing log: %d", code)
	}
	if got := h.fetch("g"); got[TopicPartition{"t", 0}] != 1 {
		t.Fatalf("a failed commit is visible: %v", got)
	}
	h.log.setAppendErr(fmt.Errorf("leader moved: %w", ErrNotCoordinator))
	r = h.commit("g", ids[0], gen, map[TopicPartition]int64{{"t", 0}: 2})
	if code := commitErrors(r)[TopicPartition{"t", 0}]; code != kerrNotCoordinator {
		t.Fatalf("commit when the log lost leadership: %d", code)
	}
	// A rebalance whose assignment cannot be stored: members are told and rejoin.
	h.log.setAppendErr(errBoom)
	j0 := h.join("g", joinOpts{member: ids[0]})
	j1 := h.join("g", joinOpts{member: ids[1]})
	r0, r1 := recv(t, j0), recv(t, j1)
	leader, follower := ids[0], ids[1]
	if r0.LeaderID != leader {
		leader, follower = follower, leader
	}
	sf := h.sync("g", follower, r0.Generation, nil)
	sl := h.sync("g", leader, r1.Generation, map[string][]byte{leader: []byte("x"), follower: []byte("y")})
	if r := recv(t, sl); r.ErrorCode != kerrCoordinatorNotAvailable {
		t.Fatalf("leader sync: %+v", r)
	}
	if r := recv(t, sf); r.ErrorCode != kerrCoordinatorNotAvailable {
		t.Fatalf("follower sync: %+v", r)
	}
	if s := h.describe("g").State; s != "PreparingRebalance" {
		t.Fatalf("state %s", s)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.MinSessionTimeout = time.Hour
	c.MaxSize = -1
	err := c.Validate()
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("%v", err)
	}
	for _, prop := range []string{"group.min.session.timeout.ms", "group.max.size"} {
		if !contains(err.Error(), prop) {
			t.Fatalf("%q does not name %s", err, prop)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func describeString(g kmsg.DescribeGroupsResponseGroup) string {
	s := fmt.Sprintf("%s %s %s %s", g.Group, g.State, g.ProtocolType, g.Protocol)
	for _, m := range g.Members {
		inst := "-"
		if m.InstanceID != nil {
			inst = *m.InstanceID
		}
		s += fmt.Sprintf(" [%s %s %s %s %x %x]", m.MemberID, inst, m.ClientID, m.ClientHost, m.ProtocolMetadata, m.MemberAssignment)
	}
	return s
}

func TestCommitsQueuedDuringAnAppendShareTheNext(t *testing.T) {
	h := newHarness(t, nil)
	h.log.mu.Lock()
	gate := make(chan struct{})
	h.log.appendGate = gate
	before := h.log.appends
	h.log.mu.Unlock()
	commit := func(off int64) <-chan *kmsg.OffsetCommitResponse {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 8
		req.Group = "simple"
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: off}}}}
		return h.c.OffsetCommit(req)
	}
	var chans []<-chan *kmsg.OffsetCommitResponse
	chans = append(chans, commit(1))
	waitFor(t, "the first append", func() bool { h.log.mu.Lock(); defer h.log.mu.Unlock(); return h.log.blocked == 1 })
	for off := int64(2); off <= 5; off++ {
		chans = append(chans, commit(off))
	}
	none(t, chans[4])
	close(gate)
	for _, ch := range chans {
		if r := recv(t, ch); r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("commit: %+v", r)
		}
	}
	h.log.mu.Lock()
	appends := h.log.appends - before
	h.log.mu.Unlock()
	if appends != 2 {
		t.Fatalf("%d appends for 5 commits, want 2 (the queued four together)", appends)
	}
	if got := h.fetch("simple"); got[TopicPartition{"t", 0}] != 5 {
		t.Fatalf("last commit must win: %v", got)
	}
}

// TestRemoveTopicOffsets: a deleted topic's committed offsets are tombstoned
// in every group (Kafka's onPartitionsDeleted), other topics' stay, and a reload
// replays the deletion.
func TestRemoveTopicOffsets(t *testing.T) {
	h := newHarness(t, nil)
	for _, g := range []string{"g1", "g2"} {
		r := h.commit(g, "", -1, map[TopicPartition]int64{{"gone", 0}: 20, {"gone", 1}: 30, {"kept", 0}: 5})
		for tp, code := range commitErrors(r) {
			if code != 0 {
				t.Fatalf("commit %s %v: error %d", g, tp, code)
			}
		}
	}
	h.c.RemoveTopicOffsets(map[string]bool{"gone": true})
	want := map[TopicPartition]int64{{"kept", 0}: 5}
	waitFor(t, "the deleted topic's offsets gone", func() bool {
		return maps.Equal(h.fetch("g1"), want) && maps.Equal(h.fetch("g2"), want)
	})
	h.start()
	for _, g := range []string{"g1", "g2"} {
		if got := h.fetch(g); !maps.Equal(got, want) {
			t.Fatalf("%s after a reload: offsets %v, want %v", g, got, want)
		}
	}
}

// Kafka (OffsetMetadataManager.validateOffsetCommit) answers a member commit into a
// group it does not know with GROUP_ID_NOT_FOUND from OffsetCommit v9, and
// ILLEGAL_GENERATION before.
func TestCommitIntoUnknownGroupByVersion(t *testing.T) {
	h := newHarness(t, nil)
	for _, tt := range []struct {
		version int16
		want    int16
	}{{8, kerrIllegalGeneration}, {9, kerrGroupIDNotFound}} {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = tt.version
		req.Group, req.MemberID, req.Generation = "nope", "m", 1
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
		if code := recv(t, h.c.OffsetCommit(req)).Topics[0].Partitions[0].ErrorCode; code != tt.want {
			t.Errorf("v%d: %d, want %d", tt.version, code, tt.want)
		}
	}
}

// Kafka (ClassicGroup.validateOffsetCommit) accepts any commit with generation -1 into
// an Empty group, whatever member or instance id it names: a consumer with a
// group.instance.id that assigns its partitions itself commits so.
func TestSimpleCommitNamingAnInstanceIntoEmptyGroup(t *testing.T) {
	h := newHarness(t, nil)
	for _, group := range []string{"new", "new"} { // created by the first, Empty after
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 8
		req.Group, req.Generation, req.InstanceID = group, -1, strPtr("instance-1")
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5}}}}
		if code := recv(t, h.c.OffsetCommit(req)).Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("commit: %d, want 0", code)
		}
	}
	if got := h.fetch("new"); got[TopicPartition{"t", 0}] != 5 {
		t.Fatalf("fetch: %v", got)
	}
}

// Kafka's ClassicGroup keeps, for a consumer group without members, an empty set of
// subscribed topics (computeSubscribedTopics); so while such a group rebalances again
// (PreparingRebalance out of Empty), OffsetDelete deletes its offsets rather than
// answering GROUP_SUBSCRIBED_TO_TOPIC — also after the group is loaded.
func TestOffsetDeleteWhileAnEmptiedGroupRebalances(t *testing.T) {
	h := newHarness(t, nil)
	ids, _, gen := h.stable("g", joinOpts{})
	h.commit("g", ids[0], gen, map[TopicPartition]int64{{"t", 0}: 1, {"t", 1}: 2})
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group, leave.MemberID = "g", ids[0]
	h.c.LeaveGroup(leave)
	for i, reload := range []bool{false, true} {
		if reload {
			h.start()
		}
		if s := h.describe("g").State; s != "Empty" {
			t.Fatalf("state: %s", s)
		}
		ch := h.join("g", joinOpts{member: h.newMemberID("g", joinOpts{})})
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = "g"
		req.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: int32(i)}}}}
		if r := recv(t, h.c.OffsetDelete(req)); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("offset delete (reload %v): %+v", reload, r)
		}
		h.clock.Advance(h.cfg.InitialRebalanceDelay)
		jr := recv(t, ch)
		leave.MemberID = jr.MemberID
		recv(t, h.sync("g", jr.MemberID, jr.Generation, map[string][]byte{jr.MemberID: {}}))
		h.c.LeaveGroup(leave)
	}
}

// A KIP-848 consumer group without members subscribes to nothing either (Kafka's
// ConsumerGroup.isSubscribedToTopic): OffsetDelete deletes its offsets.
func TestOffsetDeleteInEmptyConsumerGroup(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.set("t", 1)
	m := &cmember{id: "m0", topics: []string{"t"}}
	h.cgHeartbeat("g", m, true)
	c := kmsg.NewPtrOffsetCommitRequest()
	c.Version = 9
	c.Group, c.MemberID, c.Generation = "g", m.id, m.epoch
	c.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	if code := recv(t, h.c.OffsetCommit(c)).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("commit: %d", code)
	}
	m.epoch = leaveEpoch
	h.cgHeartbeat("g", m, false)
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = "g"
	req.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	if r := recv(t, h.c.OffsetDelete(req)); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset delete: %+v", r)
	}
}
