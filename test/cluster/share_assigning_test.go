package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestClusterShareFailoverWhileAssigning: the fault matrix's cells for a share group
// waiting for its assignment interval (KIP-1263). With the group's
// share.assignment.interval.ms at 5 s, a fourth share consumer joins three that read
// a topic of six partitions under load; ShareGroupDescribe shows the group epoch ahead
// of the assignment epoch, and the group's coordinator (the leader of its
// __consumer_offsets partition) is killed (kill -9), paused (SIGSTOP, until another
// node took the group) or stopped cleanly (SIGTERM) then. The next coordinator loads the group with the time of
// its last assignment and assigns the fourth consumer; the old one comes back. The
// share ledger holds (no record handed out after its ACCEPT was confirmed, none
// confirmed twice), every record the producer had acknowledged is accepted, and the
// history check holds.
func TestClusterShareFailoverWhileAssigning(t *testing.T) {
	t.Parallel()
	for _, fault := range []string{"kill", "pause", "stop"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			testShareFailoverWhileAssigning(t, fault)
		})
	}
}

func testShareFailoverWhileAssigning(t *testing.T, fault string) {
	const topic, partitions = "shared-assigning", 6
	c := testutil.StartCluster(t, testutil.ClusterOptions{Overrides: append(shareOverrides, replicationOverrides...)})
	inv := watchInvariants(t, c)
	admin := newNodeClient(t, c.Node(1).Addr)
	createTopic(t, admin, topic, partitions, 3)
	const groupID = "shared-assigning-group"
	setShareGroupConfig(t, c, admin, groupID, "share.auto.offset.reset", "earliest")
	setShareGroupConfig(t, c, admin, groupID, "share.assignment.interval.ms", "5000")

	led := newShareLedger()
	addrs := c.BrokerAddrs()
	consumers := startShareConsumers(t, addrs, groupID, topic, led, &holdGate{}, nil)
	p := startShareProducer(t, addrs, topic, led)
	led.waitConfirmed(t, 500, 90*time.Second, "500 records accepted by the first three consumers")

	adm := kadm.NewClient(admin.cl)
	// described returns the group's members, its group and assignment epochs, and the
	// partitions of topic each member is assigned.
	var last string
	described := func(adm *kadm.Client) (members map[string]int, groupEpoch, assignmentEpoch int32, ok bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d, err := adm.DescribeShareGroups(ctx, groupID)
		if err != nil || d[groupID].Err != nil {
			return nil, 0, 0, false
		}
		g := d[groupID]
		members = map[string]int{}
		for _, m := range g.Members {
			members[m.MemberID] = len(m.Assignment[topic])
		}
		last = fmt.Sprintf("%s, group epoch %d, assignment epoch %d, partitions by member %v", g.GroupState, g.GroupEpoch, g.AssignmentEpoch, members)
		return members, g.GroupEpoch, g.AssignmentEpoch, true
	}
	defer func() {
		if t.Failed() {
			t.Logf("last described: %s", last)
		}
	}()
	assigned := func(adm *kadm.Client, n int) func() bool {
		return func() bool {
			members, epoch, assignment, ok := described(adm)
			if !ok || len(members) != n || epoch != assignment {
				return false
			}
			for _, k := range members {
				if k == 0 {
					return false
				}
			}
			return true
		}
	}
	testutil.WaitFor(t, 60*time.Second, assigned(adm, 3), "three members assigned partitions")

	consumers = append(consumers, startShareConsumer(t, "m3", addrs, groupID, topic, led, &holdGate{}, nil))
	testutil.WaitFor(t, 30*time.Second, func() bool {
		members, epoch, assignment, ok := described(adm)
		return ok && len(members) == 4 && epoch > assignment
	}, "the group waiting for its interval to assign the fourth member")
	t.Logf("waiting: %s", last)
	coordinator := groupCoordinator(t, adm, groupID)
	faultAt := time.Now()
	survivor := failCoordinator(t, c, groupID, coordinator, fault)
	// The members whose sessions ended while they could not reach a coordinator join
	// again: four members in the end, each with a partition, the group assigned.
	testutil.WaitFor(t, 90*time.Second, assigned(survivor, 4), "the new coordinator assigning the four members")
	t.Logf("the new coordinator assigned the four %v after the %s: %s", time.Since(faultAt).Round(time.Millisecond), fault, last)
	restoreCoordinator(t, c, coordinator, fault)
	before := led.confirmedCount()
	led.waitConfirmed(t, before+1000, 120*time.Second, "1000 more records accepted after the failover")

	endShareTest(t, c, p, consumers, led, inv, addrs, groupID, topic, partitions)
}
