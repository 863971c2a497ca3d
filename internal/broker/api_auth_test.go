package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/config"
)

// TestOffsetCommitWithoutGroupReadReachesNoGroup: Kafka refuses an OffsetCommit
// whose principal may not READ the group before the coordinator sees it, topics or
// none. One without topics went to the coordinator, where its member id and
// generation kept that member's session alive: a principal without any ACL on the
// group kept a member that had stopped heartbeating in it.
func TestOffsetCommitWithoutGroupReadReachesNoGroup(t *testing.T) {
	b := startTestBrokerWith(t, nil, []string{
		"authorizer.class.name=" + config.StandardAuthorizer, "super.users=User:admin",
		"group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=500",
	}, t.TempDir())
	join := kmsg.NewPtrJoinGroupRequest()
	join.SetVersion(4)
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "victim", 1000, 1000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(4)
	fc.CoordinatorKeys = []string{"victim"}
	untilDone(t, "FindCoordinator", func() int16 {
		return callAs[*kmsg.FindCoordinatorResponse](t, b, fuzzAdmin, fc).Coordinators[0].ErrorCode
	})
	var jr *kmsg.JoinGroupResponse
	untilDone(t, "JoinGroup", func() int16 {
		jr = callAs[*kmsg.JoinGroupResponse](t, b, fuzzAdmin, join)
		if jr.ErrorCode == kerr.MemberIDRequired.Code {
			return 0
		}
		return jr.ErrorCode
	})
	if jr.ErrorCode == kerr.MemberIDRequired.Code {
		join.MemberID = jr.MemberID
		jr = callAs[*kmsg.JoinGroupResponse](t, b, fuzzAdmin, join)
	}
	if jr.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(jr.ErrorCode))
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.SetVersion(3)
	sync.Group, sync.MemberID, sync.Generation = "victim", jr.MemberID, jr.Generation
	if sr := callAs[*kmsg.SyncGroupResponse](t, b, fuzzAdmin, sync); sr.ErrorCode != 0 {
		t.Fatalf("sync: %v", kerr.ErrorForCode(sr.ErrorCode))
	}
	mallory := auth.Principal{Type: auth.UserType, Name: "mallory"}
	members := func() int {
		d := kmsg.NewPtrDescribeGroupsRequest()
		d.SetVersion(5)
		d.Groups = []string{"victim"}
		return len(callAs[*kmsg.DescribeGroupsResponse](t, b, fuzzAdmin, d).Groups[0].Members)
	}
	// The member stops heartbeating; mallory, with no ACL, commits nothing in its name
	// for three session timeouts.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.SetVersion(8)
	commit.Group, commit.MemberID, commit.Generation = "victim", jr.MemberID, jr.Generation
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		if r := callAs[*kmsg.OffsetCommitResponse](t, b, mallory, commit); len(r.Topics) != 0 {
			t.Fatalf("mallory's empty commit: %+v", r)
		}
		time.Sleep(200 * time.Millisecond) // mallory's pace, not a wait for a condition
	}
	if n := members(); n != 0 {
		t.Fatalf("%d member(s) left in the group three session timeouts after the last heartbeat", n)
	}
}
