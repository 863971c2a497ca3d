package integration

// share.partition.max.record.locks as a group config (KIP-1240, Kafka 4.3): a share
// group's window of records in flight on a partition is bounded by its own value,
// within the broker's group.share.{min,max}.partition.max.record.locks, and a change
// applies to the loaded partition at its next use.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// windowSession is a share session on partition 0 of a topic in the default,
// batch-optimized acquire mode (a batch once started is acquired whole).
type windowSession struct {
	c             *kgo.Client
	group, member string
	topicID       [16]byte
	epoch         int32
}

// fetch sends a ShareFetch waiting up to maxWait that accepts the offsets
// [accept[0], accept[1]] (none when accept is nil), and returns the acquired runs as
// "first-last" strings; any error fails the test.
func (s *windowSession) fetch(t *testing.T, ctx context.Context, maxWait time.Duration, accept []int64) []string {
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &s.group, &s.member, s.epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = int32(maxWait.Milliseconds()), 1, 1<<20
	req.MaxRecords, req.BatchSize = 1000, 1000
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = s.topicID
	rp := kmsg.NewShareFetchRequestTopicPartition()
	if accept != nil {
		ab := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
		ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = accept[0], accept[1], []int8{1}
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, s.c)
	if err != nil {
		t.Errorf("%s: ShareFetch: %v", s.member, err)
		return nil
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Errorf("%s: ShareFetch: %v", s.member, err)
		return nil
	}
	s.epoch++
	var runs []string
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Errorf("%s: ShareFetch partition: %v", s.member, err)
			}
			if err := kerr.ErrorForCode(p.AcknowledgeErrorCode); err != nil {
				t.Errorf("%s: acknowledgement: %v", s.member, err)
			}
			for _, a := range p.AcquiredRecords {
				runs = append(runs, fmt.Sprintf("%d-%d", a.FirstOffset, a.LastOffset))
			}
		}
	}
	return runs
}

// TestShareGroupRecordLocksGroupConfig: a group with share.partition.max.record.locks=100
// acquires batches of 40 records until the batch that reaches 100 (offsets 0-119) and
// no more while they are held, whereas a group with the default (2,000) takes every
// record; values outside the broker's bounds are refused. Raising the limit lets a
// fetch waiting for room acquire at once; lowering it below the window stops the
// window growing until acknowledgements bring it below the new limit.
func TestShareGroupRecordLocksGroupConfig(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t)
	const topic, limited, unlimited = "share-record-locks", "share-locks-100", "share-locks-default"
	adm := newAdmin(t, b)
	createTopic(t, adm, topic, 1, nil)
	cl := newClient(t, b)
	id := topicID(t, cl, topic)

	for _, v := range []string{"50", "5000"} {
		code, msg := alterGroupConfigs(t, cl, limited, map[string]string{"share.partition.max.record.locks": v})
		want := "share.partition.max.record.locks=" + v + " is outside [group.share.min.partition.max.record.locks=100, group.share.max.partition.max.record.locks=4000]"
		if code != kerr.InvalidConfig.Code || !strings.Contains(msg, want) {
			t.Errorf("share.partition.max.record.locks=%s: %v %q, want INVALID_CONFIG containing %q", v, kerr.ErrorForCode(code), msg, want)
		}
	}
	setGroupConfigs(t, b, limited, map[string]string{"share.partition.max.record.locks": "100", "share.auto.offset.reset": "earliest"})
	setGroupConfigs(t, b, unlimited, map[string]string{"share.auto.offset.reset": "earliest"})

	for i := range 8 { // offsets 0-39, 40-79, …, 280-319
		batch, err := record.Build(record.DefaultBuildOptions(), make([]record.Record, 40))
		if err != nil {
			t.Fatal(err)
		}
		if p := produceRaw(t, cl, topic, batch); p.ErrorCode != 0 || p.BaseOffset != int64(40*i) {
			t.Fatalf("produce batch %d: %v at %d", i, kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
		}
	}
	ctx := ctxT(t, 2*time.Minute)
	session := func(group, member string) *windowSession {
		if err := shareJoin(ctx, cl, group, member, topic); err != nil {
			t.Fatalf("%s joins %s: %v", member, group, err)
		}
		return &windowSession{c: newClient(t, b), group: group, member: member, topicID: id}
	}
	a, other, wide := session(limited, "member-a"), session(limited, "member-b"), session(unlimited, "member-c")

	// a's fetches, without acknowledging, stop at the batch that reaches 100.
	if got := a.fetch(t, ctx, 5*time.Second, nil); strings.Join(got, ",") != "0-119" {
		t.Fatalf("member of the group limited to 100 acquired %v, want 0-119 (the batch 80-119 reaches 100)", got)
	}
	if got := a.fetch(t, ctx, 5*time.Second, nil); len(got) != 0 {
		t.Fatalf("member holding the full window acquired %v more", got)
	}
	if got := wide.fetch(t, ctx, 5*time.Second, nil); strings.Join(got, ",") != "0-319" {
		t.Fatalf("member of the group with the default limit acquired %v, want 0-319", got)
	}
	start := time.Now()
	if got := other.fetch(t, ctx, 300*time.Millisecond, nil); len(got) != 0 {
		t.Fatalf("another member acquired %v from the full window", got)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("another member's fetch was answered after %v, want it to wait its 300 ms for room", waited)
	}

	// Raised to 200: b's fetch, waiting for room, acquires up to the batch that reaches 200.
	waiting := make(chan []string, 1)
	start = time.Now()
	go func() { waiting <- other.fetch(t, ctx, 30*time.Second, nil) }()
	if code, msg := alterGroupConfigs(t, cl, limited, map[string]string{"share.partition.max.record.locks": "200"}); code != 0 {
		t.Fatalf("share.partition.max.record.locks=200: %v %s", kerr.ErrorForCode(code), msg)
	}
	if got := <-waiting; strings.Join(got, ",") != "120-199" {
		t.Fatalf("after raising the limit to 200, the waiting fetch acquired %v, want 120-199", got)
	}
	if waited := time.Since(start); waited > 20*time.Second {
		t.Fatalf("the waiting fetch acquired only after %v: the raised limit did not wake it", waited)
	}

	// Lowered to 100 under a window of 200: a's acceptance of 0-39 leaves 160 in
	// flight, nothing more is acquired; accepting 40-119 leaves 80, and the batch
	// 200-239 that reaches 100 is acquired.
	setGroupConfigs(t, b, limited, map[string]string{"share.partition.max.record.locks": "100"})
	if got := a.fetch(t, ctx, 300*time.Millisecond, []int64{0, 39}); len(got) != 0 {
		t.Fatalf("with 160 records in flight and the limit lowered to 100, acquired %v", got)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		start, _ := shareStartOffset(t, cl, limited, topic)
		return start == 40
	}, "the share-partition start to move to 40")
	if got := a.fetch(t, ctx, 5*time.Second, []int64{40, 119}); strings.Join(got, ",") != "200-239" {
		t.Fatalf("with 80 records in flight under the limit of 100, acquired %v, want 200-239", got)
	}
}
