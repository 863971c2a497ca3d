package integration

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// compactingInternalTopics are overrides under which the internal topics have one
// partition, small segments, and are cleaned (tombstones and transaction markers
// included) within a second.
var compactingInternalTopics = []string{
	"offsets.topic.num.partitions=1",
	"offsets.topic.segment.bytes=2048",
	"transaction.state.log.num.partitions=1",
	"transaction.state.log.segment.bytes=2048",
	"log.cleaner.backoff.ms=100",
	"log.cleaner.min.cleanable.ratio=0.01",
	"log.cleaner.delete.retention.ms=300",
	"log.retention.check.interval.ms=100",
	"group.initial.rebalance.delay.ms=0",
}

// txnOffsetCommit commits offsets of group in one transaction of transactional id
// txnID through raw requests (InitProducerId, AddOffsetsToTxn, TxnOffsetCommit,
// EndTxn), committed or aborted.
func txnOffsetCommit(t testing.TB, cl *kgo.Client, txnID, group, topic string, offsets map[int32]int64, commit bool) {
	t.Helper()
	openTxnOffsetCommit(t, cl, txnID, group, topic, offsets)(commit)
}

func commitOffsets(t testing.TB, adm *kadm.Client, group, topic string, offsets map[int32]int64) {
	t.Helper()
	os := kadm.Offsets{}
	for p, o := range offsets {
		os.AddOffset(topic, p, o, -1)
	}
	resp, err := adm.CommitOffsets(ctxT(t, 30*time.Second), group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("commit %s: %v", group, err)
	}
}

func fetchOffsets(t testing.TB, adm *kadm.Client, group string) map[string]int64 {
	t.Helper()
	resp, err := adm.FetchOffsets(ctxT(t, 30*time.Second), group)
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	got := map[string]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			t.Fatalf("fetch offsets of %s: %s/%d: %v", group, o.Topic, o.Partition, o.Err)
		}
		got[fmt.Sprintf("%s/%d", o.Topic, o.Partition)] = o.At
	})
	return got
}

// TestConsumerOffsetsCompactionRestart: many plain commits to the same keys,
// transactional offset commits committed and aborted, a deleted group and a deleted
// offset; once the cleaner has compacted __consumer_offsets and dropped the
// tombstones, a restart (kill -9, then a clean stop) shows exactly the last committed
// offsets and no deleted group or offset.
func TestConsumerOffsetsCompactionRestart(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t, compactingInternalTopics...)
	adm := newAdmin(t, b)
	const topic = "offsets-compaction"
	createTopic(t, adm, topic, 3, nil)
	cl := newClient(t, b)

	for i := range 60 {
		commitOffsets(t, adm, "plain", topic, map[int32]int64{0: int64(i), 1: int64(2 * i), 2: int64(3 * i)})
	}
	commitOffsets(t, adm, "txn", topic, map[int32]int64{0: 5, 1: 5, 2: 5})
	txnOffsetCommit(t, cl, "tx-a", "txn", topic, map[int32]int64{0: 100}, true)
	txnOffsetCommit(t, cl, "tx-a", "txn", topic, map[int32]int64{0: 200, 1: 200}, false)
	txnOffsetCommit(t, cl, "tx-b", "txn", topic, map[int32]int64{1: 50}, true)
	commitOffsets(t, adm, "txn", topic, map[int32]int64{2: 7})
	for i := range 30 {
		commitOffsets(t, adm, "gone", topic, map[int32]int64{0: int64(i), 1: int64(i)})
		commitOffsets(t, adm, "partly", topic, map[int32]int64{0: int64(i), 1: int64(i)})
	}
	if resp, err := adm.DeleteGroups(ctxT(t, 30*time.Second), "gone"); err != nil || resp.Error() != nil {
		t.Fatalf("DeleteGroups: %v %v", err, resp.Error())
	}
	if resp, err := adm.DeleteOffsets(ctxT(t, 30*time.Second), "partly", kadm.TopicsSet{topic: {1: {}}}); err != nil || resp.Error() != nil {
		t.Fatalf("OffsetDelete: %v %v", err, resp.Error())
	}

	// Keep committing elsewhere so that segments roll and the cleaner runs again until
	// every record and tombstone of the deleted group is gone.
	i := 0
	testutil.WaitFor(t, 60*time.Second, func() bool {
		i++
		commitOffsets(t, adm, "filler", topic, map[int32]int64{0: int64(i)})
		for k := range readKeyed(t, b, "__consumer_offsets", false) {
			if strings.Contains(k, "gone") {
				return false
			}
		}
		return true
	}, "the cleaner to drop the deleted group's records and tombstones")

	want := map[string]map[string]int64{
		"plain":  {topic + "/0": 59, topic + "/1": 118, topic + "/2": 177},
		"txn":    {topic + "/0": 100, topic + "/1": 50, topic + "/2": 7},
		"partly": {topic + "/0": 29},
		"gone":   {},
	}
	check := func(when string) {
		t.Helper()
		adm := newAdmin(t, b)
		for g, w := range want {
			got := fetchOffsets(t, adm, g)
			if fmt.Sprint(got) != fmt.Sprint(w) {
				t.Errorf("%s: offsets of %s = %v, want %v", when, g, got, w)
			}
		}
		groups, err := adm.ListGroups(ctxT(t, 30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := groups["gone"]; ok {
			t.Errorf("%s: deleted group listed: %v", when, groups.Groups())
		}
	}
	check("before restart")
	b.Kill()
	b.StartAgain(t)
	check("after kill -9")
	b.Restart(t)
	check("after a clean restart")
}

func initTxnProducerID(t testing.TB, cl *kgo.Client, txnID string) (int64, int16) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	var pid int64
	var epoch int16
	testutil.WaitFor(t, 30*time.Second, func() bool {
		init := kmsg.NewPtrInitProducerIDRequest()
		init.TransactionalID = kmsg.StringPtr(txnID)
		init.TransactionTimeoutMillis = 30000
		resp, err := init.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			return false
		}
		pid, epoch = resp.ProducerID, resp.ProducerEpoch
		return true
	}, "InitProducerId of "+txnID)
	return pid, epoch
}

