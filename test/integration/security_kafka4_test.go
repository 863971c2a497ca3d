package integration

// Authorization of the APIs Kafka 4 added (KIP-848, KIP-932, KIP-966) and of the
// multi-group OffsetFetch, against Kafka's KafkaApis: a principal sees nothing of a
// topic it may not DESCRIBE and changes nothing of a topic it may not READ.

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// aclBroker starts a broker with an authorizer, topics "pub" (alice may do anything)
// and "secret" (no ACL for alice), and groups prefixed "g-" alice may do anything
// with. It returns the admin's (super user) and alice's clients.
func aclBroker(t *testing.T) (admin, alice *kgo.Client) {
	t.Helper()
	opts := secureUsers
	opts.Overrides = []string{
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:admin",
	}
	sb := testutil.StartSecureBroker(t, opts)
	admin = secureClient(t, sb.SASLPlaintext, nil, plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())
	adm := kadm.NewClient(admin)
	for _, topic := range []string{"pub", "secret"} {
		createTopic(t, adm, topic, 1, nil)
	}
	ctx := ctxT(t, 30*time.Second)
	for _, b := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:alice").Topics("pub").Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:alice").Groups("g-").Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternPrefixed),
	} {
		results, err := adm.CreateACLs(ctx, b)
		checkACLResults(t, results, err)
	}
	alice = secureClient(t, sb.SASLPlaintext, nil, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())
	return admin, alice
}

func shareOffsetsOf(ctx context.Context, t *testing.T, cl *kgo.Client, group string, topics ...string) kmsg.DescribeShareGroupOffsetsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = group
	for _, name := range topics {
		rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
		rt.Topic, rt.Partitions = name, []int32{0}
		rg.Topics = append(rg.Topics, rt)
	}
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Groups) != 1 {
		t.Fatalf("DescribeShareGroupOffsets: %+v, %v", resp, err)
	}
	return resp.Groups[0]
}

func alterShareOffsets(ctx context.Context, t *testing.T, cl *kgo.Client, group string, topics ...string) *kmsg.AlterShareGroupOffsetsResponse {
	t.Helper()
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = group
	for _, name := range topics {
		rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		rt.Topic = name
		rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
		rp.Partition, rp.StartOffset = 0, 0
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("AlterShareGroupOffsets: %v", err)
	}
	return resp
}

func topicNamesOf(g kmsg.DescribeShareGroupOffsetsResponseGroup) map[string]int16 {
	m := map[string]int16{}
	for _, rt := range g.Topics {
		code := int16(0)
		for _, p := range rt.Partitions {
			if p.ErrorCode != 0 {
				code = p.ErrorCode
			}
		}
		m[rt.Topic] = code
	}
	return m
}

// The share group offset APIs need DESCRIBE (describe) or READ (alter, delete) on
// each topic besides the group ACL, as Kafka's KafkaApis checks.
func TestShareGroupOffsetsNeedTopicACLs(t *testing.T) {
	admin, alice := aclBroker(t)
	ctx := ctxT(t, 60*time.Second)
	const group = "g-share"
	for {
		resp := alterShareOffsets(ctx, t, admin, group, "pub", "secret")
		if coordinatorNotReady(resp.ErrorCode) && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("admin alter: %+v", resp)
		}
		break
	}

	// Describe of all topics leaves out what alice may not describe; a named one is refused.
	all := topicNamesOf(shareOffsetsOf(ctx, t, alice, group))
	if _, leaked := all["secret"]; leaked || all["pub"] != 0 {
		t.Errorf("alice's describe of all topics: %v; want pub only", all)
	}
	named := topicNamesOf(shareOffsetsOf(ctx, t, alice, group, "pub", "secret"))
	if named["secret"] != kerr.TopicAuthorizationFailed.Code || named["pub"] != 0 {
		t.Errorf("alice's describe of pub and secret: %v; want secret TOPIC_AUTHORIZATION_FAILED", named)
	}

	// Alter needs READ on the topic.
	resp := alterShareOffsets(ctx, t, alice, group, "pub", "secret")
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			codes[rt.Topic] = p.ErrorCode
		}
	}
	if resp.ErrorCode != 0 || codes["pub"] != 0 || codes["secret"] != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("alice's alter of pub and secret: %d %v; want secret TOPIC_AUTHORIZATION_FAILED", resp.ErrorCode, codes)
	}

	// Delete needs READ on the topic: secret's state stays.
	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID = group
	for _, name := range []string{"pub", "secret"} {
		rt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
		rt.Topic = name
		del.Topics = append(del.Topics, rt)
	}
	dresp, err := del.RequestWith(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	codes = map[string]int16{}
	for _, rt := range dresp.Topics {
		codes[rt.Topic] = rt.ErrorCode
	}
	if dresp.ErrorCode != 0 || codes["pub"] != 0 || codes["secret"] != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("alice's delete of pub and secret: %d %v; want secret TOPIC_AUTHORIZATION_FAILED", dresp.ErrorCode, codes)
	}
	left := topicNamesOf(shareOffsetsOf(ctx, t, admin, group))
	if _, ok := left["secret"]; !ok {
		t.Errorf("after alice's delete the admin sees %v; secret's state is gone", left)
	}
}

