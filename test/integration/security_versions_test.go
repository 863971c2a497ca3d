package integration

// The newest versions of the data-path and cluster APIs under the authorizer, with
// raw requests pinned to them and sent to the broker itself (not through franz-go's
// sharding, which answers some refusals from its own metadata): each is decided as
// Kafka's brokers decide it.

import (
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

func TestAuthorizationOfNewestVersions(t *testing.T) {
	opts := secureUsers
	opts.Overrides = []string{
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:admin",
	}
	sb := testutil.StartSecureBroker(t, opts)
	adminClient := secureClient(t, sb.SASLPlaintext, nil, plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())
	admin := kadm.NewClient(adminClient)
	ctx := ctxT(t, 60*time.Second)
	for _, topic := range []string{"writable", "readonly", "secret"} {
		createTopic(t, admin, topic, 1, nil)
	}
	for _, b := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:alice").Topics("writable").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:alice").Topics("readonly").Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral),
		// IDEMPOTENT_WRITE does not imply DESCRIBE: carol may not describe the cluster.
		kadm.NewACLs().Allow("User:carol").Clusters().Operations(kadm.OpIdempotentWrite).ResourcePatternType(kadm.ACLPatternLiteral),
	} {
		results, err := admin.CreateACLs(ctx, b)
		checkACLResults(t, results, err)
	}
	ids := map[string][16]byte{}
	for _, topic := range []string{"writable", "readonly", "secret"} {
		ids[topic] = topicID(t, adminClient, topic)
	}
	unknownID := [16]byte{9, 9, 9}

	type login struct {
		addr string
		tls  *tls.Config
		mech sasl.Mechanism
	}
	adminLogin := login{sb.SASLPlaintext, nil, plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()}
	alice := login{sb.SASLPlaintext, nil, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()}
	carol := login{sb.SASLSSL, sb.ClientTLS(t, ""), scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha256Mechanism()}
	// broker is the broker, reached as l, sending key at version max.
	broker := func(l login, key kmsg.Key, max int16) *kgo.Broker {
		versions := kversion.Stable()
		versions.SetMaxKeyVersion(int16(key), max)
		return secureClient(t, l.addr, l.tls, l.mech, kgo.MaxVersions(versions)).SeedBrokers()[0]
	}
	send := func(b *kgo.Broker, req kmsg.Request, version int16) kmsg.Response {
		t.Helper()
		resp, err := b.Request(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
		}
		if resp.GetVersion() != version {
			t.Fatalf("%s answered in v%d, want v%d", kmsg.NameForKey(req.Key()), resp.GetVersion(), version)
		}
		return resp
	}

	t.Run("Produce v13 by topic id", func(t *testing.T) {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 5000
		for _, id := range [][16]byte{ids["writable"], ids["readonly"], ids["secret"], unknownID} {
			rt := kmsg.NewProduceRequestTopic()
			rt.TopicID = id
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = rawBatch(-1, -1, -1, "by-id")
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		resp := send(broker(alice, kmsg.Produce, 13), req, 13).(*kmsg.ProduceResponse)
		want := []struct {
			what string
			code int16
		}{
			{"WRITE allowed", 0},
			{"DESCRIBE only", kerr.TopicAuthorizationFailed.Code},
			{"no ACL", kerr.TopicAuthorizationFailed.Code},
			{"an unknown id", kerr.UnknownTopicID.Code},
		}
		for i, w := range want {
			got := resp.Topics[i]
			if got.TopicID != req.Topics[i].TopicID || got.Partitions[0].ErrorCode != w.code {
				t.Errorf("%s: topic id %x, error %v; want %v", w.what, got.TopicID,
					kerr.ErrorForCode(got.Partitions[0].ErrorCode), kerr.ErrorForCode(w.code))
			}
		}
	})

	for v := int16(9); v <= 11; v++ {
		t.Run(fmt.Sprintf("ListOffsets v%d", v), func(t *testing.T) {
			req := kmsg.NewPtrListOffsetsRequest()
			for _, topic := range []string{"writable", "readonly", "secret"} {
				rt := kmsg.NewListOffsetsRequestTopic()
				rt.Topic = topic
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Timestamp = -1 // latest
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
			}
			resp := send(broker(alice, kmsg.ListOffsets, v), req, v).(*kmsg.ListOffsetsResponse)
			for i, code := range []int16{0, 0, kerr.TopicAuthorizationFailed.Code} {
				if got := resp.Topics[i].Partitions[0].ErrorCode; got != code {
					t.Errorf("%s: %v, want %v", resp.Topics[i].Topic, kerr.ErrorForCode(got), kerr.ErrorForCode(code))
				}
			}
		})
	}

	t.Run("Metadata v13", func(t *testing.T) {
		b := broker(alice, kmsg.Metadata, 13)
		req := kmsg.NewPtrMetadataRequest()
		req.AllowAutoTopicCreation = false
		for _, topic := range []string{"readonly", "secret"} {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
		}
		for _, id := range [][16]byte{ids["secret"], unknownID} {
			rt := kmsg.NewMetadataRequestTopic()
			rt.TopicID = id
			req.Topics = append(req.Topics, rt)
		}
		resp := send(b, req, 13).(*kmsg.MetadataResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 4 {
			t.Fatalf("metadata: error %d, %d topics", resp.ErrorCode, len(resp.Topics))
		}
		if got := resp.Topics[0]; got.ErrorCode != 0 || got.TopicID != ids["readonly"] {
			t.Errorf("readonly: %v, id %x", kerr.ErrorForCode(got.ErrorCode), got.TopicID)
		}
		if got := resp.Topics[1]; got.ErrorCode != kerr.TopicAuthorizationFailed.Code || got.TopicID != [16]byte{} {
			t.Errorf("secret by name: %v, id %x (the id of a topic it may not describe)", kerr.ErrorForCode(got.ErrorCode), got.TopicID)
		}
		// By id, Kafka answers without the name: the id says nothing the client did not send.
		if got := resp.Topics[2]; got.ErrorCode != kerr.TopicAuthorizationFailed.Code || got.Topic != nil {
			t.Errorf("secret by id: %v, name %v", kerr.ErrorForCode(got.ErrorCode), got.Topic)
		}
		if got := resp.Topics[3]; got.ErrorCode != kerr.UnknownTopicID.Code {
			t.Errorf("an unknown id: %v", kerr.ErrorForCode(got.ErrorCode))
		}
		all := send(b, kmsg.NewPtrMetadataRequest(), 13).(*kmsg.MetadataResponse)
		var names []string
		for _, mt := range all.Topics {
			names = append(names, *mt.Topic)
		}
		if len(names) != 2 || names[0] == "secret" || names[1] == "secret" {
			t.Errorf("all topics as alice: %q, want writable and readonly", names)
		}
	})

	t.Run("DescribeCluster v2", func(t *testing.T) {
		describe := func(l login) *kmsg.DescribeClusterResponse {
			req := kmsg.NewPtrDescribeClusterRequest()
			req.IncludeClusterAuthorizedOperations, req.IncludeFencedBrokers = true, true
			resp := send(broker(l, kmsg.DescribeCluster, 2), req, 2).(*kmsg.DescribeClusterResponse)
			if resp.ErrorCode != 0 || len(resp.Brokers) != 1 {
				t.Fatalf("%s: error %v, %d brokers (the broker list needs no ACL)", l.mech.Name(), kerr.ErrorForCode(resp.ErrorCode), len(resp.Brokers))
			}
			return resp
		}
		if ops := describe(adminLogin).ClusterAuthorizedOperations; ops&(1<<auth.OpDescribe) == 0 || ops&(1<<auth.OpAlter) == 0 {
			t.Errorf("the super user's cluster operations: %b", ops)
		}
		if ops := describe(alice).ClusterAuthorizedOperations; ops != 0 {
			t.Errorf("alice's cluster operations: %b, want 0", ops)
		}
		if ops := describe(carol).ClusterAuthorizedOperations; ops != 0 {
			t.Errorf("carol (IDEMPOTENT_WRITE, no DESCRIBE on the cluster): %b, want 0", ops)
		}
	})

	t.Run("DescribeLogDirs v5", func(t *testing.T) {
		req := kmsg.NewPtrDescribeLogDirsRequest()
		resp := send(broker(alice, kmsg.DescribeLogDirs, 5), req, 5).(*kmsg.DescribeLogDirsResponse)
		if resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(resp.Dirs) != 0 {
			t.Errorf("alice: %v, %d dirs; want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(resp.ErrorCode), len(resp.Dirs))
		}
		resp = send(broker(adminLogin, kmsg.DescribeLogDirs, 5), kmsg.NewPtrDescribeLogDirsRequest(), 5).(*kmsg.DescribeLogDirsResponse)
		if resp.ErrorCode != 0 || len(resp.Dirs) == 0 {
			t.Errorf("admin: %v, %d dirs", kerr.ErrorForCode(resp.ErrorCode), len(resp.Dirs))
		}
	})

	t.Run("ApiVersions v5", func(t *testing.T) {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "samsa-test", "1.0"
		resp := send(broker(alice, kmsg.ApiVersions, 5), req, 5).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
			t.Errorf("alice: %v, %d keys (ApiVersions needs no ACL)", kerr.ErrorForCode(resp.ErrorCode), len(resp.ApiKeys))
		}
	})
	t.Run("share coordinator requests need CLUSTER_ACTION", func(t *testing.T) {
		read := func(l login) int16 {
			req := kmsg.NewPtrReadShareGroupStateRequest()
			req.GroupID = "g"
			rt := kmsg.NewReadShareGroupStateRequestTopic()
			rt.TopicID = ids["writable"]
			rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp := send(broker(l, kmsg.ReadShareGroupState, 0), req, 0).(*kmsg.ReadShareGroupStateResponse)
			return resp.Topics[0].Partitions[0].ErrorCode
		}
		if code := read(alice); code != kerr.ClusterAuthorizationFailed.Code {
			t.Errorf("alice: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
		}
		if code := read(adminLogin); code == kerr.ClusterAuthorizationFailed.Code {
			t.Errorf("admin (a super user, as brokers are): %v", kerr.ErrorForCode(code))
		}
		find := func(l login) int16 { // a share-partition key, "group:topicId:partition"
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.CoordinatorType, req.CoordinatorKeys = 2, []string{"g:AAAAAAAAAAAAAAAAAAAAAA:0"}
			resp := send(broker(l, kmsg.FindCoordinator, 6), req, 6).(*kmsg.FindCoordinatorResponse)
			return resp.Coordinators[0].ErrorCode
		}
		if code := find(alice); code != kerr.ClusterAuthorizationFailed.Code {
			t.Errorf("FindCoordinator for a share key by alice: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
		}
		if code := find(adminLogin); code == kerr.ClusterAuthorizationFailed.Code {
			t.Errorf("FindCoordinator for a share key by admin: %v", kerr.ErrorForCode(code))
		}
	})
}
