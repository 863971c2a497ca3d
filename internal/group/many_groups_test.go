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
	probe := &kmsg.OffsetFetchRequest{Version: 8, Groups: []kmsg.OffsetFetchRequestGroup{{Group: "other"}}}
	// answeredWhile runs a request and answers how many probes were answered between
	// the moment it was seen holding the lock and its end (-1: it ended unseen).
	answeredWhile := func(run func()) int {
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
			answered = answeredWhile(tc.run)
		}
		if answered < 3 {
			t.Errorf("%s of %d groups: %d other requests answered while it ran, want at least 3", tc.api, len(names), answered)
		}
	}
}
