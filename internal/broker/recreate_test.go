package broker

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// aheadMetadata is the broker's metadata source with an image that its handlers see
// but its local partitions have not been reconciled with: the state of a node
// between applying metadata entries and reconciling them (reconcile runs after the
// image is published, from the notifier).
type aheadMetadata struct {
	controller.Metadata
	ahead atomic.Pointer[metadata.Image]
}

func (m *aheadMetadata) Image() *metadata.Image {
	if img := m.ahead.Load(); img != nil {
		return img
	}
	return m.Metadata.Image()
}

func startAheadBroker(t *testing.T) (*Broker, *aheadMetadata) {
	t.Helper()
	cfg, err := config.Load("", []string{"log.dirs=" + t.TempDir(), "listeners=PLAINTEXT://127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Options{Config: cfg, Clock: clock.Real{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	meta := &aheadMetadata{Metadata: b.meta}
	b.meta = meta
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return b, meta
}

// recreatedAhead makes the broker's handlers see topic deleted and created again
// (one partition, led here) while its local partition is still the old topic's.
func recreatedAhead(t *testing.T, b *Broker, meta *aheadMetadata, topic string) (old, recreated *metadata.Topic) {
	t.Helper()
	img := b.image()
	old, _ = img.Topic(topic)
	id := metadata.NewTopicID()
	p := old.Partitions[0]
	next, err := metadata.Apply(img, img.Offset()+1, []metadata.Record{
		metadata.RemoveTopicRecord{ID: old.ID},
		metadata.TopicRecord{Name: topic, ID: id},
		metadata.PartitionRecord{Topic: id, Partition: 0, Replicas: p.Replicas, ISR: p.ISR, Leader: p.Leader},
	})
	if err != nil {
		t.Fatal(err)
	}
	meta.ahead.Store(next)
	recreated, _ = next.Topic(topic)
	if lp := b.replicas.Get(topic, 0); lp == nil || lp.TopicID != [16]byte(old.ID) {
		t.Fatal("the local partition is not the old topic's")
	}
	return old, recreated
}

// produceByID produces one record to partition 0 of the topic with id at version 13
// (acks=1) and returns the partition's answer.
func produceByID(t *testing.T, b *Broker, id metadata.TopicID) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	batch, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(13)
	req.Acks, req.TimeoutMillis = 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.TopicID = id
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	r := <-b.Handle(&protocol.Request{Key: req.Key(), Version: 13, Body: req})
	return r.Body.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

// TestRecreatedTopicNotServedFromTheOldLog: between a node's image re-creating a
// topic and its local partitions being reconciled with it, requests for the topic —
// Produce and Fetch by the new id, ListOffsets by name — must not write to or read
// from the old topic's log (a write there is acknowledged and then deleted with
// it); they answer a retriable error until the new partition is open. The old id is
// UNKNOWN_TOPIC_ID.
func TestRecreatedTopicNotServedFromTheOldLog(t *testing.T) {
	b, meta := startAheadBroker(t)
	createTestTopic(t, b, "re", 1)
	for range 3 {
		if code := produceTo(t, b, "re"); code != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(code))
		}
	}
	old, recreated := recreatedAhead(t, b, meta, "re")

	if sp := produceByID(t, b, old.ID); sp.ErrorCode != kerr.UnknownTopicID.Code {
		t.Errorf("produce by the old id: %v, want UNKNOWN_TOPIC_ID", kerr.ErrorForCode(sp.ErrorCode))
	}
	if sp := produceByID(t, b, recreated.ID); sp.ErrorCode == 0 {
		t.Errorf("produce by the new id acknowledged at offset %d, in the old topic's log", sp.BaseOffset)
	}
	for _, tc := range []struct {
		name string
		tp   *metadata.Topic
	}{{"old id", old}, {"new id", recreated}} {
		resp := <-sendFetch(t, b, consumerFetch(0, 0, 1<<20, tc.tp))
		rp := resp.Topics[0].Partitions[0]
		if tc.tp == old && rp.ErrorCode != kerr.UnknownTopicID.Code {
			t.Errorf("fetch by the old id: %v, want UNKNOWN_TOPIC_ID", kerr.ErrorForCode(rp.ErrorCode))
		}
		if rp.ErrorCode == 0 || len(rp.RecordBatches) > 0 || rp.HighWatermark > 0 {
			t.Errorf("fetch by the %s answered from the old topic's log: %v, high watermark %d, %d bytes of records",
				tc.name, kerr.ErrorForCode(rp.ErrorCode), rp.HighWatermark, len(rp.RecordBatches))
		}
	}

	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "re"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = listLatest
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	if sp := call[*kmsg.ListOffsetsResponse](t, b, lo).Topics[0].Partitions[0]; sp.ErrorCode == 0 {
		t.Errorf("ListOffsets of the re-created topic answered the old log's end offset %d", sp.Offset)
	}
}

// commitOffset commits offset for partition 0 of topic in group (a standalone commit:
// no generation, no member) and returns the partition's error code.
func commitOffset(t *testing.T, b *Broker, group, topic string, offset int64) int16 {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	if tp, ok := b.image().Topic(topic); ok {
		rt.TopicID = tp.ID
	}
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Offset, rp.LeaderEpoch = offset, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return call[*kmsg.OffsetCommitResponse](t, b, req).Topics[0].Partitions[0].ErrorCode
}

// fetchOffset returns group's committed offset for partition 0 of topic (-1: none).
func fetchOffset(t *testing.T, b *Broker, group, topic string) int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(7) // names the group and topic at the top level
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	r := <-b.Handle(&protocol.Request{Key: req.Key(), Version: 7, Body: req})
	resp := r.Body.(*kmsg.OffsetFetchResponse)
	if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset fetch: %v / %v", kerr.ErrorForCode(resp.ErrorCode), kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}
	return resp.Topics[0].Partitions[0].Offset
}

// TestDeletedTopicOffsetsRemoved: deleting a topic removes the offsets groups
// committed for it, as Kafka's group coordinator does (onPartitionsDeleted), so a
// consumer group of a topic deleted and created again does not resume the new
// topic at the old topic's offset (skipping its first records).
func TestDeletedTopicOffsetsRemoved(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "gone", 1)
	createTestTopic(t, b, "kept", 1)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"g"}
	untilDone(t, "FindCoordinator", func() int16 {
		return call[*kmsg.FindCoordinatorResponse](t, b, fc).Coordinators[0].ErrorCode
	})
	untilDone(t, "OffsetCommit", func() int16 { return commitOffset(t, b, "g", "kept", 5) })
	if code := commitOffset(t, b, "g", "gone", 5); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("gone")
	del.TopicNames, del.Topics = []string{"gone"}, []kmsg.DeleteTopicsRequestTopic{dt}
	if code := call[*kmsg.DeleteTopicsResponse](t, b, del).Topics[0].ErrorCode; code != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(code))
	}
	createTestTopic(t, b, "gone", 1)
	testutil.WaitFor(t, 10*time.Second, func() bool { return fetchOffset(t, b, "g", "gone") == -1 },
		"the deleted topic's committed offset removed")
	if o := fetchOffset(t, b, "g", "kept"); o != 5 {
		t.Fatalf("the other topic's committed offset is %d, want 5", o)
	}
}
