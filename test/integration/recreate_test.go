package integration

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestGroupConsumesRecreatedTopicFromStart: a consumer group that committed offsets
// on a topic which is then deleted and created again with the same name starts the
// new topic at its reset offset (here the start), not at the old topic's committed
// offset: Kafka removes the offsets of deleted topics.
func TestGroupConsumesRecreatedTopicFromStart(t *testing.T) {
	b := startGroupBroker(t)
	adm := newAdmin(t, b)
	const topic, group = "recreated-group", "recreated-g"
	createTopic(t, adm, topic, 1, nil)
	producer := newClient(t, b, kgo.DefaultProduceTopic(topic))
	for i := range 5 {
		produceSync(t, producer, &kgo.Record{Value: value(i)})
	}
	first := newClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	ctx := ctxT(t, 30*time.Second)
	for n := 0; n < 5; {
		fs := first.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 5 records", n)
		}
		n += len(fs.Records())
	}
	if err := first.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	first.Close()
	if o, err := adm.FetchOffsets(ctx, group); err != nil || o[topic][0].At != 5 {
		t.Fatalf("committed before the deletion: %v %v", o, err)
	}

	if res, err := adm.DeleteTopics(ctx, topic); err != nil || res[topic].Err != nil {
		t.Fatalf("delete: %v %v", err, res[topic].Err)
	}
	createTopic(t, adm, topic, 1, nil)
	testutil.WaitFor(t, 10*time.Second, func() bool {
		o, err := adm.FetchOffsets(ctx, group)
		_, ok := o.Lookup(topic, 0)
		return err == nil && !ok
	}, "the deleted topic's offsets removed")
	fresh := newClient(t, b, kgo.DefaultProduceTopic(topic))
	for i := range 8 {
		produceSync(t, fresh, &kgo.Record{Value: value(100 + i)})
	}
	second := newClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []*kgo.Record
	for len(got) < 8 {
		fs := second.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of the re-created topic's 8 records", len(got))
		}
		got = append(got, fs.Records()...)
	}
	if got[0].Offset != 0 || string(got[0].Value) != string(value(100)) {
		t.Fatalf("the group started the re-created topic at offset %d (%s), want 0", got[0].Offset, got[0].Value)
	}
}
