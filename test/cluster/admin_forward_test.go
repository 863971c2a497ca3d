package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/samsa-streaming/samsa/internal/record"
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
	via := notTheActiveController(t, c)
	cl, err := kgo.NewClient(kgo.SeedBrokers(via.Addr), kgo.MaxVersions(kversion.V2_4_0()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)

	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 600_000 // a broker waiting it out never answers within the 30 s below
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "old-client", 3, 3
	req.Topics = append(req.Topics, rt)
	r, err := cl.Broker(int(via.ID)).Request(ctxT(t, 30*time.Second), req)
	if err != nil {
		t.Fatalf("CreateTopics v5 through node %d: %v (did the broker wait out timeout_ms though the topic was created?)", via.ID, err)
	}
	resp := r.(*kmsg.CreateTopicsResponse)
	if resp.Version != 5 {
		t.Fatalf("answered at v%d, want v5", resp.Version)
	}
	if st := resp.Topics[0]; st.ErrorCode != 0 {
		t.Fatalf("CreateTopics: %v %v", kerr.ErrorForCode(st.ErrorCode), deref(st.ErrorMessage))
	}
}

// TestCreatedTopicIsUsableAtOnceThroughTheBrokerAsked: a broker that is not the active
// controller answers CreateTopics (and CreatePartitions) once it has acted on the
// change — opened the partitions it leads — not merely once its image holds it, so a
// produce sent to it right after the answer finds the partitions (Samsa's promise in
// create_topics.go; without it every such produce met UNKNOWN_TOPIC_OR_PARTITION or
// NOT_LEADER_OR_FOLLOWER for a moment).
func TestCreatedTopicIsUsableAtOnceThroughTheBrokerAsked(t *testing.T) {
	t.Parallel()
	c := testutil.StartCluster(t, testutil.ClusterOptions{})
	via := notTheActiveController(t, c)
	cl := newNodeClient(t, via.Addr)
	const partitions = 20
	produce := func(topic string, id [16]byte, partition int32) int16 {
		batch, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Value: []byte("v")}})
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = 1, 5000
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic, pt.TopicID = topic, id
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Partition, pp.Records = partition, batch
		pt.Partitions = append(pt.Partitions, pp)
		req.Topics = append(req.Topics, pt)
		r, err := cl.request(ctxT(t, 10*time.Second), req)
		if err != nil {
			t.Fatal(err)
		}
		return r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	for i := range 5 {
		name := fmt.Sprintf("usable-%d", i)
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 15_000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
		for p := range int32(partitions) {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = p, []int32{via.ID} // led by the broker asked
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		}
		req.Topics = append(req.Topics, rt)
		r, err := cl.request(ctxT(t, 20*time.Second), req)
		if err != nil {
			t.Fatal(err)
		}
		st := r.(*kmsg.CreateTopicsResponse).Topics[0]
		if st.ErrorCode != 0 {
			t.Fatalf("CreateTopics %s: %v %v", name, kerr.ErrorForCode(st.ErrorCode), deref(st.ErrorMessage))
		}
		if code := produce(name, st.TopicID, partitions-1); code != 0 {
			t.Fatalf("produce to %s-%d on node %d right after node %d answered CreateTopics: %v",
				name, partitions-1, via.ID, via.ID, kerr.ErrorForCode(code))
		}
	}
}
