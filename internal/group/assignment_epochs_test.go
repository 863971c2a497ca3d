package group

import (
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// KIP-1251 (Kafka 4.3): the epoch at which each partition a consumer group member owns
// was assigned to it, as CurrentAssignmentBuilder sets it, kept in the member's
// records, and checked by OffsetCommit and TxnOffsetCommit at an older epoch than the
// member's. TestConsumerGroupEpochFencing (consumer_group_test.go) checks the rule on
// assigned partitions; settle and TestConsumerGroupRandomChurn check the bookkeeping
// (checkAssignmentEpochs) after every heartbeat.

// memberSnapshot returns a copy of a consumer group member as the coordinator holds
// it.
func memberSnapshot(t *testing.T, h *harness, group, id string) *consumerMember {
	t.Helper()
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	g := h.c.mu.partitions[h.c.PartitionFor(group)].groups[group]
	if g == nil || g.consumer == nil || g.consumer.members[id] == nil {
		t.Fatalf("no member %s in consumer group %s", id, group)
	}
	return g.consumer.members[id].clone()
}

// checkAssignmentEpochs fails unless every member of the consumer group has an
// assignment epoch for exactly the partitions it owns (assigned or pending
// revocation), none newer than its member epoch.
func checkAssignmentEpochs(t *testing.T, h *harness, group string) {
	t.Helper()
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	g := h.c.mu.partitions[h.c.PartitionFor(group)].groups[group]
	if g == nil || g.consumer == nil {
		return
	}
	for id, m := range g.consumer.members {
		n := 0
		for _, a := range []Assignment{m.assigned, m.revoking} {
			for tid, ps := range a {
				for _, p := range ps {
					e, ok := m.assignmentEpochs[tid][p]
					if !ok {
						t.Fatalf("member %s owns partition %x/%d without an assignment epoch", id, tid[:2], p)
					}
					if m.epoch >= 0 && e > m.epoch {
						t.Fatalf("member %s at epoch %d holds partition %x/%d assigned at a later epoch %d", id, m.epoch, tid[:2], p, e)
					}
					n++
				}
			}
		}
		for _, ps := range m.assignmentEpochs {
			n -= len(ps)
		}
		if n != 0 {
			t.Fatalf("member %s has assignment epochs for partitions it does not own: %v (assigned %v, revoking %v)", id, m.assignmentEpochs, m.assigned, m.revoking)
		}
	}
}

// commitAt commits offset to partitions of topic t of group g as member at epoch
// (OffsetCommit v9) and returns each partition's error.
func commitAt(t *testing.T, h *harness, member string, epoch int32, offset int64, ps ...int32) []int16 {
	t.Helper()
	offsets := map[TopicPartition]int64{}
	for _, p := range ps {
		offsets[TopicPartition{"t", p}] = offset
	}
	errs := commitErrors(recv(t, h.c.OffsetCommit(commitRequest(9, "g", member, epoch, offsets))))
	out := make([]int16, len(ps))
	for i, p := range ps {
		out[i] = errs[TopicPartition{"t", p}]
	}
	return out
}

func wantCodes(t *testing.T, what string, got []int16, code int16) {
	t.Helper()
	for _, c := range got {
		if c != code {
			t.Fatalf("%s: errors %v, want %d on every partition", what, got, code)
		}
	}
}

// TestConsumerGroupCommitPendingRevocation: a partition a member is asked to revoke
// stays committable at the epoch it was assigned at until the member reports it
// revoked (Kafka's createAssignmentEpochValidator looks in the partitions pending
// revocation too), and the epochs of both kinds survive a reload.
func TestConsumerGroupCommitPendingRevocation(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.set("t", 6)
	tid := topicIDOf("t")
	a := &cmember{id: "a", topics: []string{"t"}}
	settle(t, h, "g", []*cmember{a}, 6)
	e1 := a.epoch
	b := &cmember{id: "b", topics: []string{"t"}}
	settle(t, h, "g", []*cmember{a, b}, 6)
	e2 := a.epoch
	if e2 <= e1 || len(a.owned[tid]) != 3 {
		t.Fatalf("after b joined: a at %d owns %v (was at %d)", a.epoch, a.owned, e1)
	}

	// c joins: a must give up one of the partitions it has held since e1, and stays at
	// e2 until it reports it revoked.
	h.clock.Advance(h.cfg.ConsumerAssignmentInterval) // c's join is assigned at once
	c := &cmember{id: "c", topics: []string{"t"}}
	if r := h.cgHeartbeat("g", c, true); r.ErrorCode != 0 {
		t.Fatalf("c joins: error %d", r.ErrorCode)
	}
	reported := a.owned.clone()
	if r := h.cgHeartbeat("g", a, true); r.ErrorCode != 0 {
		t.Fatalf("a's heartbeat: error %d", r.ErrorCode)
	}
	m := memberSnapshot(t, h, "g", "a")
	if m.state != memberUnrevoked || m.epoch != e2 || len(m.revoking[tid]) != 1 {
		t.Fatalf("a after c joined: state %v epoch %d revoking %v, want one partition to revoke at epoch %d", m.state, m.epoch, m.revoking, e2)
	}
	revoking := m.revoking[tid][0]
	if e, _ := m.assignmentEpoch(tid, revoking); e != e1 {
		t.Fatalf("partition %d pending revocation has assignment epoch %d, want %d (it was assigned then)", revoking, e, e1)
	}

	h.start() // the epochs come back from the records
	if got := memberSnapshot(t, h, "g", "a"); !got.assignmentEpochs.equal(m.assignmentEpochs) || !got.revoking.equal(m.revoking) {
		t.Fatalf("after a reload a's assignment epochs are %v (revoking %v), were %v (revoking %v)", got.assignmentEpochs, got.revoking, m.assignmentEpochs, m.revoking)
	}
	wantCodes(t, "a at e1, the partition pending revocation", commitAt(t, h, "a", e1, 10, revoking), 0)
	wantCodes(t, "a at e1, every partition it owns", commitAt(t, h, "a", e1, 11, reported[tid]...), 0)
	wantCodes(t, "a before e1, the partition pending revocation", commitAt(t, h, "a", e1-1, 12, revoking), kerrStaleMemberEpoch)

	// a reports the partition revoked: it is no longer a's.
	a.owned = reported
	a.owned[tid] = nil
	for _, p := range reported[tid] {
		if p != revoking {
			a.owned.add(tid, p)
		}
	}
	if r := h.cgHeartbeat("g", a, true); r.ErrorCode != 0 {
		t.Fatalf("a reports the revocation: error %d", r.ErrorCode)
	}
	if a.epoch <= e2 || a.owned.has(tid, revoking) {
		t.Fatalf("a after revoking: epoch %d owns %v", a.epoch, a.owned)
	}
	wantCodes(t, "a at e1, the partition it revoked", commitAt(t, h, "a", e1, 13, revoking), kerrStaleMemberEpoch)
	if o := h.c.CommittedOffsets("g")[TopicPartition{"t", revoking}].Offset; o != 11 {
		t.Fatalf("offset of the revoked partition: %d, want 11", o)
	}
	settle(t, h, "g", []*cmember{a, b, c}, 6)
}

// TestConsumerGroupRecordsWithoutAssignmentEpochs: a member record written before
// the assignment epochs were kept loads with every partition assigned at the member
// epoch (0 for a static member away at -2), as Kafka loads a record without
// AssignmentEpochs; one written with them keeps them.
func TestConsumerGroupRecordsWithoutAssignmentEpochs(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.set("t", 4)
	tid := topicIDOf("t")
	a := &cmember{id: "a", topics: []string{"t"}}
	settle(t, h, "g", []*cmember{a}, 4)
	e1 := a.epoch
	b := &cmember{id: "b", instance: "ib", topics: []string{"t"}}
	settle(t, h, "g", []*cmember{a, b}, 4)
	e2 := a.epoch
	kept := a.owned[tid]
	wantCodes(t, "a at e1 with the epochs kept", commitAt(t, h, "a", e1, 1, kept...), 0)
	b.epoch = staticLeaveEpoch // away for a while: its record says epoch -2
	if r := h.cgHeartbeat("g", b, false); r.ErrorCode != 0 {
		t.Fatalf("b's static leave: error %d", r.ErrorCode)
	}

	// Strip the epochs from every member record, as an older Samsa wrote them.
	stripped := 0
	h.log.mu.Lock()
	for p, records := range h.log.parts {
		for i, r := range records {
			if len(r.Key) < 2 || int16(binary.BigEndian.Uint16(r.Key)) != consumerMemberKeyVersion || r.Value == nil {
				continue
			}
			var v map[string]json.RawMessage
			if err := json.Unmarshal(r.Value, &v); err != nil {
				h.log.mu.Unlock()
				t.Fatal(err)
			}
			if _, ok := v["assigned_epochs"]; ok {
				stripped++
			}
			delete(v, "assigned_epochs")
			delete(v, "revoking_epochs")
			out, _ := json.Marshal(v)
			h.log.parts[p][i].Value = out
		}
	}
	h.log.mu.Unlock()
	if stripped == 0 {
		t.Fatal("no member record carries assigned_epochs")
	}
	h.start()
	for id, want := range map[string]int32{"a": e2, "b": 0} {
		m := memberSnapshot(t, h, "g", id)
		for _, p := range m.assigned[tid] {
			if e, ok := m.assignmentEpoch(tid, p); !ok || e != want {
				t.Fatalf("member %s (epoch %d) loaded from a record without epochs: partition %d at %d (%v), want %d", id, m.epoch, p, e, ok, want)
			}
		}
	}
	wantCodes(t, "a at e1 after loading records without epochs", commitAt(t, h, "a", e1, 2, kept...), kerrStaleMemberEpoch)
	wantCodes(t, "a at e2 after loading records without epochs", commitAt(t, h, "a", e2, 3, kept...), 0)
	if r := h.cgHeartbeat("g", a, true); r.ErrorCode != 0 {
		t.Fatalf("a's heartbeat after the reload: error %d", r.ErrorCode)
	}
	checkAssignmentEpochs(t, h, "g")
}

// TestConsumerGroupStaticReturnCommits: a static member leaving for a while has its
// partitions' assignment epochs reset to 0 (Kafka's consumerGroupStaticMemberGroupLeave):
// its next incarnation may commit them at any epoch up to its own.
func TestConsumerGroupStaticReturnCommits(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.set("t", 4)
	tid := topicIDOf("t")
	a := &cmember{id: "a", instance: "ia", topics: []string{"t"}}
	b := &cmember{id: "b", topics: []string{"t"}}
	settle(t, h, "g", []*cmember{a}, 4)
	settle(t, h, "g", []*cmember{a, b}, 4)
	kept := a.owned[tid]
	wantCodes(t, "a at epoch 0 before leaving", commitAt(t, h, "a", 0, 1, kept...), kerrStaleMemberEpoch)
	a.epoch = staticLeaveEpoch
	if r := h.cgHeartbeat("g", a, false); r.ErrorCode != 0 {
		t.Fatalf("static leave: error %d", r.ErrorCode)
	}
	a2 := &cmember{id: "a2", instance: "ia", topics: []string{"t"}}
	if r := h.cgHeartbeat("g", a2, true); r.ErrorCode != 0 || !a2.owned.equal(Assignment{tid: kept}) {
		t.Fatalf("static return: error %d, owns %v, want %v", r.ErrorCode, a2.owned, kept)
	}
	wantCodes(t, "the next incarnation at epoch 0", commitAt(t, h, "a2", 0, 2, kept...), 0)
	wantCodes(t, "the next incarnation at a newer epoch", commitAt(t, h, "a2", a2.epoch+1, 3, kept...), kerrStaleMemberEpoch)
	checkAssignmentEpochs(t, h, "g")
}

// TestTxnOffsetCommitAssignmentEpochs: a transactional commit into a consumer group
// is checked as an OffsetCommit (Kafka validates both with validateOffsetCommit): an
// older epoch is accepted for partitions held since then; one partition that fails
// fails the whole request, with ILLEGAL_GENERATION as Kafka answers a transactional
// producer.
func TestTxnOffsetCommitAssignmentEpochs(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.set("t", 2)
	tid := topicIDOf("t")
	a := &cmember{id: "a", topics: []string{"t"}}
	settle(t, h, "g", []*cmember{a}, 2)
	e1 := a.epoch
	b := &cmember{id: "b", topics: []string{"t"}}
	settle(t, h, "g", []*cmember{a, b}, 2)
	kept, taken := TopicPartition{"t", a.owned[tid][0]}, TopicPartition{"t", b.owned[tid][0]}
	for _, tc := range []struct {
		what    string
		epoch   int32
		offsets map[TopicPartition]int64
		want    int16
	}{
		{"older epoch, partition held since then", e1, map[TopicPartition]int64{kept: 5}, 0},
		{"older epoch, with b's partition", e1, map[TopicPartition]int64{kept: 6, taken: 6}, kerr.IllegalGeneration.Code},
		{"before the partition's assignment", e1 - 1, map[TopicPartition]int64{kept: 7}, kerr.IllegalGeneration.Code},
		{"newer epoch", a.epoch + 1, map[TopicPartition]int64{kept: 8}, kerr.IllegalGeneration.Code},
	} {
		r := h.txnCommit("g", 7, "a", tc.epoch, tc.offsets)
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != tc.want {
					t.Fatalf("%s: partition %d error %d, want %d", tc.what, rp.Partition, rp.ErrorCode, tc.want)
				}
			}
		}
	}
	h.marker(7, true)
	got := h.fetch("g")
	if _, ok := got[taken]; got[kept] != 5 || ok {
		t.Fatalf("offsets after the commit marker: %v, want %v at 5 and nothing for %v", got, kept, taken)
	}
}