// TestTransactionStateCompactionRestart: a transactional id runs many transactions,
// another one expires (tombstoned); once the cleaner has compacted
// __transaction_state and dropped the tombstone, a restart (kill -9, then a clean
// stop) keeps the live id's producer id, whose InitProducerId bumps its epoch, and
// forgets the expired id.
func TestTransactionStateCompactionRestart(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t, append(compactingInternalTopics,
		"transactional.id.expiration.ms=2000",
		"transaction.remove.expired.transaction.cleanup.interval.ms=200")...)
	adm := newAdmin(t, b)
	const topic = "txn-state-compaction"
	createTopic(t, adm, topic, 1, nil)
	cl := newClient(t, b)

	run := func(id string, commit bool) (int64, int16) {
		pid, epoch := initTxnProducerID(t, cl, id)
		ctx := ctxT(t, 30*time.Second)
		add := kmsg.NewPtrAddPartitionsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, pid, epoch
		at := kmsg.NewAddPartitionsToTxnRequestTopic()
		at.Topic, at.Partitions = topic, []int32{0}
		add.Topics = append(add.Topics, at)
		if _, err := add.RequestWith(ctx, cl); err != nil {
			t.Fatal(err)
		}
		end := kmsg.NewPtrEndTxnRequest()
		end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, pid, epoch, commit
		if resp, err := end.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
			t.Fatalf("EndTxn %s: %v %v", id, err, resp)
		}
		return pid, epoch
	}
	run("expiring", true)
	var livePID int64
	var liveEpoch int16
	for i := range 30 {
		livePID, liveEpoch = run("live", i%3 != 0)
	}
	testutil.WaitFor(t, 60*time.Second, func() bool {
		livePID, liveEpoch = run("live", true) // stays live, rolls segments
		for k := range readKeyed(t, b, "__transaction_state", false) {
			if strings.Contains(k, "expiring") {
				return false
			}
		}
		return true
	}, "the expired id's records and tombstone to be cleaned away")

	for _, when := range []string{"after kill -9", "after a clean restart"} {
		if when == "after kill -9" {
			b.Kill()
			b.StartAgain(t)
		} else {
			b.Restart(t)
		}
		cl := newClient(t, b)
		pid, epoch := initTxnProducerID(t, cl, "live")
		if pid != livePID || epoch <= liveEpoch {
			t.Errorf("%s: InitProducerId of the live id = %d/%d, want producer id %d with an epoch above %d", when, pid, epoch, livePID, liveEpoch)
		}
		livePID, liveEpoch = pid, epoch
		if when != "after kill -9" {
			continue // the expired id was initialized again just above
		}
		if pid, epoch := initTxnProducerID(t, cl, "expiring"); epoch != 0 || pid == livePID {
			t.Errorf("%s: InitProducerId of the expired id = %d/%d, want a fresh producer id at epoch 0", when, pid, epoch)
		}
	}
}

