package cluster

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestAutoCreateAnswersWithoutAQuorum: a Metadata request that may auto-create an
// unknown topic is answered at once, as Kafka's brokers answer it
// (AutoTopicCreationManager.sendCreateTopicRequest sends the CreateTopics to the
// controller without waiting for it and answers UNKNOWN_TOPIC_OR_PARTITION), even
// when the controllers have no majority and the creation cannot commit. The broker
// waited for the creation, up to 30 s, holding the Metadata and every request after
// it on the client's connection past the client's own timeout (franz-go's is 10 s
// for a Metadata). While the quorum stands a producer that allows auto-creation
// still gets its records in.
func TestAutoCreateAnswersWithoutAQuorum(t *testing.T) {
	t.Parallel()
	c := testutil.StartCluster(t, testutil.ClusterOptions{})
	n1 := c.Node(1)

	cl, err := kgo.NewClient(kgo.SeedBrokers(n1.Addr), kgo.AllowAutoTopicCreation(), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	if err := cl.ProduceSync(ctxT(t, 20*time.Second), &kgo.Record{Topic: "auto-created", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce to an auto-created topic: %v", err)
	}

	c.Node(2).Kill()
	c.Node(3).Kill()
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("auto-no-quorum")
	req.Topics = append(req.Topics, rt)
	// A client's own timeout for the answer: franz-go's request timeout overhead.
	r, err := cl.Broker(int(n1.ID)).Request(ctxT(t, 10*time.Second), req)
	if err != nil {
		t.Fatalf("Metadata naming an unknown topic, without a quorum: %v", err)
	}
	resp := r.(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 {
		t.Fatalf("answered %d topics, want 1", len(resp.Topics))
	}
	if code := resp.Topics[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("the topic answered %v, want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(code))
	}
}
