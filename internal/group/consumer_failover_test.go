package group

import (
	"testing"
)

// TestConsumerGroupReloadMidReconciliation: a partition being revoked from a and
// pending for b when the coordinator restarts (a failover replays the same records):
// after the reload b must not get it before a has reported it gone, and both keep
// their member epochs.
func TestConsumerGroupReloadMidReconciliation(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.set("t", 4)
	a := &cmember{id: "a", topics: []string{"t"}}
	settle(t, h, "g", []*cmember{a}, 4)
	h.clock.Advance(h.cfg.ConsumerAssignmentInterval) // b's join is assigned at once
	b := &cmember{id: "b", topics: []string{"t"}}
	if r := h.cgHeartbeat("g", b, true); r.ErrorCode != 0 {
		t.Fatalf("b joins: error %d", r.ErrorCode)
	}
	// a is told to revoke two partitions; it has not yet.
	owned := a.owned.clone()
	if r := h.cgHeartbeat("g", a, true); r.ErrorCode != 0 {
		t.Fatalf("a heartbeat: error %d", r.ErrorCode)
	}
	revoking := Assignment{}
	for tid, ps := range owned {
		for _, p := range ps {
			if !a.owned.has(tid, p) {
				revoking.add(tid, p)
			}
		}
	}
	if revoking.size() != 2 {
		t.Fatalf("a asked to revoke %v, want two partitions", revoking)
	}
	aKeeps, aEpoch := a.owned, a.epoch
	a.owned = owned // the client still holds them
	if r := h.cgHeartbeat("g", b, true); r.ErrorCode != 0 || b.owned.intersects(revoking) {
		t.Fatalf("b before the reload: error %d, owns %v while a revokes %v", r.ErrorCode, b.owned, revoking)
	}
	bEpoch := b.epoch

	h.start() // the new coordinator replays the partition

	for range 3 {
		r := h.cgHeartbeat("g", b, true)
		if r.ErrorCode != 0 || b.epoch != bEpoch {
			t.Fatalf("b after the reload: error %d, epoch %d (want %d)", r.ErrorCode, b.epoch, bEpoch)
		}
		if b.owned.intersects(revoking) {
			t.Fatalf("b got %v while a still owns %v", b.owned, revoking)
		}
		r = h.cgHeartbeat("g", a, false) // keepalive: a still revoking
		if r.ErrorCode != 0 || a.epoch != aEpoch {
			t.Fatalf("a after the reload: error %d, epoch %d (want %d)", r.ErrorCode, a.epoch, aEpoch)
		}
		a.owned = owned
	}
	a.owned = aKeeps // a revokes
	settle(t, h, "g", []*cmember{a, b}, 4)
	checkExclusive(t, []*cmember{a, b})
}

// TestConsumerGroupReloadStaticAway: a static member away (epoch -2) when the
// coordinator restarts comes back to its partitions and epoch.
func TestConsumerGroupReloadStaticAway(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.set("t", 4)
	a := &cmember{id: "a", instance: "ia", topics: []string{"t"}}
	b := &cmember{id: "b", instance: "ib", topics: []string{"t"}}
	settle(t, h, "g", []*cmember{a, b}, 4)
	kept, epoch := a.owned.clone(), a.epoch
	a.epoch = staticLeaveEpoch
	if r := h.cgHeartbeat("g", a, false); r.ErrorCode != 0 {
		t.Fatalf("static leave: error %d", r.ErrorCode)
	}
	h.start()
	if r := h.cgHeartbeat("g", b, true); r.ErrorCode != 0 || b.owned.intersects(kept) {
		t.Fatalf("b after the reload: error %d, owns %v (a away with %v)", r.ErrorCode, b.owned, kept)
	}
	a2 := &cmember{id: "a2", instance: "ia", topics: []string{"t"}}
	if r := h.cgHeartbeat("g", a2, true); r.ErrorCode != 0 || !a2.owned.equal(kept) || a2.epoch != epoch {
		t.Fatalf("static rejoin after reload: error %d, owns %v (want %v), epoch %d (want %d)", r.ErrorCode, a2.owned, kept, a2.epoch, epoch)
	}
	settle(t, h, "g", []*cmember{a2, b}, 4)
}