// startShareStateBroker starts a broker whose internal topics compact eagerly and
// whose one __share_group_state partition rolls segments of segmentBytes.
func startShareStateBroker(t *testing.T, segmentBytes int) *testutil.Broker {
	t.Helper()
	return testutil.StartBroker(t, append(slices.Clone(compactingInternalTopics),
		fmt.Sprintf("share.coordinator.state.topic.segment.bytes=%d", segmentBytes),
		"share.coordinator.state.topic.num.partitions=1",
		"group.share.min.heartbeat.interval.ms=1000", "group.share.heartbeat.interval.ms=1000")...)
}

// TestShareGroupStateCompactionRestart: a share consumer accepts many small batches
// (a state write each) and dies holding the rest; __share_group_state rolls segments
// of share.coordinator.state.topic.segment.bytes (as Kafka creates it), so the
// cleaner compacts it, and a restart (kill -9) redelivers exactly the records not
// accepted. The segments hold one state write each, so that once the writes stop
// the active segment (never cleaned) holds no more than the last one.
func TestShareGroupStateCompactionRestart(t *testing.T) {
	t.Parallel()
	b := startShareStateBroker(t, 256)
	adm := newAdmin(t, b)
	const topic, group = "share-state-compaction", "share-state-compaction-g"
	createTopic(t, adm, topic, 1, nil)
	setGroupConfigs(t, b, group, map[string]string{"share.auto.offset.reset": "earliest"})
	vals := produceValues(t, b, topic, "s", 120)

	before := &shareLedger{}
	_, kill, _ := shareMember(t, b, "before", group, topic, before, acceptFirst(90), kgo.ShareMaxRecords(2), kgo.ShareMaxRecordsStrict())
	testutil.WaitFor(t, 60*time.Second, func() bool { return len(before.accepted()) >= 90 }, "90 records accepted")
	raw := newClient(t, b)
	testutil.WaitFor(t, 60*time.Second, func() bool {
		for _, vs := range readKeyed(t, b, "__share_group_state", false) {
			if len(vs) > 2 {
				return false
			}
		}
		start, _ := shareStartOffset(t, raw, group, topic)
		return start >= 90 && cleanedUpTo(b, "__share_group_state", 1)
	}, "__share_group_state to be compacted")
	after := killAndAcceptTheRest(t, b, kill, group, topic, int64(len(vals)))
	got, was := after.accepted(), before.accepted()
	for _, v := range vals {
		if got[v]+was[v] != 1 {
			t.Errorf("%s accepted %d times before the restart and %d after", v, was[v], got[v])
		}
	}
}

// TestConsumerOffsetsCompactionOpenTxnAcrossRestart: a transactional offset commit
// stays open across a kill -9 while the cleaner compacts __consumer_offsets; once it
// is aborted, the group's earlier committed offset is still there, and one committed
// afterwards in another transaction replaces it, before and after a restart.
func TestConsumerOffsetsCompactionOpenTxnAcrossRestart(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t, compactingInternalTopics...)
	adm := newAdmin(t, b)
	const topic = "offsets-open-txn"
	createTopic(t, adm, topic, 2, nil)
	cl := newClient(t, b)
	commitOffsets(t, adm, "g", topic, map[int32]int64{0: 5, 1: 6})

	ctx := ctxT(t, 60*time.Second)
	pid, epoch := initTxnProducerID(t, cl, "open")
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "open", pid, epoch, "g"
	if resp, err := add.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v %v", err, resp)
	}
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch, tc.Generation = "open", "g", pid, epoch, -1
	tt := txnCommitTopic(t, cl, topic)
	tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	tp.Partition, tp.Offset, tp.LeaderEpoch = 0, 500, -1
	tt.Partitions = append(tt.Partitions, tp)
	tc.Topics = append(tc.Topics, tt)
	if resp, err := tc.RequestWith(ctx, cl); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit: %v %v", err, resp)
	}
	filler := func(n int) {
		adm := newAdmin(t, b)
		for i := range n {
			commitOffsets(t, adm, "filler", topic, map[int32]int64{0: int64(i)})
		}
	}
	filler(100)
	b.Restart(t)
	filler(100)
	time.Sleep(time.Second) // let the cleaner run over what it may clean
	filler(50)

	cl = newClient(t, b)
	ctx = ctxT(t, 60*time.Second)
	var endErr error
	testutil.WaitFor(t, 30*time.Second, func() bool {
		end := kmsg.NewPtrEndTxnRequest()
		end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "open", pid, epoch, false
		resp, err := end.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		endErr = err
		return err == nil || !kerr.IsRetriable(err) && err != kerr.ConcurrentTransactions
	}, "EndTxn")
	if endErr != nil {
		t.Fatalf("EndTxn abort: %v", endErr)
	}
	filler(100)
	time.Sleep(time.Second)
	filler(50)
	want := fmt.Sprint(map[string]int64{topic + "/0": 5, topic + "/1": 6})
	check := func(when string) {
		t.Helper()
		var got map[string]int64
		testutil.WaitFor(t, 30*time.Second, func() bool {
			got = fetchOffsets(t, newAdmin(t, b), "g")
			return fmt.Sprint(got) == want
		}, fmt.Sprintf("%s: offsets of g to be %s", when, want))
	}
	check("after the abort")
	b.Kill()
	b.StartAgain(t)
	check("after kill -9")
}

