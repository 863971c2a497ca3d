package group

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeEpochs returns a consumer group's state, group epoch and assignment epoch
// as ConsumerGroupDescribe shows them.
func describeEpochs(t *testing.T, h *harness, group string) (string, int32, int32) {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp := <-h.c.ConsumerGroupDescribe(req)
	g := resp.Groups[0]
	if g.ErrorCode != 0 {
		t.Fatalf("describe %s: error %d", group, g.ErrorCode)
	}
	return g.State, g.Epoch, g.AssignmentEpoch
}

// TestConsumerGroupAssignmentInterval: changes within the group's assignment interval
// (KIP-1263) bump the group epoch at once but are assigned together once the interval
// has passed since the last assignment, at the next heartbeat; a member heartbeating
// while the group waits is asked back when the assignment is due; the time of the
// last assignment survives a reload.
func TestConsumerGroupAssignmentInterval(t *testing.T) {
	h, ft := newConsumerHarness(t, func(c *Config) {
		c.ConsumerHeartbeatInterval = 5 * time.Second
		c.ConsumerAssignmentInterval = time.Second
	})
	ft.set("t", 6)
	a := &cmember{id: "a", topics: []string{"t"}}
	if r := h.cgHeartbeat("g", a, true); r.ErrorCode != 0 || a.owned.size() != 6 {
		t.Fatalf("a joins: error %d, owns %v: want all 6 partitions at once", r.ErrorCode, a.owned)
	}
	first := a.epoch

	h.clock.Advance(100 * time.Millisecond)
	b := &cmember{id: "b", topics: []string{"t"}}
	r := h.cgHeartbeat("g", b, true)
	if r.ErrorCode != 0 || b.owned.size() != 0 || b.epoch != first {
		t.Fatalf("b joins within the interval: error %d, epoch %d, owns %v: want nothing yet at the assignment epoch %d", r.ErrorCode, b.epoch, b.owned, first)
	}
	if r.HeartbeatIntervalMillis != 900 {
		t.Fatalf("b is asked back in %d ms, want 900 (when the next assignment is due)", r.HeartbeatIntervalMillis)
	}
	h.clock.Advance(200 * time.Millisecond)
	c := &cmember{id: "c", topics: []string{"t"}}
	if r := h.cgHeartbeat("g", c, true); r.ErrorCode != 0 || c.owned.size() != 0 || r.HeartbeatIntervalMillis != 700 {
		t.Fatalf("c joins within the interval: error %d, owns %v, asked back in %d ms: want nothing, 700 ms", r.ErrorCode, c.owned, r.HeartbeatIntervalMillis)
	}
	state, epoch, assignment := describeEpochs(t, h, "g")
	if state != "Assigning" || epoch != first+2 || assignment != first {
		t.Fatalf("describe: %s at epoch %d, assignment epoch %d; want Assigning at %d, assignment epoch %d", state, epoch, assignment, first+2, first)
	}

	// A reload keeps the time of the last assignment: the group still waits.
	h.start()
	h.clock.Advance(600 * time.Millisecond) // 900 ms after a's assignment
	if r := h.cgHeartbeat("g", a, true); r.ErrorCode != 0 || a.owned.size() != 6 || r.HeartbeatIntervalMillis != 100 {
		t.Fatalf("a within the interval after a reload: error %d, owns %v, asked back in %d ms: want its 6, 100 ms", r.ErrorCode, a.owned, r.HeartbeatIntervalMillis)
	}
	if state, _, _ := describeEpochs(t, h, "g"); state != "Assigning" {
		t.Fatalf("after a reload within the interval: %s, want Assigning", state)
	}

	// Due: the next heartbeat assigns both joins at once, at the group epoch.
	h.clock.Advance(100 * time.Millisecond)
	if r := h.cgHeartbeat("g", a, true); r.ErrorCode != 0 {
		t.Fatalf("a once due: error %d", r.ErrorCode)
	}
	if state, epoch, assignment := describeEpochs(t, h, "g"); state == "Assigning" || assignment != epoch || epoch != first+2 {
		t.Fatalf("once due: %s at epoch %d, assignment epoch %d; want the assignment at %d", state, epoch, assignment, first+2)
	}
	settle(t, h, "g", []*cmember{a, b, c}, 6)
	for _, m := range []*cmember{a, b, c} {
		if m.owned.size() != 2 || m.epoch != first+2 {
			t.Errorf("%s owns %v at epoch %d, want 2 partitions at %d", m.id, m.owned, m.epoch, first+2)
		}
	}

	// A member leaving bumps the epoch; the next heartbeat after the interval assigns it.
	h.clock.Advance(2 * time.Second)
	c.epoch = leaveEpoch
	if r := h.cgHeartbeat("g", c, false); r.ErrorCode != 0 {
		t.Fatalf("c leaves: error %d", r.ErrorCode)
	}
	c.gone = true
	settle(t, h, "g", []*cmember{a, b, c}, 6)
}

