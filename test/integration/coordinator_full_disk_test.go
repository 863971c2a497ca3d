package integration

// The coordinators' internal topics on a full disk: __consumer_offsets,
// __transaction_state and __share_group_state each have their one partition (one
// broker per test) in a small tmpfs log directory
// (the second of log.dirs; the metadata log stays on the first) that a ballast file
// fills. A write a coordinator cannot append is refused with a retriable coordinator
// error (Kafka's coordinators turn a storage error of their log into NOT_COORDINATOR,
// or COORDINATOR_NOT_AVAILABLE); nothing acknowledged before is lost; once the ballast
// is removed the same coordinator writes again without a restart, and after a restart
// every acknowledged write is there.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// startFullDiskCoordinator starts a broker whose log.dirs are a healthy directory and a
// small tmpfs, creates topic (one partition) — placed in the healthy directory, the
// emptier one holding none yet — and then has internalTopic created through ensure:
// its one partition goes to the tmpfs, which now holds fewer partitions. It returns
// the broker and the tmpfs.
func startFullDiskCoordinator(t *testing.T, topic, internalTopic string, ensure func(*testutil.Broker), overrides ...string) (*testutil.Broker, string) {
	t.Helper()
	full := testutil.SmallDisk(t, "4m")
	healthy := t.TempDir()
	b := testutil.StartBroker(t, append([]string{"log.dirs=" + healthy + "," + full}, overrides...)...)
	createTopicOrFail(t, newAdmin(t, b), topic, 1, nil)
	if _, err := os.Stat(filepath.Join(healthy, topic+"-0")); err != nil {
		t.Fatalf("%s-0 is not in the healthy log directory: %v", topic, err)
	}
	ensure(b)
	if _, err := os.Stat(filepath.Join(full, internalTopic+"-0")); err != nil {
		t.Fatalf("%s-0 was not placed on the small disk: %v", internalTopic, err)
	}
	return b, full
}

// isCoordinatorRetriable reports whether code is what Kafka answers for a coordinator
// whose log refused a write: the client finds the coordinator again and retries.
func isCoordinatorRetriable(code int16) bool {
	return code == kerr.NotCoordinator.Code || code == kerr.CoordinatorNotAvailable.Code
}