// rawMember848 is a consumer-protocol member driven by raw ConsumerGroupHeartbeats.
type rawMember848 struct {
	id    string
	epoch int32
	owned []kmsg.ConsumerGroupHeartbeatRequestTopic
}

func (m *rawMember848) heartbeat(t testing.TB, cl *kgo.Client, group, topic string, leave bool) {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = group, m.id, m.epoch
	req.SubscribedTopicNames, req.RebalanceTimeoutMillis = []string{topic}, 60000
	req.Topics = m.owned
	if req.Topics == nil {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	if leave {
		req.MemberEpoch = -1
	}
	resp, err := req.RequestWith(ctxT(t, 30*time.Second), cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("heartbeat of %s: %v", m.id, err)
	}
	m.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		m.owned = nil
		for _, a := range resp.Assignment.Topics {
			ot := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			ot.TopicID, ot.Partitions = a.TopicID, a.Partitions
			m.owned = append(m.owned, ot)
		}
	}
}

// TestConsumerGroup848CompactionRestart: members of a consumer group (KIP-848) join
// and leave many times and another consumer group is deleted; once the cleaner has
// compacted __consumer_offsets and dropped the tombstones, a restart (kill -9, then a
// clean stop) shows the same group epoch, members, epochs and assignments, and no
// member that left nor the deleted group.
func TestConsumerGroup848CompactionRestart(t *testing.T) {
	t.Parallel()
	// Every join and leave is assigned at once (no KIP-1263 batching): the test is about
	// the records they leave, and writes one of each in a few heartbeats.
	b := testutil.StartBroker(t, append(compactingInternalTopics,
		"group.consumer.session.timeout.ms=60000", "group.consumer.max.session.timeout.ms=60000",
		"group.consumer.assignment.interval.ms=0")...)
	adm := newAdmin(t, b)
	const topic, group = "c848-compaction", "c848"
	createTopic(t, adm, topic, 4, nil)
	cl := newClient(t, b)

	commitOffsets(t, adm, group, topic, map[int32]int64{0: 1, 1: 2, 2: 3, 3: 4})
	var live []*rawMember848
	converge := func() {
		for range 4 {
			for _, m := range live {
				m.heartbeat(t, cl, group, topic, false)
			}
		}
	}
	for i := range 16 {
		m := &rawMember848{id: fmt.Sprintf("member-%02d", i)}
		live = append(live, m)
		converge()
		if len(live) > 2 {
			live[0].heartbeat(t, cl, group, topic, true)
			live = live[1:]
			converge()
		}
	}
	gone := &rawMember848{id: "gone-member"}
	for range 3 {
		gone.heartbeat(t, cl, "c848-gone", topic, false)
	}
	gone.heartbeat(t, cl, "c848-gone", topic, true)
	commitOffsets(t, adm, "c848-gone", topic, map[int32]int64{0: 9})
	if resp, err := adm.DeleteGroups(ctxT(t, 30*time.Second), "c848-gone"); err != nil || resp.Error() != nil {
		t.Fatalf("DeleteGroups: %v %v", err, resp.Error())
	}
	want, err := describe848(ctxT(t, 30*time.Second), adm, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	if !want.balanced(2, 4) {
		t.Fatalf("before compaction: %v", want)
	}

	i := 0
	testutil.WaitFor(t, 60*time.Second, func() bool {
		i++
		commitOffsets(t, adm, "filler", topic, map[int32]int64{0: int64(i)})
		for k := range readKeyed(t, b, "__consumer_offsets", false) {
			if strings.Contains(k, "member-00") || strings.Contains(k, "c848-gone") {
				return false
			}
		}
		return true
	}, "the cleaner to drop the records and tombstones of the departed members")

	check := func(when string) {
		t.Helper()
		adm := newAdmin(t, b)
		got, err := describe848(ctxT(t, 30*time.Second), adm, group, topic)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if got.String() != want.String() {
			t.Errorf("%s: group %v, want %v", when, got, want)
		}
		groups, err := adm.ListGroups(ctxT(t, 30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := groups["c848-gone"]; ok {
			t.Errorf("%s: deleted group listed", when)
		}
		if got := fetchOffsets(t, adm, "c848-gone"); len(got) != 0 {
			t.Errorf("%s: deleted group has offsets %v", when, got)
		}
	}
	check("before restart")
	b.Kill()
	b.StartAgain(t)
	check("after kill -9")
	b.Restart(t)
	check("after a clean restart")
}

// TestExactlyOncePipelineCompactedBrokerKills: the consume-transform-produce pipeline
// of TestExactlyOncePipelineSurvivesKills while __consumer_offsets and
// __transaction_state are compacted all along and the broker is killed (kill -9) and
// restarted twice in the middle of the stream: every input record reaches the output
// exactly once.
func TestExactlyOncePipelineCompactedBrokerKills(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t, append(append([]string{}, eosBrokerOverrides...), compactingInternalTopics...)...)
	adm := newAdmin(t, b)
	p := testutil.NewEOSPipeline(t, []string{b.Addr}, "eos-compacted")
	createTopic(t, adm, p.In, 4, nil)
	createTopic(t, adm, p.Out, 4, nil)
	const n = 4000
	for _, name := range []string{"a", "b"} {
		p.Start(name)
	}
	fed := p.Feed(newClient(t, b), n, 0, 120*time.Second)
	for i := range 2 {
		p.WaitProgress(int64((i+1)*n/3), 120*time.Second)
		b.Kill()
		b.StartAgain(t)
	}
	if err := <-fed; err != nil {
		p.Fatalf("producing the input: %v", err)
	}
	adm = newAdmin(t, b)
	p.WaitCaughtUp(adm, 120*time.Second)
	p.StopAll()
	p.WaitSettled(adm, 60*time.Second)
	if !cleanedUpTo(b, "__consumer_offsets", 1) || !cleanedUpTo(b, "__transaction_state", 1) {
		t.Errorf("the internal topics were not compacted")
	}
	testutil.CheckExactlyOnce(t, testutil.ReadAll(t, []string{b.Addr}, p.Out, true, 30*time.Second), n)
}

// TestAbortedTxnOffsetsLeaveNoGroup: a group that only ever had offsets committed in
// an aborted transaction is an empty group without offsets, which the offsets
// expiration check deletes (Kafka's cleanupGroupMetadata), before or after a restart.
func TestAbortedTxnOffsetsLeaveNoGroup(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t, append(compactingInternalTopics, "offsets.retention.check.interval.ms=200")...)
	adm := newAdmin(t, b)
	const topic = "aborted-only"
	createTopic(t, adm, topic, 1, nil)
	cl := newClient(t, b)
	check := func(when string) {
		t.Helper()
		adm := newAdmin(t, b)
		testutil.WaitFor(t, 10*time.Second, func() bool {
			groups, err := adm.ListGroups(ctxT(t, 30*time.Second))
			_, ok := groups["ghost"]
			return err == nil && !ok
		}, when+": the group of aborted offsets to be gone")
		if got := fetchOffsets(t, adm, "ghost"); len(got) != 0 {
			t.Errorf("%s: offsets %v", when, got)
		}
	}
	txnOffsetCommit(t, cl, "tx-ghost", "ghost", topic, map[int32]int64{0: 10}, false)
	check("after the abort")
	txnOffsetCommit(t, cl, "tx-ghost", "ghost", topic, map[int32]int64{0: 11}, false)
	b.Kill()
	b.StartAgain(t)
	check("after kill -9")
}

// TestTransactionOpenAtKillCompacted: a transactional id runs many transactions over a
// compacted __transaction_state and is killed (the broker, kill -9) with one open;
// after the restart InitProducerId keeps its producer id with a higher epoch, the open
// transaction is aborted (read_committed never sees it and the last stable offset
// reaches the log end), and the next transaction commits.
func TestTransactionOpenAtKillCompacted(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t, compactingInternalTopics...)
	adm := newAdmin(t, b)
	const topic = "txn-open-at-kill"
	createTopic(t, adm, topic, 1, nil)
	p := newTxnProducer(t, b, "open-at-kill", kgo.ProducerLinger(0))
	for i := range 40 {
		inTxn(t, p, i%4 != 0, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte(fmt.Sprintf("v%d", i))})
	}
	testutil.WaitFor(t, 30*time.Second, func() bool { return cleanedUpTo(b, "__transaction_state", 1) }, "__transaction_state to be compacted")
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctxT(t, 20*time.Second), &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	described, err := adm.DescribeTransactions(ctxT(t, 10*time.Second), "open-at-kill")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := described["open-at-kill"]
	pid, epoch := d.ProducerID, d.ProducerEpoch
	if d.State != "Ongoing" {
		t.Fatalf("before the kill: %+v", d)
	}
	b.Kill()
	b.StartAgain(t)
	cl := newClient(t, b)
	pid2, epoch2 := initTxnProducerID(t, cl, "open-at-kill")
	if pid2 != pid || epoch2 <= epoch {
		t.Errorf("InitProducerId after the restart = %d/%d, want producer id %d above epoch %d", pid2, epoch2, pid, epoch)
	}
	adm = newAdmin(t, b)
	testutil.WaitFor(t, 30*time.Second, func() bool {
		lso, err1 := adm.ListCommittedOffsets(ctxT(t, 10*time.Second), topic)
		hw, err2 := adm.ListEndOffsets(ctxT(t, 10*time.Second), topic)
		l, _ := lso.Lookup(topic, 0)
		h, _ := hw.Lookup(topic, 0)
		return err1 == nil && err2 == nil && l.Offset == h.Offset
	}, "the last stable offset to reach the log end")
	for _, v := range readKeyed(t, b, topic, true)["k"] {
		if v == "open" {
			t.Fatalf("read_committed sees the transaction open at the kill")
		}
	}
}