// TestDueAssignmentAnsweredOnceCommitted: the heartbeat that finds a waiting group's
// assignment due computes it, and is answered with it only once the records of that
// assignment are committed. A coordinator whose write fails (its leadership moved
// while it was paused, the cluster cell of TestCluster848FailoverWhileAssigning)
// answers an error that sends the member to find its coordinator again, and the group reloaded from its log still waits for that
// assignment, which the next heartbeat computes again. Answered before the commit, the
// member would act on an assignment that the next coordinator may compute differently.
func TestDueAssignmentAnsweredOnceCommitted(t *testing.T) {
	h, ft := newConsumerHarness(t, func(c *Config) {
		c.ConsumerHeartbeatInterval = 5 * time.Second
		c.ConsumerAssignmentInterval = time.Second
	})
	ft.set("t", 6)
	a := &cmember{id: "a", topics: []string{"t"}}
	if r := h.cgHeartbeat("g", a, true); r.ErrorCode != 0 || a.owned.size() != 6 {
		t.Fatalf("a joins: error %d, owns %v", r.ErrorCode, a.owned)
	}
	h.clock.Advance(100 * time.Millisecond)
	b := &cmember{id: "b", topics: []string{"t"}}
	if r := h.cgHeartbeat("g", b, true); r.ErrorCode != 0 || b.owned.size() != 0 {
		t.Fatalf("b joins within the interval: error %d, owns %v", r.ErrorCode, b.owned)
	}
	_, epoch, waiting := describeEpochs(t, h, "g")
	h.clock.Advance(time.Second) // due

	release := holdWrite(h, "the due assignment's write held", func() <-chan *kmsg.ConsumerGroupHeartbeatResponse {
		return h.c.ConsumerGroupHeartbeat(a.heartbeat("g", true), "client", "/127.0.0.1", nil)
	})
	if r := release(errors.New("leadership moved during the write")); r.ErrorCode != kerrNotCoordinator && r.ErrorCode != kerrCoordinatorNotAvailable {
		t.Fatalf("a's heartbeat whose assignment was not written: error %d, epoch %d, assignment %v; want NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE and no assignment",
			r.ErrorCode, r.MemberEpoch, r.Assignment)
	}
	waitFor(t, "the group reloaded from its log, still waiting to assign b", func() bool {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{"g"}
		g := recv(t, h.c.ConsumerGroupDescribe(req)).Groups[0]
		return g.ErrorCode == 0 && g.State == "Assigning" && g.Epoch == epoch && g.AssignmentEpoch == waiting
	})
	if r := h.cgHeartbeat("g", a, true); r.ErrorCode != 0 || a.owned.size() != 3 {
		t.Fatalf("a's next heartbeat: error %d, owns %v; want 3 partitions revoked for b", r.ErrorCode, a.owned)
	}
	if _, e, assigned := describeEpochs(t, h, "g"); e != epoch || assigned != epoch {
		t.Fatalf("after a's next heartbeat: group epoch %d, assignment epoch %d; want the assignment at %d", e, assigned, epoch)
	}
	settle(t, h, "g", []*cmember{a, b}, 6)
}

