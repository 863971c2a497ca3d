package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// rawAssignments returns member id → topic id → partitions (current assignment) as
// ConsumerGroupDescribe shows them, by topic id, so a deleted topic's id shows too.
func rawAssignments(ctx context.Context, cl *kgo.Client, group string) (map[string]map[[16]byte][]int32, error) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	g := resp.Groups[0]
	if g.ErrorCode != 0 {
		return nil, fmt.Errorf("describe %s: error %d", group, g.ErrorCode)
	}
	out := map[string]map[[16]byte][]int32{}
	for _, m := range g.Members {
		a := map[[16]byte][]int32{}
		for _, t := range m.Assignment.TopicPartitions {
			a[t.TopicID] = append(a[t.TopicID], t.Partitions...)
		}
		out[m.MemberID] = a
	}
	return out, nil
}

func topicIDByName(t *testing.T, cl *kgo.Client, name string) [16]byte {
	t.Helper()
	// A Metadata request of its own: kadm's ListTopics may answer from the client's
	// cached metadata, which can still hold a deleted topic's id.
	var id [16]byte
	testutil.WaitFor(t, 10*time.Second, func() bool {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctxT(t, 5*time.Second), cl)
		if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
			return false
		}
		id = resp.Topics[0].TopicID
		return true
	}, "the id of "+name)
	return id
}

// TestGroups848FranzRegexTopicRecreated: two members subscribed by regex; a matching
// topic is deleted and created again with the same name. The members give up the
// deleted topic id's partitions, are assigned the new topic's, and read every record
// written to it (once the client forgets the old id, which franz-go leaves to the
// application).
func TestGroups848FranzRegexTopicRecreated(t *testing.T) {
	t.Parallel()
	b := start848Broker(t)
	adm := newAdmin(t, b)
	raw := newClient(t, b)
	const group = "regex848-recreate"
	createTopic(t, adm, "rr848-keep", 2, nil)
	createTopic(t, adm, "rr848-x", 4, nil)
	oldID := topicIDByName(t, raw, "rr848-x")
	led := newLedger(t)
	var members []*kgoMember
	for _, name := range []string{"m0", "m1"} {
		m := newKgoMember(t, b, name, group, "", nil, kgo.ServerSideBalancer(), kgo.ConsumeRegex(), kgo.ConsumeTopics("^rr848-.*"))
		m.run(autoLoop(name, led))
		members = append(members, m)
	}
	owned := func(id [16]byte) (int, map[string]map[[16]byte][]int32) {
		a, err := rawAssignments(ctxT(t, 5*time.Second), raw, group)
		if err != nil {
			return -1, nil
		}
		n := 0
		for _, m := range a {
			n += len(m[id])
		}
		return n, a
	}
	testutil.WaitFor(t, 30*time.Second, func() bool { n, a := owned(oldID); return n == 4 && len(a) == 2 }, "rr848-x assigned")

	if _, err := adm.DeleteTopics(ctxT(t, 10*time.Second), "rr848-x"); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, func() bool { n, _ := owned(oldID); return n == 0 }, "the deleted topic's partitions given up")

	createTopic(t, adm, "rr848-x", 3, nil)
	newID := topicIDByName(t, raw, "rr848-x")
	if newID == oldID {
		t.Fatal("the recreated topic has the old id")
	}
	var last map[string]map[[16]byte][]int32
	testutil.WaitFor(t, 30*time.Second, func() bool {
		n, a := owned(newID)
		last = a
		o, _ := owned(oldID)
		return n == 3 && o == 0
	}, "the recreated topic assigned")
	t.Logf("assignment after the recreation: %v", last)
	// franz-go keeps a topic's first id for as long as it holds the topic (it fails
	// the recreated one with UNKNOWN_TOPIC_ID, by design); to read the recreated
	// topic the application purges it, as franz-go documents.
	for _, m := range members {
		m.cl.PurgeTopicsFromClient("rr848-x")
	}
	p := produceSpread(t, b, "rr848-x", "rr", 3, 5)
	deadline := time.Now().Add(30 * time.Second)
	for led.distinct() < 15 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if led.distinct() < 15 {
		offs, _ := adm.FetchOffsets(ctxT(t, 5*time.Second), group)
		t.Logf("read %d records: %v; committed: %v", led.distinct(), led.all(), offs)
		t.Fatal("the records of the recreated topic were not all read")
	}
	checkAll(t, p, led.all(), nil)
}

// TestGroups848OffsetsOfDeletedTopic: deleting a topic deletes the offsets groups
// committed for it (Kafka's onPartitionsDeleted). A topic created again with the same
// name starts at offset 0; a group that kept the old topic's offsets would resume
// past the new topic's first records and never read them.
func TestGroups848OffsetsOfDeletedTopic(t *testing.T) {
	t.Parallel()
	b := start848Broker(t)
	adm := newAdmin(t, b)
	const topic, group = "od848", "od848-group"
	createTopic(t, adm, topic, 2, nil)
	produceSpread(t, b, topic, "old", 2, 20)
	led := newLedger(t)
	m := new848Member(t, b, "m", group, topic, nil).run(commitLoop(t, "m", led, 5))
	waitDrained(t, adm, group, topic, 30*time.Second)
	m.close()
	if got := committedOffsets(t, adm, group, topic); got[0] != 20 || got[1] != 20 {
		t.Fatalf("committed before the deletion: %v, want 20 on both partitions", got)
	}

	if _, err := adm.DeleteTopics(ctxT(t, 10*time.Second), topic); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		offs, err := adm.FetchOffsets(ctxT(t, 5*time.Second), group)
		if err != nil {
			return false
		}
		_, ok0 := offs.Lookup(topic, 0)
		_, ok1 := offs.Lookup(topic, 1)
		return !ok0 && !ok1
	}, "the deleted topic's committed offsets gone")

	createTopic(t, adm, topic, 2, nil)
	produced := produceSpread(t, b, topic, "new", 2, 30)
	led2 := newLedger(t)
	new848Member(t, b, "m2", group, topic, nil).run(commitLoop(t, "m2", led2, 5))
	testutil.WaitFor(t, 30*time.Second, func() bool { return led2.distinct() >= 60 }, "every record of the recreated topic")
	checkAll(t, produced, led2.all(), nil)
}