// killAndAcceptTheRest kills the share member behind kill and then the broker with
// kill -9, starts the broker again, and has a new member of group accept what is left
// of topic's first n records; it returns what that member accepted.
func killAndAcceptTheRest(t *testing.T, b *testutil.Broker, kill *killSwitch, group, topic string, n int64) *shareLedger {
	t.Helper()
	kill.Kill()
	b.Kill()
	b.StartAgain(t)
	after := &shareLedger{}
	_, _, stop := shareMember(t, b, "after", group, topic, after, acceptAll)
	raw := newClient(t, b)
	testutil.WaitFor(t, 60*time.Second, func() bool {
		start, lag := shareStartOffset(t, raw, group, topic)
		return start == n && lag == 0
	}, "the rest to be accepted after the restart")
	stop()
	return after
}

// TestShareGroupStateCompactionRejectRelease: a share consumer rejects some records,
// releases others once and accepts the rest, in many small batches, then dies holding
// some; once __share_group_state is compacted, after a kill -9 and restart the
// rejected and accepted records are never delivered again, and every other record is
// accepted exactly once, the released ones with their delivery count kept.
func TestShareGroupStateCompactionRejectRelease(t *testing.T) {
	t.Parallel()
	b := startShareStateBroker(t, 2048)
	adm := newAdmin(t, b)
	const topic, group = "share-state-reject", "share-state-reject-g"
	createTopic(t, adm, topic, 1, nil)
	setGroupConfigs(t, b, group, map[string]string{"share.auto.offset.reset": "earliest", "share.delivery.count.limit": "5"})
	vals := produceValues(t, b, topic, "r", 120)

	var mu sync.Mutex
	released := map[string]bool{}
	decided := 0
	decide := func(r *kgo.Record) kgo.AckStatus {
		mu.Lock()
		defer mu.Unlock()
		v := string(r.Value)
		switch {
		case decided >= 90:
			return holdAck
		case strings.HasSuffix(v, "3"):
			decided++
			return kgo.AckReject
		case strings.HasSuffix(v, "7") && !released[v]:
			released[v] = true
			return kgo.AckRelease
		}
		decided++
		return kgo.AckAccept
	}
	before := &shareLedger{}
	_, kill, _ := shareMember(t, b, "before", group, topic, before, decide, kgo.ShareMaxRecords(2), kgo.ShareMaxRecordsStrict())
	raw := newClient(t, b)
	testutil.WaitFor(t, 60*time.Second, func() bool {
		mu.Lock()
		n := decided
		mu.Unlock()
		start, _ := shareStartOffset(t, raw, group, topic)
		return n >= 90 && start >= 80 && cleanedUpTo(b, "__share_group_state", 1)
	}, "90 records decided and __share_group_state compacted")
	after := killAndAcceptTheRest(t, b, kill, group, topic, int64(len(vals)))
	decidedBefore := map[string]kgo.AckStatus{}
	for _, s := range before.all() {
		if s.ack == kgo.AckAccept || s.ack == kgo.AckReject {
			decidedBefore[s.value] = s.ack
		}
	}
	got := after.accepted()
	for _, s := range after.all() {
		if ack, ok := decidedBefore[s.value]; ok {
			t.Errorf("%s (ack %v before the restart) delivered again, delivery %d", s.value, ack, s.deliveries)
		}
	}
	for _, v := range vals {
		if _, ok := decidedBefore[v]; !ok && got[v] != 1 {
			t.Errorf("%s, undecided before the restart, accepted %d times after", v, got[v])
		}
	}
}

