package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestShareAckSpanningLogStart: member A acquires offsets 0..9, DeleteRecords moves the
// log start to 5 and member B's fetch moves the share-partition start there; A then
// accepts 0..9 in one acknowledgement (franz-go joins consecutive offsets so). As in
// Kafka the offsets below the start are skipped and 5..9, still in the log, are
// accepted: they are not delivered again once A's locks would have expired.
func TestShareAckSpanningLogStart(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t, "group.share.min.record.lock.duration.ms=1000", "group.share.record.lock.duration.ms=2000")
	const topic, group = "share-ack-log-start", "share-ack-log-start"
	adm := newAdmin(t, b)
	createTopic(t, adm, topic, 1, nil)
	cl := newClient(t, b)
	id := topicID(t, cl, topic)
	produceValues(t, b, topic, "v", 10)
	produceValues(t, b, topic, "w", 10)
	ctx := ctxT(t, 2*time.Minute)
	testutil.WaitFor(t, 30*time.Second, func() bool { return shareAlter(ctx, cl, group, topic, 0) == nil }, "the first AlterShareGroupOffsets")
	a := &rawShareSession{c: newClient(t, b), group: group, member: "member-a-000000000000", topicID: id}
	other := &rawShareSession{c: newClient(t, b), group: group, member: "member-b-000000000000", topicID: id}
	for _, m := range []string{a.member, other.member} {
		if err := shareJoin(ctx, cl, group, m, topic); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := a.fetch(ctx, 500, 10, nil, 0); err != nil || len(got) != 10 || got[0] != 0 {
		t.Fatalf("A's fetch: %v %v", got, err)
	}
	var at kadm.Offsets
	at.AddOffset(topic, 0, 5, -1)
	if res, err := adm.DeleteRecords(ctx, at); err != nil || res.Error() != nil {
		t.Fatalf("DeleteRecords to 5: %v %v", err, res.Error())
	}
	got, err := other.fetch(ctx, 500, 10, nil, 0)
	if err != nil || len(got) == 0 || got[0] < 10 {
		t.Fatalf("B's fetch after the log start moved to 5: %v %v", got, err)
	}
	if code, err := a.acknowledge(ctx, 0, 9, 1); err != nil || code != 0 {
		t.Fatalf("A's acceptance of 0..9 (5..9 still in the log, its own): %v %v", kerr.ErrorForCode(code), err)
	}
	if code, err := other.acknowledge(ctx, got[0], got[len(got)-1], 1); err != nil || code != 0 {
		t.Fatalf("B's acceptance of %d..%d: %v %v", got[0], got[len(got)-1], kerr.ErrorForCode(code), err)
	}
	// A fetch that waits past A's lock duration: nothing comes back.
	if again, err := other.fetch(ctx, 3000, 100, nil, 0); err != nil || len(again) > 0 {
		t.Fatalf("delivered again after A accepted them: %v %v", again, err)
	}
	if start, lag, err := shareStart(ctx, cl, group, topic); err != nil || start != 20 || lag != 0 {
		t.Fatalf("share start %d, lag %d (%v), want 20 and 0", start, lag, err)
	}
}

// TestShareCompactedAwayReleased: on a compacted topic a share member acquires the
// first records, the cleaner removes them (their keys written again), and the member
// releases them. The log no longer has those offsets: as Kafka does, the next fetch
// archives them, so the window (100 locks here) moves on and every record still in
// the log is delivered, the share start reaching the log end.
func TestShareCompactedAwayReleased(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t, "log.cleaner.backoff.ms=100", "group.share.partition.max.record.locks=100")
	const topic, group, keys, rounds = "share-compacted", "share-compacted", 10, 40
	adm := newAdmin(t, b)
	createTopic(t, adm, topic, 1, map[string]*string{
		"cleanup.policy":            kadm.StringPtr("compact"),
		"segment.bytes":             kadm.StringPtr("2048"),
		"min.cleanable.dirty.ratio": kadm.StringPtr("0.01"),
		"file.delete.delay.ms":      kadm.StringPtr("100"),
	})
	cl := newClient(t, b)
	id := topicID(t, cl, topic)
	p := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	produce := func(key, value string) int64 {
		r := &kgo.Record{Key: []byte(key), Value: []byte(value)}
		produceSync(t, p, r)
		return r.Offset
	}
	for k := range 5 {
		produce(fmt.Sprint("k", k), "first")
	}
	ctx := ctxT(t, 3*time.Minute)
	testutil.WaitFor(t, 30*time.Second, func() bool { return shareAlter(ctx, cl, group, topic, 0) == nil }, "the first AlterShareGroupOffsets")
	m := &rawShareSession{c: newClient(t, b), group: group, member: "member-a-000000000000", topicID: id}
	if err := shareJoin(ctx, cl, group, m.member, topic); err != nil {
		t.Fatal(err)
	}
	if got, err := m.fetch(ctx, 500, 30, nil, 0); err != nil || len(got) != 5 {
		t.Fatalf("the first fetch: %v %v", got, err)
	}
	latest := map[int64]bool{}
	for r := range rounds {
		for k := range keys {
			o := produce(fmt.Sprint("k", k), fmt.Sprint("v", r))
			if r == rounds-1 {
				latest[o] = true
			}
		}
	}
	end := produce("end", string(make([]byte, 3000))) // rolls the segment
	latest[end] = true
	testutil.WaitFor(t, 60*time.Second, func() bool {
		c := newClient(t, b, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		defer c.Close()
		recs := c.PollFetches(ctxT(t, 5*time.Second)).Records()
		return len(recs) > 0 && recs[0].Offset >= 5
	}, "the cleaner to remove offsets 0..4")
	for o := range int64(5) {
		if code, err := m.acknowledge(ctx, o, o, 2); err != nil || code != 0 { // release
			t.Fatalf("releasing %d: %v %v", o, kerr.ErrorForCode(code), err)
		}
	}
	testutil.WaitFor(t, 30*time.Second, func() bool {
		got, err := m.fetch(ctx, 100, 50, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range got {
			delete(latest, o)
		}
		if len(got) > 0 {
			if code, err := m.acknowledge(ctx, got[0], got[len(got)-1], 1); err != nil || code != 0 {
				t.Fatalf("accepting %d..%d: %v %v", got[0], got[len(got)-1], kerr.ErrorForCode(code), err)
			}
		}
		return len(latest) == 0
	}, "every record still in the log")
	if start, lag, err := shareStart(ctx, cl, group, topic); err != nil || start != end+1 || lag != 0 {
		t.Fatalf("share start %d, lag %d (%v), want %d and 0", start, lag, err, end+1)
	}
}

// acknowledge sends one ShareAcknowledge of offsets first..last (one type) and returns
// the partition's error code.
func (s *rawShareSession) acknowledge(ctx context.Context, first, last int64, ackType int8) (int16, error) {
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &s.group, &s.member, s.epoch
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = s.topicID
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
	ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = first, last, []int8{ackType}
	rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, s.c)
	if err != nil {
		return 0, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, err
	}
	s.epoch++
	return resp.Topics[0].Partitions[0].ErrorCode, nil
}