// TestConsumerGroupTopicRecreated: a regex member's topic is deleted and created again
// with the same name (a new topic id): the member gives up the old id's partitions
// and gets the new id's, also across a reload in between.
func TestConsumerGroupTopicRecreated(t *testing.T) {
	ids := map[string]TopicID{}
	parts := map[string]int32{}
	var version int64
	snapshot := func() *Topics {
		out := &Topics{Version: version, ByName: map[string]TopicInfo{}, ByID: map[TopicID]string{}}
		for name, n := range parts {
			info := TopicInfo{Name: name, ID: ids[name], Partitions: n}
			out.ByName[name] = info
			out.ByID[info.ID] = name
			out.Names = append(out.Names, name)
		}
		return out
	}
	h := &harness{t: t, log: newMemLog(), cfg: testConfig(), clock: newFakeClock(), topics: snapshot}
	h.start()
	create := func(name string, n int32, id byte) {
		ids[name], parts[name] = TopicID{id}, n
		version++
	}
	create("re-a", 2, 1)
	create("other", 2, 9)
	a := &cmember{id: "a", regex: "re-.*"}
	b := &cmember{id: "b", regex: "re-.*"}
	members := []*cmember{a, b}
	settle(t, h, "g", members, 2)

	delete(parts, "re-a")
	delete(ids, "re-a")
	version++
	settle(t, h, "g", members, 0)
	h.start()
	create("re-a", 4, 2)
	settle(t, h, "g", members, 4)
	for _, m := range members {
		if len(m.owned[TopicID{1}]) > 0 || len(m.owned[TopicID{9}]) > 0 {
			t.Fatalf("%s owns %v", m.id, m.owned)
		}
	}
	// Deleted and recreated between two heartbeats.
	delete(parts, "re-a")
	version++
	create("re-a", 3, 3)
	settle(t, h, "g", members, 3)
	for _, m := range members {
		if len(m.owned[TopicID{2}]) > 0 {
			t.Fatalf("%s still owns a partition of the deleted topic id: %v", m.id, m.owned)
		}
	}
}

// TestConsumerGroupReloadRegexUnderACLs: with an authorizer, a member's regex resolves
// through the ACL check its heartbeats carry, which a reload does not bring back. Until
// the member heartbeats again, its regex still resolves to the topics it holds: another
// member's heartbeat after the reload starts no new assignment (before, the regex
// resolved to nothing, the group epoch moved and the member's partitions were taken).
func TestConsumerGroupReloadRegexUnderACLs(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.authorize = true
	ft.set("pa", 2)
	ft.set("pb", 2)
	ft.set("secret", 2)
	a := &cmember{id: "a", regex: "p.*|secret", describable: func(topic string) bool { return topic != "secret" }}
	b := &cmember{id: "b", topics: []string{"pb"}}
	settle(t, h, "g", []*cmember{a, b}, 4)
	if a.owned[topicIDOf("secret")] != nil {
		t.Fatalf("a owns %v of a topic it may not describe", a.owned[topicIDOf("secret")])
	}
	aOwned, aEpoch, bOwned, bEpoch := a.owned.clone(), a.epoch, b.owned.clone(), b.epoch

	h.start() // the new coordinator replays the partition; a has not heartbeated since

	for range 3 {
		if r := h.cgHeartbeat("g", b, true); r.ErrorCode != 0 || b.epoch != bEpoch || !b.owned.equal(bOwned) {
			t.Fatalf("b after the reload: error %d, epoch %d (was %d), owns %v (was %v)", r.ErrorCode, b.epoch, bEpoch, b.owned, bOwned)
		}
	}
	if r := h.cgHeartbeat("g", a, false); r.ErrorCode != 0 || a.epoch != aEpoch || !a.owned.equal(aOwned) {
		t.Fatalf("a after the reload: error %d, epoch %d (was %d), owns %v (was %v)", r.ErrorCode, a.epoch, aEpoch, a.owned, aOwned)
	}
}

// TestConsumerGroupRegexUnderACLsNewTopic: with an authorizer, a topic created that a
// member's regex matches (and its ACLs let it describe) is assigned to it also when
// another member's heartbeat is the first to see the topic: the member's ACL check
// outlives the replay of its own records.
func TestConsumerGroupRegexUnderACLsNewTopic(t *testing.T) {
	h, ft := newConsumerHarness(t, nil)
	ft.authorize = true
	ft.set("pa", 2)
	ft.set("pb", 2)
	a := &cmember{id: "a", regex: "p.*|secret", describable: func(topic string) bool { return topic != "secret" }}
	b := &cmember{id: "b", topics: []string{"pb"}}
	settle(t, h, "g", []*cmember{a, b}, 4)
	ft.set("pc", 2)
	ft.set("secret", 2)
	if r := h.cgHeartbeat("g", b, false); r.ErrorCode != 0 {
		t.Fatalf("b: error %d", r.ErrorCode)
	}
	for range 10 { // a reconciles (b keeps pb; pa and pc are a's alone)
		for _, m := range []*cmember{b, a} {
			if r := h.cgHeartbeat("g", m, true); r.ErrorCode != 0 {
				t.Fatalf("%s: error %d", m.id, r.ErrorCode)
			}
		}
		checkExclusive(t, []*cmember{a, b})
		passAssignmentInterval(t, h, "g")
	}
	if len(a.owned[topicIDOf("pc")]) != 2 || a.owned[topicIDOf("secret")] != nil {
		t.Fatalf("a owns %v, want both partitions of pc and none of secret", a.owned)
	}
}
