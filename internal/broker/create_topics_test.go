package broker

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCreateTopicsNullConfig: a config given without a value is INVALID_CONFIG and
// the topic is not created, as Kafka's controller answers (the message names the
// configs); it was dropped and the topic created without it.
func TestCreateTopicsNullConfig(t *testing.T) {
	b := startTestBroker(t)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "null-config", 1, 1
	for _, name := range []string{"retention.ms", "segment.ms"} {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name = name // no value
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	got := call[*kmsg.CreateTopicsResponse](t, b, req).Topics[0]
	if got.ErrorCode != kerr.InvalidConfig.Code || got.ErrorMessage == nil {
		t.Fatalf("%v (%v), want INVALID_CONFIG with a message", kerr.ErrorForCode(got.ErrorCode), got.ErrorMessage)
	}
	if want := "topic configs without a value: retention.ms,segment.ms"; !strings.Contains(*got.ErrorMessage, want) {
		t.Errorf("message %q, want it to say %q", *got.ErrorMessage, want)
	}
	if _, ok := b.image().Topic("null-config"); ok {
		t.Fatal("the topic was created")
	}
}

// TestCreateTopicsPartitionAssignedTwice: a manual assignment that names a partition
// twice is INVALID_REPLICA_ASSIGNMENT, as Kafka's controller answers ("Found multiple
// manual partition assignments for partition 0"); one of the two was kept.
func TestCreateTopicsPartitionAssignedTwice(t *testing.T) {
	b := startTestBroker(t)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "assigned-twice", -1, -1
	for _, p := range []int32{0, 0, 1} {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = p, []int32{1}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	got := call[*kmsg.CreateTopicsResponse](t, b, req).Topics[0]
	if got.ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Fatalf("%v, want INVALID_REPLICA_ASSIGNMENT", kerr.ErrorForCode(got.ErrorCode))
	}
	if _, ok := b.image().Topic("assigned-twice"); ok {
		t.Fatal("the topic was created")
	}
}
