package integration

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestTxnOffsetCommitByTopicID: TxnOffsetCommit v6 (KIP-1319, Kafka 4.4) names topics
// by id. franz-go's GroupTransactSession, which sends v6 to a broker that serves it,
// reads a topic and writes another in transactions: the group's committed offset
// reaches the input's end, the output holds each input record once for a
// read_committed reader, and the broker counted TxnOffsetCommit v6 requests. A v6
// commit naming a topic id no topic has is answered UNKNOWN_TOPIC_ID for that topic,
// its id echoed, without touching the transaction.
func TestTxnOffsetCommitByTopicID(t *testing.T) {
	t.Parallel()
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	b := testutil.StartBroker(t, "metrics.listener="+metricsAddr, "group.initial.rebalance.delay.ms=0")
	adm := newAdmin(t, b)
	const in, out, group, n = "txn6-in", "txn6-out", "txn6-group", 300
	createTopic(t, adm, in, 1, nil)
	createTopic(t, adm, out, 1, nil)
	p := newClient(t, b, kgo.DefaultProduceTopic(in))
	for i := range n {
		produceSync(t, p, &kgo.Record{Value: value(i)})
	}

	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(b.Addr), kgo.TransactionalID("txn6"),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(in), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DefaultProduceTopic(out), kgo.RequireStableFetchOffsets())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ctx := ctxT(t, 60*time.Second)
	for copied := 0; copied < n; {
		fs := sess.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("copied %d of %d records: %v", copied, n, err)
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		var k int
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Value: r.Value}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
			k++
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatalf("End: %v", err)
		}
		if committed {
			copied += k
		}
	}

	offsets, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offsets.Lookup(in, 0); !ok || o.At != n {
		t.Errorf("the group's committed offset of %s: %+v (found %v), want %d", in, o, ok, n)
	}
	if got := consumeN(t, b, out, n, kgo.FetchIsolationLevel(kgo.ReadCommitted())); len(got) != n {
		t.Errorf("%s holds %d committed records, want %d", out, len(got), n)
	}
	if v := testutil.MetricValue(scrape(t, metricsAddr), "samsa_requests_total", map[string]string{"api": "TxnOffsetCommit", "version": "6"}); v == 0 {
		t.Error("franz-go sent no TxnOffsetCommit v6: samsa_requests_total{api=TxnOffsetCommit,version=6} is 0")
	}

	// A topic id that names no topic.
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = "txn6-raw", group, 1, 0, -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.TopicID = [16]byte{1, 2, 3}
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, newClient(t, b))
	switch {
	case err != nil:
		t.Fatal(err)
	case resp.Version != 6:
		t.Errorf("the raw TxnOffsetCommit went out at v%d, want 6", resp.Version)
	case len(resp.Topics) != 1 || resp.Topics[0].TopicID != rt.TopicID || len(resp.Topics[0].Partitions) != 1:
		t.Errorf("TxnOffsetCommit v6 of an unknown topic id answered %+v", resp.Topics)
	case !errors.Is(kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode), kerr.UnknownTopicID):
		t.Errorf("TxnOffsetCommit v6 of an unknown topic id: %v, want UNKNOWN_TOPIC_ID", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}
	after, err := adm.FetchOffsets(ctx, group)
	if o, ok := after.Lookup(in, 0); err != nil || !ok || o.At != n || len(after) != 1 {
		t.Errorf("the group's offsets after the refused commit: %+v, %v; want %s-0 at %d alone", after, err, in, n)
	}
}