// TestShareDueAssignmentAnsweredOnceCommitted is TestDueAssignmentAnsweredOnceCommitted
// for a share group (TestClusterShareFailoverWhileAssigning's rule).
func TestShareDueAssignmentAnsweredOnceCommitted(t *testing.T) {
	h, ft := newConsumerHarness(t, func(c *Config) {
		c.ShareHeartbeatInterval = 5 * time.Second
		c.ShareAssignmentInterval = time.Second
	})
	ft.set("t", 4)
	a := &smember{id: "a", topics: []string{"t"}}
	if r := h.shHeartbeat("g", a); r.ErrorCode != 0 || a.owned.size() != 4 {
		t.Fatalf("a joins: error %d, owns %v", r.ErrorCode, a.owned)
	}
	h.clock.Advance(100 * time.Millisecond)
	b := &smember{id: "b", topics: []string{"t"}}
	if r := h.shHeartbeat("g", b); r.ErrorCode != 0 || b.owned.size() != 0 {
		t.Fatalf("b joins within the interval: error %d, owns %v", r.ErrorCode, b.owned)
	}
	_, epoch, waiting := describeShareEpochs(t, h, "g")
	h.clock.Advance(time.Second) // due

	release := holdWrite(h, "the due assignment's write held", func() <-chan *kmsg.ShareGroupHeartbeatResponse {
		return h.c.ShareGroupHeartbeat(a.heartbeat("g"), "client", "/127.0.0.1")
	})
	if r := release(errors.New("leadership moved during the write")); r.ErrorCode != kerrNotCoordinator && r.ErrorCode != kerrCoordinatorNotAvailable {
		t.Fatalf("a's heartbeat whose assignment was not written: error %d, epoch %d, assignment %v; want NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE and no assignment",
			r.ErrorCode, r.MemberEpoch, r.Assignment)
	}
	waitFor(t, "the group reloaded from its log, still waiting to assign b", func() bool {
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.GroupIDs = []string{"g"}
		g := recv(t, h.c.ShareGroupDescribe(req)).Groups[0]
		return g.ErrorCode == 0 && g.GroupEpoch == epoch && g.AssignmentEpoch == waiting
	})
	if r := h.shHeartbeat("g", a); r.ErrorCode != 0 || a.owned.size() != 2 || a.epoch != epoch {
		t.Fatalf("a's next heartbeat: error %d, epoch %d, owns %v; want 2 partitions at epoch %d", r.ErrorCode, a.epoch, a.owned, epoch)
	}
	if r := h.shHeartbeat("g", b); r.ErrorCode != 0 || b.owned.size() != 2 {
		t.Fatalf("b's next heartbeat: error %d, owns %v; want the other 2", r.ErrorCode, b.owned)
	}
}

// TestConsumerGroupAssignmentIntervalGroupConfig: a group's own
// consumer.assignment.interval.ms wins over the broker's; 0 assigns every change.
func TestConsumerGroupAssignmentIntervalGroupConfig(t *testing.T) {
	h, ft := newConsumerHarness(t, func(c *Config) { c.ConsumerAssignmentInterval = time.Hour })
	zero := time.Duration(0)
	h.timeouts = func(group string) Timeouts {
		if group == "eager" {
			return Timeouts{ConsumerAssignment: &zero}
		}
		return Timeouts{}
	}
	h.start()
	ft.set("t", 4)
	for _, group := range []string{"eager", "batched"} {
		a := &cmember{id: group + "-a", topics: []string{"t"}}
		b := &cmember{id: group + "-b", topics: []string{"t"}}
		h.cgHeartbeat(group, a, true)
		h.cgHeartbeat(group, b, true)
		state, epoch, assignment := describeEpochs(t, h, group)
		switch {
		case group == "eager" && (state == "Assigning" || assignment != epoch):
			t.Errorf("%s: %s at epoch %d, assignment epoch %d: want b's join assigned at once", group, state, epoch, assignment)
		case group == "batched" && (state != "Assigning" || assignment == epoch):
			t.Errorf("%s: %s at epoch %d, assignment epoch %d: want b's join waiting for the interval", group, state, epoch, assignment)
		}
	}
}

// describeShareEpochs returns a share group's state, group epoch and assignment epoch
// as ShareGroupDescribe shows them.
func describeShareEpochs(t *testing.T, h *harness, group string) (string, int32, int32) {
	t.Helper()
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{group}
	resp := <-h.c.ShareGroupDescribe(req)
	g := resp.Groups[0]
	if g.ErrorCode != 0 {
		t.Fatalf("describe %s: error %d", group, g.ErrorCode)
	}
	return g.GroupState, g.GroupEpoch, g.AssignmentEpoch
}