// TestConsumerGroupStaticLeaveReleasesRevocations: a static member that leaves for a
// while (epoch -2) while it still has partitions to revoke gives those up at once, as
// Kafka's consumerGroupStaticMemberGroupLeave clears its partitions pending
// revocation: the member they were moved to gets them at its next heartbeat instead
// of waiting for the static member's return or its session's end. The partitions it
// keeps stay its own, and its next incarnation gets them back.
func TestConsumerGroupStaticLeaveReleasesRevocations(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.set("t", 6)
	tid := topicIDOf("t")
	a := &cmember{id: "a", instance: "ia", topics: []string{"t"}}
	b := &cmember{id: "b", topics: []string{"t"}}
	settle(t, h, "g", []*cmember{a, b}, 6)
	h.clock.Advance(h.cfg.ConsumerAssignmentInterval) // c's join is assigned at once
	c := &cmember{id: "c", topics: []string{"t"}}
	h.cgHeartbeat("g", c, true) // joins: the target moves a partition of a's and one of b's to c
	held := a.owned.clone()
	h.cgHeartbeat("g", a, true) // told to revoke one; it never reports doing so
	var revoking []int32
	for _, p := range held[tid] {
		if !a.owned.has(tid, p) {
			revoking = append(revoking, p)
		}
	}
	if len(revoking) == 0 {
		t.Fatalf("a was asked to revoke nothing: held %v, now %v", held, a.owned)
	}
	kept := a.owned.clone()
	a.epoch = staticLeaveEpoch
	if r := h.cgHeartbeat("g", a, false); r.ErrorCode != 0 {
		t.Fatalf("static leave: error %d", r.ErrorCode)
	}
	a.gone = true
	for range 3 { // b revokes its own and reports it; c takes what is free
		h.cgHeartbeat("g", b, true)
		h.cgHeartbeat("g", c, true)
	}
	for _, p := range revoking {
		if !c.owned.has(tid, p) {
			t.Fatalf("c owns %v; partition %d, pending revocation when its static owner left, was not released to it", c.owned, p)
		}
	}
	a2 := &cmember{id: "a2", instance: "ia", topics: []string{"t"}}
	if r := h.cgHeartbeat("g", a2, true); r.ErrorCode != 0 || !a2.owned.equal(kept) {
		t.Fatalf("static return: error %d, owns %v, want %v", r.ErrorCode, a2.owned, kept)
	}
	checkExclusive(t, []*cmember{a2, b, c})
	checkAssignmentEpochs(t, h, "g")
}
