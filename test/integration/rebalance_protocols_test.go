package integration

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConsumerProtocolLeftOut: with group.coordinator.rebalance.protocols=classic the
// KIP-848 APIs stay listed by ApiVersions but answer UNSUPPORTED_VERSION, as Kafka's
// do, and a franz-go consumer asking for the consumer protocol (ServerSideBalancer)
// falls back to the classic protocol and consumes everything.
func TestConsumerProtocolLeftOut(t *testing.T) {
	b := startGroupBroker(t, "group.coordinator.rebalance.protocols=classic")
	const topic, group, n = "protocols", "classic-only", 20
	createTopic(t, newAdmin(t, b), topic, 2, nil)
	prod := newClient(t, b)
	for i := range n {
		produceSync(t, prod, &kgo.Record{Topic: topic, Value: value(i)})
	}

	raw := newClient(t, b)
	versions, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctxT(t, 10*time.Second), raw)
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, k := range versions.ApiKeys {
		listed = listed || k.ApiKey == int16(kmsg.ConsumerGroupHeartbeat)
	}
	if !listed {
		t.Error("ApiVersions does not list ConsumerGroupHeartbeat (Kafka keeps listing it)")
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch = group, "m1", 0
	hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames = 10000, []string{topic}
	hbResp, err := hb.RequestWith(ctxT(t, 10*time.Second), raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(hbResp.ErrorCode); err != kerr.UnsupportedVersion {
		t.Errorf("ConsumerGroupHeartbeat error = %v, want UNSUPPORTED_VERSION", err)
	}

	c := newClient(t, b, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := ctxT(t, 30*time.Second)
	got := 0
	for got < n {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadline", got, n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		got += len(fs.Records())
	}

	// The group is a classic one: DescribeGroups knows it, ConsumerGroupDescribe is off.
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{group}
	dgResp, err := dg.RequestWith(ctxT(t, 10*time.Second), raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(dgResp.Groups) != 1 || dgResp.Groups[0].ProtocolType != "consumer" || len(dgResp.Groups[0].Members) != 1 {
		t.Errorf("DescribeGroups = %+v, want one classic consumer group with one member", dgResp.Groups)
	}
	cgd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cgd.Groups = []string{group}
	cgdResp, err := cgd.RequestWith(ctxT(t, 10*time.Second), raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(cgdResp.Groups) != 1 || kerr.ErrorForCode(cgdResp.Groups[0].ErrorCode) != kerr.UnsupportedVersion {
		t.Errorf("ConsumerGroupDescribe = %+v, want UNSUPPORTED_VERSION for the group", cgdResp.Groups)
	}
}