// commitRaw sends one OffsetCommit for topic-0 straight to the broker (no client retry)
// and returns the partition's error code.
func commitRaw(t *testing.T, c *kgo.Client, group, member string, generation int32, topic string, offset int64) int16 {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = group, member, generation
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = 0, offset, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t, 20*time.Second), c.Broker(1))
	if err != nil {
		t.Fatalf("offset commit %d: %v", offset, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("offset commit %d: response %+v, want one partition", offset, resp.Topics)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// joinConsumerRaw sends a KIP-848 ConsumerGroupHeartbeat joining a new member (epoch 0,
// which the coordinator must write) and returns the response.
func joinConsumerRaw(t *testing.T, c *kgo.Client, group, member, topic string) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = group, member, 0
	req.RebalanceTimeoutMillis = 30000
	req.SubscribedTopicNames = []string{topic}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp, err := req.RequestWith(ctxT(t, 20*time.Second), c.Broker(1))
	if err != nil {
		t.Fatalf("consumer group heartbeat: %v", err)
	}
	return resp
}

// fetchCommitted returns group's committed offset of topic-0 (-1: none).
func fetchCommitted(t *testing.T, b *testutil.Broker, group, topic string) int64 {
	t.Helper()
	res, err := newAdmin(t, b).FetchOffsets(ctxT(t, 20*time.Second), group)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	if o, ok := res.Lookup(topic, 0); ok {
		return o.At
	}
	return -1
}

// TestCoordinatorFullDiskOffsets: __consumer_offsets on a full disk. A classic member's
// OffsetCommit and a KIP-848 member's joining heartbeat are refused with a retriable
// coordinator error while the process stays up; the offset committed before is still
// fetched; once space is freed commits and joins succeed without a restart; after a
// restart the committed offset is the last acknowledged one.
func TestCoordinatorFullDiskOffsets(t *testing.T) {
	t.Parallel()
	const topic, group = "data", "classic"
	b, full := startFullDiskCoordinator(t, topic, "__consumer_offsets", func(b *testutil.Broker) {
		testutil.WaitFor(t, 20*time.Second, func() bool {
			res := newAdmin(t, b).FindGroupCoordinators(ctxT(t, 5*time.Second), "any")
			return res["any"].Err == nil
		}, "the group coordinator available")
	}, "offsets.topic.num.partitions=1", "group.initial.rebalance.delay.ms=0")
	produceSync(t, newClient(t, b), recordsTo(topic, 0, "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9")...)

	member := newClient(t, b, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	testutil.WaitFor(t, 20*time.Second, func() bool {
		member.PollRecords(ctxT(t, 200*time.Millisecond), 100)
		_, generation := member.GroupMetadata()
		return generation > 0
	}, "the classic member joined")
	memberID, generation := member.GroupMetadata()
	// Versions without topic ids (OffsetCommit v10) and with member ids the client makes
	// (ConsumerGroupHeartbeat v1).
	raw := newClient(t, b, kgo.MaxVersions(func() *kversion.Versions {
		v := kversion.Stable()
		v.SetMaxKeyVersion(8, 9)
		v.SetMaxKeyVersion(68, 1)
		return v
	}()))
	acked := int64(1)
	if code := commitRaw(t, raw, group, memberID, generation, topic, acked); code != 0 {
		t.Fatalf("commit before the disk filled: %v", kerr.ErrorForCode(code))
	}

	ballast := testutil.FillDisk(t, full, 0)
	var refused int16
	for next := acked + 1; next < 2000 && refused == 0; next++ { // until a commit meets the full disk
		switch code := commitRaw(t, raw, group, memberID, generation, topic, next); {
		case code == 0:
			acked = next
		case isCoordinatorRetriable(code):
			refused = code
		default:
			t.Fatalf("commit %d on the full disk: %v, want NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE", next, kerr.ErrorForCode(code))
		}
	}
	if refused == 0 {
		t.Fatal("commits on the full disk kept succeeding")
	}
	if code := commitRaw(t, raw, group, memberID, generation, topic, 1999); !isCoordinatorRetriable(code) {
		t.Fatalf("a second commit on the full disk: %v, want NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(code))
	}
	if got := fetchCommitted(t, b, group, topic); got != acked {
		t.Fatalf("committed offset while the disk is full: %d, want %d (the last acknowledged)", got, acked)
	}
	resp := joinConsumerRaw(t, raw, "next-gen", "m-full", topic)
	if !isCoordinatorRetriable(resp.ErrorCode) {
		t.Fatalf("a KIP-848 join on the full disk: %v (%v), want NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE",
			kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
	}
	if exited, err := b.Exited(); exited {
		t.Fatalf("the broker exited on the full disk: %v\n%s", err, b.Log())
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	// The failed KIP-848 write made the coordinator reload its partition from the log
	// (memory had applied it): until that is done it answers COORDINATOR_LOAD_IN_PROGRESS,
	// which clients retry.
	retrying := func(code int16) bool {
		return isCoordinatorRetriable(code) || code == kerr.CoordinatorLoadInProgress.Code
	}
	acked = 2000
	code := int16(-1)
	testutil.WaitFor(t, 20*time.Second, func() bool {
		code = commitRaw(t, raw, group, memberID, generation, topic, acked)
		if code != 0 && !retrying(code) {
			t.Fatalf("commit once space is freed: %v", kerr.ErrorForCode(code))
		}
		return code == 0
	}, "a commit once space is freed")
	if got := fetchCommitted(t, b, group, topic); got != acked {
		t.Fatalf("committed offset once space is freed: %d, want %d", got, acked)
	}
	testutil.WaitFor(t, 20*time.Second, func() bool {
		resp := joinConsumerRaw(t, raw, "next-gen", "m-free", topic)
		if resp.ErrorCode != 0 && !retrying(resp.ErrorCode) {
			t.Fatalf("a KIP-848 join once space is freed: %v (%v)", kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
		}
		return resp.ErrorCode == 0 && resp.MemberEpoch > 0
	}, "a KIP-848 join once space is freed")
	member.Close()
	raw.Close()
	noPanic(t, b)
	b.Restart(t)
	if got := fetchCommitted(t, b, group, topic); got != acked {
		t.Fatalf("committed offset after a restart: %d, want %d", got, acked)
	}
}

// TestCoordinatorFullDiskTransactions: __transaction_state on a full disk. A
// transactional producer's transaction fails with a retriable error while the process
// stays up; once space is freed it aborts what was open and commits again without a
// restart; read_committed consumers, before and after a restart, read each committed
// record exactly once and nothing of the failed or aborted ones.
func TestCoordinatorFullDiskTransactions(t *testing.T) {
	t.Parallel()
	for _, tv := range txnVersions {
		t.Run(tv.name, func(t *testing.T) {
			t.Parallel()
			fullDiskTransactions(t, tv.opts)
		})
	}
}

func fullDiskTransactions(t *testing.T, opts []kgo.Opt) {
	const topic = "tdata"
	b, full := startFullDiskCoordinator(t, topic, "__transaction_state", func(b *testutil.Broker) {
		testutil.WaitFor(t, 20*time.Second, func() bool {
			res := newAdmin(t, b).FindTxnCoordinators(ctxT(t, 5*time.Second), "any")
			return res["any"].Err == nil
		}, "the transaction coordinator available")
	}, "transaction.state.log.num.partitions=1")
	p := newTxnProducer(t, b, "full-disk", append([]kgo.Opt{kgo.RecordDeliveryTimeout(3 * time.Second), kgo.RetryTimeout(3 * time.Second)}, opts...)...)
	var committed []string
	inTxn(t, p, true, recordsTo(topic, 0, "c0", "c1")...)
	committed = append(committed, "c0", "c1")
	inTxn(t, p, false, recordsTo(topic, 0, "a0")...)

	ballast := testutil.FillDisk(t, full, 0)
	var failed error
	phase := "produce"
	for i := 0; i < 500 && failed == nil; i++ { // until a transaction meets the full disk
		v := fmt.Sprintf("f%03d", i)
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		phase, failed = "produce", p.ProduceSync(ctxT(t, 20*time.Second), recordsTo(topic, 0, v)...).FirstErr()
		if failed == nil {
			phase, failed = "commit", p.EndTransaction(ctxT(t, 20*time.Second), kgo.TryCommit)
			if failed == nil {
				committed = append(committed, v)
			}
		}
	}
	if failed == nil {
		t.Fatal("transactions on the full disk kept committing")
	}
	// A produce whose partition the coordinator cannot add is NOT_ENOUGH_REPLICAS, which
	// franz-go retries until the record times out.
	var ke *kerr.Error
	if isKerr := errors.As(failed, &ke); isKerr && !ke.Retriable || !isKerr && !errors.Is(failed, kgo.ErrRecordTimeout) {
		t.Fatalf("a transaction's %s on the full disk: %v, want a retriable error", phase, failed)
	}
	t.Logf("a transaction's %s on the full disk: %v", phase, failed)
	if exited, err := b.Exited(); exited {
		t.Fatalf("the broker exited on the full disk: %v\n%s", err, b.Log())
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	var abortErr error
	testutil.WaitFor(t, 30*time.Second, func() bool {
		abortErr = p.EndTransaction(ctxT(t, 10*time.Second), kgo.TryAbort)
		return abortErr == nil || (errors.As(abortErr, &ke) && !ke.Retriable)
	}, "the failed transaction aborted once space is freed")
	if abortErr == nil {
		abortErr = p.BeginTransaction()
	}
	if abortErr != nil {
		// franz-go aborts a transaction whose commit was refused by bumping its epoch
		// (InitProducerID with its producer id and epoch): the coordinator fences the open
		// transaction, and answers the retried bump PRODUCER_FENCED, as Kafka's does (the
		// fence leaves no last epoch to match). The application starts a new producer.
		if !errors.Is(abortErr, kerr.ProducerFenced) {
			t.Fatalf("aborting once space is freed: %v", abortErr)
		}
		t.Logf("aborting once space is freed: %v; a new producer takes over", abortErr)
		p.Close()
		p = newTxnProducer(t, b, "full-disk", opts...)
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.ProduceSync(ctxT(t, 20*time.Second), recordsTo(topic, 0, "after0", "after1")...).FirstErr(); err != nil {
		t.Fatalf("transactional produce once space is freed: %v", err)
	}
	if err := p.EndTransaction(ctxT(t, 20*time.Second), kgo.TryCommit); err != nil {
		t.Fatalf("commit once space is freed: %v", err)
	}
	committed = append(committed, "after0", "after1")
	check := func(when string) {
		t.Helper()
		if got := readAll(t, b, topic, true); !slices.Equal(got, committed) {
			t.Fatalf("read_committed %s: %q, want %q", when, got, committed)
		}
	}
	check("once space is freed")
	p.Close()
	noPanic(t, b)
	b.Restart(t)
	check("after a restart")
	p = newTxnProducer(t, b, "full-disk", opts...)
	inTxn(t, p, true, recordsTo(topic, 0, "restarted")...)
	committed = append(committed, "restarted")
	check("of a transaction after a restart")
}

// TestCoordinatorFullDiskShareState: __share_group_state on a full disk. A share
// consumer's acknowledgement that cannot be persisted is refused with a retriable
// error once the share coordinator gave up (30 s); the record stays acquired by the
// member, neither lost nor accepted; once space is freed the same acknowledgement and
// the others succeed, each record accepted once, and so after a restart.
func TestCoordinatorFullDiskShareState(t *testing.T) {
	t.Parallel()
	const topic, group, member = "sdata", "share-full", "member-0000000000001"
	b, full := startFullDiskCoordinator(t, topic, "__share_group_state", func(b *testutil.Broker) {
		cl := newClient(t, b)
		testutil.WaitFor(t, 20*time.Second, func() bool {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.CoordinatorType, req.CoordinatorKeys = 2, []string{"probe:AAAAAAAAAAAAAAAAAAAAAA:0"}
			resp, err := req.RequestWith(ctxT(t, 5*time.Second), cl)
			return err == nil && len(resp.Coordinators) == 1 && resp.Coordinators[0].ErrorCode == 0
		}, "the share coordinator available")
	}, "share.coordinator.state.topic.num.partitions=1", "offsets.topic.num.partitions=1", "group.initial.rebalance.delay.ms=0",
		// The member sends no heartbeat and holds its records through a refused
		// acknowledgement (30 s).
		"group.share.max.session.timeout.ms=300000", "group.share.session.timeout.ms=120000",
		"group.share.max.record.lock.duration.ms=300000", "group.share.record.lock.duration.ms=120000")
	const n = 300
	produceValues(t, b, topic, "s", n)
	setGroupConfigs(t, b, group, map[string]string{"share.auto.offset.reset": "earliest"})
	// The broker holds a refused acknowledgement for 30 s (shareStoreTimeout) before it
	// answers. franz-go's read deadline for it is RequestTimeoutOverhead (10 s by
	// default), whose expiry closes the connection and with it the share session; and
	// the connection that opened the session must not be reaped as idle meanwhile.
	cl := newClient(t, b, kgo.RequestTimeoutOverhead(45*time.Second), kgo.ConnIdleTimeout(5*time.Minute))
	if err := shareJoin(ctxT(t, 20*time.Second), cl, group, member, topic); err != nil {
		t.Fatal(err)
	}
	s := &rawShareSession{c: cl, group: group, member: member, topicID: topicID(t, cl, topic)}
	accept := func(o int64) int16 { // in a ShareAcknowledge of its own; the partition's error code
		t.Helper()
		code, err := s.acknowledge(ctxT(t, time.Minute), o, o, 1)
		if err != nil {
			t.Fatalf("acknowledging offset %d: %v", o, err)
		}
		return code
	}
	acquired := map[int64]bool{}
	testutil.WaitFor(t, 20*time.Second, func() bool {
		got, err := s.fetch(ctxT(t, 10*time.Second), 200, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range got {
			acquired[o] = true
		}
		return len(acquired) == n
	}, "the member acquired every record")
	if _, err := os.Stat(filepath.Join(full, "__consumer_offsets-0")); err == nil {
		t.Fatal("__consumer_offsets-0 is on the small disk too: this test fills only the share state's")
	}
	if code := accept(0); code != 0 {
		t.Fatalf("accepting offset 0 before the disk filled: %v", kerr.ErrorForCode(code))
	}

	ballast := testutil.FillDisk(t, full, 0)
	refused := int64(-1)
	for o := int64(1); o < n && refused < 0; o++ { // until an acknowledgement meets the full disk
		switch code := accept(o); {
		case code == 0:
		case code == kerr.CoordinatorNotAvailable.Code || code == kerr.NotCoordinator.Code:
			refused = o
		default:
			t.Fatalf("accepting offset %d on the full disk: %v, want COORDINATOR_NOT_AVAILABLE", o, kerr.ErrorForCode(code))
		}
	}
	if refused < 0 {
		t.Fatal("acknowledgements on the full disk kept succeeding")
	}
	if exited, err := b.Exited(); exited {
		t.Fatalf("the broker exited on the full disk: %v\n%s", err, b.Log())
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	// The refused acknowledgement left the record acquired by the member: accepting it
	// again works once (a record accepted or released meanwhile is INVALID_RECORD_STATE).
	if code := accept(refused); code != 0 {
		t.Fatalf("accepting offset %d again once space is freed: %v", refused, kerr.ErrorForCode(code))
	}
	for o := refused + 1; o < n; o++ {
		if code := accept(o); code != 0 {
			t.Fatalf("accepting offset %d once space is freed: %v", o, kerr.ErrorForCode(code))
		}
	}
	startAt := func(when string) {
		t.Helper()
		var start, lag int64
		var err error
		testutil.WaitFor(t, 20*time.Second, func() bool {
			start, lag, err = shareStart(ctxT(t, 10*time.Second), newClient(t, b), group, topic)
			return err == nil
		}, "the share group's offsets "+when)
		if start != n || lag != 0 {
			t.Fatalf("share-partition start %d, lag %d %s; want %d and 0 (every record accepted once)", start, lag, when, n)
		}
	}
	startAt("once space is freed")
	cl.Close()
	noPanic(t, b)
	b.Restart(t)
	startAt("after a restart")
}
