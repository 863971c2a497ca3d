package integration

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupDescribe and ShareGroupDescribe refuse a group whose assignments
// name a topic the principal may not describe (TOPIC_AUTHORIZATION_FAILED, no
// members), as Kafka does.
func TestGroupDescribeHidesUndescribableTopics(t *testing.T) {
	admin, alice := aclBroker(t)
	ctx := ctxT(t, 60*time.Second)

	const consumer, shareGroup = "g-848", "g-shared"
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = consumer, "member-one-0000000000", 30000
	hb.SubscribedTopicNames, hb.Topics = []string{"pub", "secret"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for {
		resp, err := hb.RequestWith(ctx, admin)
		if err == nil && coordinatorNotReady(resp.ErrorCode) && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("admin joins %s: %+v, %v", consumer, resp, err)
		}
		break
	}
	shb := kmsg.NewPtrShareGroupHeartbeatRequest()
	shb.GroupID, shb.MemberID = shareGroup, "member-two-0000000000"
	shb.SubscribedTopicNames = []string{"secret"}
	for {
		resp, err := shb.RequestWith(ctx, admin)
		if err == nil && coordinatorNotReady(resp.ErrorCode) && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("admin joins %s: %+v, %v", shareGroup, resp, err)
		}
		break
	}

	cd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cd.Groups = []string{consumer}
	sd := kmsg.NewPtrShareGroupDescribeRequest()
	sd.GroupIDs = []string{shareGroup}
	// The admin sees the assignments name secret (the test is about something).
	for {
		c, err := cd.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		s, err := sd.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Groups) == 1 && len(c.Groups[0].Members) == 1 && len(c.Groups[0].Members[0].TargetAssignment.TopicPartitions) == 2 &&
			len(s.Groups) == 1 && len(s.Groups[0].Members) == 1 && len(s.Groups[0].Members[0].Assignment.TopicPartitions) == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("assignments: %+v %+v", c, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c, err := cd.RequestWith(ctx, alice)
	if err != nil || len(c.Groups) != 1 {
		t.Fatal(c, err)
	}
	if g := c.Groups[0]; g.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(g.Members) != 0 {
		t.Errorf("alice's ConsumerGroupDescribe: error %d, members %+v; want TOPIC_AUTHORIZATION_FAILED and none", g.ErrorCode, g.Members)
	}
	s, err := sd.RequestWith(ctx, alice)
	if err != nil || len(s.Groups) != 1 {
		t.Fatal(s, err)
	}
	if g := s.Groups[0]; g.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(g.Members) != 0 {
		t.Errorf("alice's ShareGroupDescribe: error %d, members %+v; want TOPIC_AUTHORIZATION_FAILED and none", g.ErrorCode, g.Members)
	}
}

// DescribeTopicPartitions answers as Kafka: a named topic the principal may not
// describe is TOPIC_AUTHORIZATION_FAILED whether or not it exists, and paging over
// all topics neither counts nor names (in the cursor) the hidden ones.
func TestDescribeTopicPartitionsHidesUndescribable(t *testing.T) {
	_, alice := aclBroker(t)
	ctx := ctxT(t, 60*time.Second)
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit = 1
	resp, err := req.RequestWith(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || *resp.Topics[0].Topic != "pub" || resp.NextCursor != nil {
		cursor := "none"
		if resp.NextCursor != nil {
			cursor = resp.NextCursor.Topic
		}
		t.Errorf("all topics, one partition a page: %d topics, cursor %s; want pub and no cursor", len(resp.Topics), cursor)
	}
	for _, name := range []string{"secret", "nosuch"} {
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = name
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, alice)
		if err != nil || len(resp.Topics) != 1 {
			t.Fatal(resp, err)
		}
		if got := resp.Topics[0]; got.ErrorCode != kerr.TopicAuthorizationFailed.Code || got.TopicID != [16]byte{} || len(got.Partitions) != 0 {
			t.Errorf("%s: error %d, id %x; want TOPIC_AUTHORIZATION_FAILED and no id", name, got.ErrorCode, got.TopicID)
		}
	}
}

// A regex subscription resolves only to the topics the member may describe, as in
// Kafka's GroupMetadataManager: it is neither assigned a hidden topic (whose id the
// assignment would reveal) nor does the group's description then name one.
func TestRegexSubscriptionSkipsUndescribableTopics(t *testing.T) {
	admin, alice := aclBroker(t)
	ctx := ctxT(t, 60*time.Second)
	secret, pub := secretID(ctx, t, admin), topicID(t, admin, "pub")
	const group = "g-regex"
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = group, "member-regex-000000000", 30000
	hb.SubscribedTopicRegex, hb.Topics = kmsg.StringPtr("pub|secret"), []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for {
		resp, err := hb.RequestWith(ctx, alice)
		if err == nil && coordinatorNotReady(resp.ErrorCode) && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("alice's heartbeat: %+v, %v", resp, err)
		}
		var got [][16]byte
		if resp.Assignment != nil {
			for _, at := range resp.Assignment.Topics {
				got = append(got, at.TopicID)
			}
		}
		for _, id := range got {
			if id == secret {
				t.Fatalf("alice is assigned secret (%v)", got)
			}
		}
		if len(got) == 1 && got[0] == pub {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("alice's assignment: %v; want pub", got)
		}
		hb.MemberEpoch = resp.MemberEpoch
		hb.SubscribedTopicRegex, hb.Topics, hb.RebalanceTimeoutMillis = nil, nil, -1
		time.Sleep(50 * time.Millisecond)
	}
	cd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cd.Groups = []string{group}
	c, err := cd.RequestWith(ctx, alice)
	if err != nil || len(c.Groups) != 1 || c.Groups[0].ErrorCode != 0 {
		t.Fatalf("alice describes her group: %+v, %v", c, err)
	}
}

// coordinatorNotReady reports the errors a group request answers while the broker's
// group coordinator is still loading.
func coordinatorNotReady(code int16) bool {
	return code == kerr.NotCoordinator.Code || code == kerr.CoordinatorLoadInProgress.Code ||
		code == kerr.CoordinatorNotAvailable.Code
}
