package cluster

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestCreateTopicsBeforeTopicIDsThroughAnotherBroker: a client of CreateTopics v5
// (before v7 the answer carries no topic id: librdkafka, kafka-python, sarama and the
// Java clients before 2.8 send such versions) asks a broker that is not the active
// controller. The broker forwards it and waits until its own image has the topic;
// the answer must come as soon as it does, not after the request's whole timeout_ms
// (which a client with a shorter socket timeout would see as a failure of a creation
// that succeeded — and then, retrying, as TOPIC_ALREADY_EXISTS).
func TestCreateTopicsBeforeTopicIDsThroughAnotherBroker(t *testing.T) {
	t.Parallel()
	c := testutil.StartCluster(t, testutil.ClusterOptions{})
	first := c.Nodes()[0]
	leader := activeController(t, newNodeClient(t, first.Addr))
	var via *testutil.Node
	for _, n := range c.Nodes() {
		if n.ID != leader {
			via = n
			break
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(via.Addr), kgo.MaxVersions(kversion.V2_4_0()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)

	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 20_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "old-client", 3, 3
	req.Topics = append(req.Topics, rt)
	start := time.Now()
	r, err := cl.Broker(int(via.ID)).Request(ctxT(t, 30*time.Second), req)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("CreateTopics through node %d: %v", via.ID, err)
	}
	resp := r.(*kmsg.CreateTopicsResponse)
	if resp.Version != 5 {
		t.Fatalf("answered at v%d, want v5", resp.Version)
	}
	if st := resp.Topics[0]; st.ErrorCode != 0 {
		t.Fatalf("CreateTopics: %v %v", kerr.ErrorForCode(st.ErrorCode), deref(st.ErrorMessage))
	}
	if took > 10*time.Second {
		t.Fatalf("CreateTopics v5 through node %d (active controller %d) answered after %v: the broker waited out timeout_ms (20 s) though the topic was created",
			via.ID, leader, took.Round(time.Millisecond))
	}
	t.Logf("CreateTopics v5 through node %d answered in %v", via.ID, took.Round(time.Millisecond))
}