// TestDeleteRecordsRefusedOnInternalTopics: as in Kafka, DeleteRecords on
// __consumer_offsets or __transaction_state is INVALID_TOPIC_EXCEPTION and moves no
// log start offset, so the committed offsets and transactional ids survive a
// restart.
func TestDeleteRecordsRefusedOnInternalTopics(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t, compactingInternalTopics...)
	adm := newAdmin(t, b)
	const topic = "delete-records-internal"
	createTopic(t, adm, topic, 1, nil)
	cl := newClient(t, b)
	commitOffsets(t, adm, "kept", topic, map[int32]int64{0: 42})
	pid, epoch := initTxnProducerID(t, cl, "kept-txn")

	for _, internal := range []string{"__consumer_offsets", "__transaction_state"} {
		resp, err := adm.DeleteRecords(ctxT(t, 30*time.Second), kadm.Offsets{internal: {0: {Topic: internal, Partition: 0, At: -1}}})
		if err != nil {
			t.Fatalf("DeleteRecords %s: %v", internal, err)
		}
		r, _ := resp.Lookup(internal, 0)
		if r.Err != kerr.InvalidTopicException {
			t.Errorf("DeleteRecords %s-0: %v (low watermark %d), want INVALID_TOPIC_EXCEPTION", internal, r.Err, r.LowWatermark)
		}
		starts, err := adm.ListStartOffsets(ctxT(t, 30*time.Second), internal)
		if err != nil {
			t.Fatal(err)
		}
		if s, _ := starts.Lookup(internal, 0); s.Offset != 0 {
			t.Errorf("%s-0 starts at %d after a refused DeleteRecords", internal, s.Offset)
		}
	}
	b.Kill()
	b.StartAgain(t)
	cl = newClient(t, b)
	if got := fetchOffsets(t, newAdmin(t, b), "kept"); got[topic+"/0"] != 42 {
		t.Errorf("after the restart: offsets of kept = %v", got)
	}
	if p2, e2 := initTxnProducerID(t, cl, "kept-txn"); p2 != pid || e2 != epoch+1 {
		t.Errorf("after the restart: InitProducerId of kept-txn = %d/%d, want %d/%d", p2, e2, pid, epoch+1)
	}
}

