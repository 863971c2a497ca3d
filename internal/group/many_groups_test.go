package group

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestManyGroupsDoNotHoldTheCoordinator: a request naming many groups
// (DescribeGroups, ConsumerGroupDescribe, ShareGroupDescribe, OffsetFetch v8+,
// DeleteGroups) takes the coordinator's lock for one group at a time, so another
// client's requests are answered while it runs: a request naming a million groups
// (some 14 MB) held it for seconds, and every heartbeat and commit of every group
// with it.
func TestManyGroupsDoNotHoldTheCoordinator(t *testing.T) {
	h := newHarness(t, nil)
	names := make([]string, 50_000)
	fetchAll := &kmsg.OffsetFetchRequest{Version: 8}
	for i := range names {
		names[i] = fmt.Sprintf("group-%08d", i)
		fetchAll.Groups = append(fetchAll.Groups, kmsg.OffsetFetchRequestGroup{Group: names[i]})
	}
	for _, tc := range []struct {
		api string
		run func()
	}{
		{"DescribeGroups", func() { h.c.DescribeGroups(&kmsg.DescribeGroupsRequest{Version: 5, Groups: names}) }},
		{"ConsumerGroupDescribe", func() { <-h.c.ConsumerGroupDescribe(&kmsg.ConsumerGroupDescribeRequest{Groups: names}) }},
		{"ShareGroupDescribe", func() { <-h.c.ShareGroupDescribe(&kmsg.ShareGroupDescribeRequest{Version: 1, GroupIDs: names}) }},
		{"OffsetFetch", func() { h.c.OffsetFetch(fetchAll) }},
		{"DeleteGroups", func() { <-h.c.DeleteGroups(&kmsg.DeleteGroupsRequest{Groups: names}) }},
	} {
		answered := -1
		for try := 0; try < 5 && answered < 0; try++ { // a loaded machine may not show it holding the lock
			answered = answeredWhile(h, tc.run)
		}
		if answered < 3 {
			t.Errorf("%s of %d groups: %d other requests answered while it ran, want at least 3", tc.api, len(names), answered)
		}
	}
}

// TestListGroupsDoesNotHoldTheCoordinator: ListGroups, and Groups (the metrics'
// list), take the coordinator's lock per chunk of groups, so other requests are
// answered while they list many groups (200,000 groups cost one OffsetCommit each);
// they held the lock for the whole list. ListGroups still answers each group once,
// filtered as asked.
func TestListGroupsDoesNotHoldTheCoordinator(t *testing.T) {
	h := newHarness(t, nil)
	const n = 50_000
	h.c.mu.Lock()
	part := h.c.mu.partitions[0]
	for i := range n {
		id := fmt.Sprintf("group-%08d", i)
		g := newGroup(id, 0, h.clock.Now())
		if i%2 == 1 {
			g.state = StateDead // not listed
		}
		part.groups[id] = g
	}
	h.c.mu.Unlock()
	var resp *kmsg.ListGroupsResponse
	var summaries []GroupSummary
	for _, tc := range []struct {
		api string
		run func()
	}{
		{"ListGroups", func() {
			resp = h.c.ListGroups(&kmsg.ListGroupsRequest{Version: 5, StatesFilter: []string{"empty"}, TypesFilter: []string{"classic"}})
		}},
		{"Groups (metrics)", func() { summaries = h.c.Groups() }},
	} {
		answered := -1
		for try := 0; try < 5 && answered < 0; try++ { // a loaded machine may not show it holding the lock
			answered = answeredWhile(h, tc.run)
		}
		if answered < 3 {
			t.Errorf("%s of %d groups: %d other requests answered while it ran, want at least 3", tc.api, n, answered)
		}
	}
	if len(summaries) != n {
		t.Errorf("Groups listed %d groups, want %d", len(summaries), n)
	}
	if len(resp.Groups) != n/2 {
		t.Fatalf("ListGroups listed %d groups, want %d", len(resp.Groups), n/2)
	}
	for i, g := range resp.Groups {
		if want := fmt.Sprintf("group-%08d", 2*i); g.Group != want || g.GroupState != "Empty" || g.GroupType != "classic" {
			t.Fatalf("group %d listed as %s %s %s, want %s Empty classic", i, g.Group, g.GroupState, g.GroupType, want)
		}
	}
}

// answeredWhile runs a request and answers how many other requests (an OffsetFetch
// of another group) were answered between the moment it was seen holding the
// coordinator's lock and its end (-1: it ended unseen).
func answeredWhile(h *harness, run func()) int {
	probe := &kmsg.OffsetFetchRequest{Version: 8, Groups: []kmsg.OffsetFetchRequestGroup{{Group: "other"}}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		run()
	}()
	for h.c.mu.TryLock() {
		h.c.mu.Unlock()
		select {
		case <-done:
			return -1
		default:
		}
	}
	answered := 0
	for {
		h.c.OffsetFetch(probe)
		select {
		case <-done:
			return answered
		default:
			answered++
		}
	}
}