// TestShareGroupAssignmentInterval: as a consumer group's, a share group's changes
// within its assignment interval are assigned together once it has passed, at the next
// heartbeat (a member leaving too); members heartbeating meanwhile keep their
// assignment at the assignment epoch and are asked back when the next is due; the
// time of the last assignment survives a reload.
func TestShareGroupAssignmentInterval(t *testing.T) {
	h, ft := newConsumerHarness(t, func(c *Config) {
		c.ShareHeartbeatInterval = 5 * time.Second
		c.ShareAssignmentInterval = time.Second
	})
	ft.set("t", 4)
	heartbeat := func(m *smember, owns int, askedBack int32) {
		t.Helper()
		r := h.shHeartbeat("g", m)
		if r.ErrorCode != 0 || m.owned.size() != owns || r.HeartbeatIntervalMillis != askedBack {
			t.Fatalf("heartbeat of %s: error %d, owns %v, asked back in %d ms; want %d partitions, %d ms",
				m.id, r.ErrorCode, m.owned, r.HeartbeatIntervalMillis, owns, askedBack)
		}
	}
	epochs := func(wantGroup, wantAssignment int32) {
		t.Helper()
		state, epoch, assignment := describeShareEpochs(t, h, "g")
		if state != "Stable" || epoch != wantGroup || assignment != wantAssignment {
			t.Fatalf("describe: %s, group epoch %d, assignment epoch %d; want Stable, %d, %d", state, epoch, assignment, wantGroup, wantAssignment)
		}
	}
	a := &smember{id: "a", topics: []string{"t"}}
	heartbeat(a, 4, 5000)
	first := a.epoch

	h.clock.Advance(100 * time.Millisecond)
	b := &smember{id: "b", topics: []string{"t"}}
	heartbeat(b, 0, 900)
	if b.epoch != first {
		t.Fatalf("b joined within the interval at epoch %d, want the assignment epoch %d", b.epoch, first)
	}
	h.clock.Advance(100 * time.Millisecond)
	heartbeat(a, 4, 800)
	epochs(first+1, first)

	h.start() // a reload keeps the time of the last assignment
	h.clock.Advance(700 * time.Millisecond)
	heartbeat(a, 4, 100)
	h.clock.Advance(100 * time.Millisecond)
	heartbeat(a, 2, 5000) // due: a's heartbeat computes the assignment
	heartbeat(b, 2, 5000)
	epochs(first+1, first+1)
	if a.epoch != first+1 || b.epoch != first+1 {
		t.Fatalf("members at epochs %d and %d, want %d", a.epoch, b.epoch, first+1)
	}

	// b leaves 100 ms later: its partitions go to a once the interval has passed.
	h.clock.Advance(100 * time.Millisecond)
	b.epoch = leaveEpoch
	if r := h.shHeartbeat("g", b); r.ErrorCode != 0 {
		t.Fatalf("b leaves: error %d", r.ErrorCode)
	}
	heartbeat(a, 2, 900)
	epochs(first+2, first+1)
	h.clock.Advance(900 * time.Millisecond)
	heartbeat(a, 4, 5000)
	epochs(first+2, first+2)
}

// TestShareGroupRecordWithoutTargetEpoch: a share group record written before Samsa
// kept the assignment epoch loads with the assignment at the group epoch, as it then
// always was.
func TestShareGroupRecordWithoutTargetEpoch(t *testing.T) {
	groups := map[string]*group{}
	d := decoded{kind: kindShareGroup, group: "g", shareGroup: &shareGroupValue{Epoch: 7}}
	if err := replayShare(groups, 0, d); err != nil {
		t.Fatal(err)
	}
	if sg := groups["g"].share; sg.targetEpoch != 7 || !sg.assignedAt.IsZero() {
		t.Fatalf("assignment epoch %d, assigned at %v; want 7 and not known", sg.targetEpoch, sg.assignedAt)
	}
}

// TestAssignmentDueIn: the wait for the next assignment is what is left of the
// interval, none once it has passed or without one, and none when the last
// assignment's time was recorded ahead of the clock.
func TestAssignmentDueIn(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		last     time.Time
		interval time.Duration
		want     time.Duration
	}{
		{time.Time{}, time.Second, 0},
		{now, 0, 0},
		{now.Add(-300 * time.Millisecond), time.Second, 700 * time.Millisecond},
		{now.Add(-time.Second), time.Second, 0},
		{now.Add(-time.Hour), time.Second, 0},
		{now.Add(time.Hour), time.Second, 0}, // another coordinator's clock ran ahead
	} {
		if got := assignmentDueIn(tc.last, tc.interval, now); got != tc.want {
			t.Errorf("assignmentDueIn(now%+v, %v) = %v, want %v", tc.last.Sub(now), tc.interval, got, tc.want)
		}
	}
}