// txnCommitTopic is topic in a TxnOffsetCommit request, named as every version wants
// it: by name up to v5, by id from v6.
func txnCommitTopic(t testing.TB, cl *kgo.Client, topic string) kmsg.TxnOffsetCommitRequestTopic {
	t.Helper()
	listed, err := kadm.NewClient(cl).ListTopics(ctxT(t, 10*time.Second), topic)
	if err != nil || listed[topic].Err != nil {
		t.Fatalf("topic %s not described: %v %v", topic, err, listed[topic].Err)
	}
	tt := kmsg.NewTxnOffsetCommitRequestTopic()
	tt.Topic, tt.TopicID = topic, listed[topic].ID
	return tt
}

// openTxnOffsetCommit starts a transaction of txnID committing offsets of group and
// returns a function that ends it.
func openTxnOffsetCommit(t testing.TB, cl *kgo.Client, txnID, group, topic string, offsets map[int32]int64) (end func(commit bool)) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	pid, epoch := initTxnProducerID(t, cl, txnID)
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txnID, pid, epoch, group
	if resp, err := add.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v %v", err, resp)
	}
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch, tc.Generation = txnID, group, pid, epoch, -1
	tt := txnCommitTopic(t, cl, topic)
	for p, o := range offsets {
		tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		tp.Partition, tp.Offset, tp.LeaderEpoch = p, o, -1
		tt.Partitions = append(tt.Partitions, tp)
	}
	tc.Topics = append(tc.Topics, tt)
	resp, err := tc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("TxnOffsetCommit: %v", err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("TxnOffsetCommit %d: %v", rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
			}
		}
	}
	return func(commit bool) {
		t.Helper()
		end := kmsg.NewPtrEndTxnRequest()
		end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = txnID, pid, epoch, commit
		if resp, err := end.RequestWith(ctxT(t, 30*time.Second), cl); err != nil || resp.ErrorCode != 0 {
			t.Fatalf("EndTxn: %v %v", err, resp)
		}
	}
}