// OffsetFetch of all topics (v8+, groups listed) leaves out the topics the principal
// may not describe, as it does before v8.
func TestOffsetFetchAllTopicsHidesUndescribable(t *testing.T) {
	admin, alice := aclBroker(t)
	ctx := ctxT(t, 60*time.Second)
	const group = "g-classic"
	var offsets kadm.Offsets
	offsets.AddOffset("pub", 0, 0, -1)
	offsets.AddOffset("secret", 0, 0, -1)
	if err := kadm.NewClient(admin).CommitAllOffsets(ctx, group, offsets); err != nil {
		t.Fatal(err)
	}
	for _, version := range []int16{8, 9, 10} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = version
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = group
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(ctx, alice)
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
			t.Fatalf("v%d: %+v, %v", version, resp, err)
		}
		seen := map[string]bool{}
		for _, rt := range resp.Groups[0].Topics {
			seen[rt.Topic] = true
			if rt.TopicID == secretID(ctx, t, admin) {
				seen["secret"] = true
			}
		}
		if seen["secret"] || len(resp.Groups[0].Topics) != 1 {
			t.Errorf("v%d: alice sees %+v; want pub only", version, resp.Groups[0].Topics)
		}
	}
}

func secretID(ctx context.Context, t *testing.T, admin *kgo.Client) [16]byte {
	t.Helper()
	return topicID(t, admin, "secret")
}

// ListConfigResources needs DESCRIBE_CONFIGS on the cluster, as in Kafka's KafkaApis:
// alice, without it, is refused the whole list (CLUSTER_AUTHORIZATION_FAILED) until
// it is granted.
func TestListConfigResourcesNeedsClusterDescribeConfigs(t *testing.T) {
	t.Parallel()
	admin, alice := aclBroker(t)
	ctx := ctxT(t, 30*time.Second)
	var authErr *kadm.AuthError
	if _, err := kadm.NewClient(alice).ListConfigResources(ctx); !errors.As(err, &authErr) || !errors.Is(authErr.Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice's ListConfigResources without DESCRIBE_CONFIGS on the cluster: %v; want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	adm := kadm.NewClient(admin)
	if l, err := adm.ListConfigResources(ctx, kadm.ConfigResourceTopic); err != nil || l.Err != nil || !slices.Equal(l.Names(), []string{"pub", "secret"}) {
		t.Fatalf("the admin's ListConfigResources of topics: %+v, %v; want pub and secret", l, err)
	}
	results, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Clusters().Operations(kadm.OpDescribeConfigs).ResourcePatternType(kadm.ACLPatternLiteral))
	checkACLResults(t, results, err)
	testutil.WaitFor(t, 10*time.Second, func() bool {
		l, err := kadm.NewClient(alice).ListConfigResources(ctx, kadm.ConfigResourceTopic)
		return err == nil && l.Err == nil && len(l.Resources) == 2
	}, "alice's ListConfigResources once granted DESCRIBE_CONFIGS on the cluster")
}