// TestTxnOffsetCommitsOfTwoProducersCompacted: two transactions commit an offset of the
// same partition; the one written later to __consumer_offsets commits first. As in
// Kafka (the later record wins: OffsetMetadataManager compares record offsets), the
// group's offset is the one written later, before compaction and after it and a
// restart alike (compaction keeps only that record).
func TestTxnOffsetCommitsOfTwoProducersCompacted(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t, compactingInternalTopics...)
	adm := newAdmin(t, b)
	const topic = "two-txn-producers"
	createTopic(t, adm, topic, 1, nil)
	cl := newClient(t, b)
	end1 := openTxnOffsetCommit(t, cl, "tx-first", "two", topic, map[int32]int64{0: 10})
	end2 := openTxnOffsetCommit(t, cl, "tx-second", "two", topic, map[int32]int64{0: 20})
	end2(true)
	end1(true)
	want := fmt.Sprint(map[string]int64{topic + "/0": 20})
	if got := fetchOffsets(t, adm, "two"); fmt.Sprint(got) != want {
		t.Errorf("before compaction: offsets %v, want %v", got, want)
	}
	i := 0
	testutil.WaitFor(t, 60*time.Second, func() bool {
		i++
		commitOffsets(t, adm, "filler", topic, map[int32]int64{0: int64(i)})
		n := 0
		for k, vs := range readKeyed(t, b, "__consumer_offsets", false) {
			if strings.Contains(k, "two-txn-producers") && strings.Contains(k, "\x00\x03two") {
				n += len(vs)
			}
		}
		return n == 1
	}, "the cleaner to keep one offset record of the group")
	b.Kill()
	b.StartAgain(t)
	if got := fetchOffsets(t, newAdmin(t, b), "two"); fmt.Sprint(got) != want {
		t.Errorf("after compaction and kill -9: offsets %v, want %v", got, want)
	}
}

// TestInternalTopicPartitionsChangedAcrossRestart: a broker restarted with other
// offsets.topic.num.partitions, transaction.state.log.num.partitions and
// share.coordinator.state.topic.num.partitions than the
// internal topics were created with keeps using the topics' partition counts, as
// Kafka does (the properties only size the topics when they are created): the groups'
// offsets, the transactional ids and the share-partition state are found where they
// were written.
func TestInternalTopicPartitionsChangedAcrossRestart(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t, "offsets.topic.num.partitions=4", "transaction.state.log.num.partitions=4",
		"share.coordinator.state.topic.num.partitions=4")
	adm := newAdmin(t, b)
	const topic, shareGroup = "partitions-changed", "partitions-changed-share"
	createTopic(t, adm, topic, 1, nil)
	cl := newClient(t, b)
	setGroupConfigs(t, b, shareGroup, map[string]string{"share.auto.offset.reset": "earliest"})
	produceValues(t, b, topic, "p", 40)
	led := &shareLedger{}
	_, _, stopShare := shareMember(t, b, "before", shareGroup, topic, led, acceptFirst(20), kgo.ShareMaxRecords(10), kgo.ShareMaxRecordsStrict())
	testutil.WaitFor(t, 30*time.Second, func() bool {
		start, _ := shareStartOffset(t, cl, shareGroup, topic)
		return start == 20
	}, "20 records accepted")
	stopShare()
	pids := map[string][2]int64{}
	for i := range 8 {
		commitOffsets(t, adm, fmt.Sprintf("group-%d", i), topic, map[int32]int64{0: int64(100 + i)})
		id := fmt.Sprintf("txn-%d", i)
		pid, epoch := initTxnProducerID(t, cl, id)
		pids[id] = [2]int64{pid, int64(epoch)}
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	b.Overrides = []string{"offsets.topic.num.partitions=1", "transaction.state.log.num.partitions=1",
		"share.coordinator.state.topic.num.partitions=1"}
	b.StartAgain(t)
	adm = newAdmin(t, b)
	cl = newClient(t, b)
	testutil.WaitFor(t, 30*time.Second, func() bool {
		start, _ := shareStartOffset(t, cl, shareGroup, topic)
		return start == 20
	}, "the share group's start offset to be 20 after the restart")
	for i := range 8 {
		g := fmt.Sprintf("group-%d", i)
		if got := fetchOffsets(t, adm, g); got[topic+"/0"] != int64(100+i) {
			t.Errorf("after the restart: offsets of %s = %v", g, got)
		}
		id := fmt.Sprintf("txn-%d", i)
		if pid, epoch := initTxnProducerID(t, cl, id); pid != pids[id][0] || int64(epoch) != pids[id][1]+1 {
			t.Errorf("after the restart: InitProducerId of %s = %d/%d, want %d/%d", id, pid, epoch, pids[id][0], pids[id][1]+1)
		}
	}
}
