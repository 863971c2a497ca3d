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
	"strings"
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
	return startFullDiskCoordinatorN(t, topic, 1, internalTopic, ensure, overrides...)
}

// startFullDiskCoordinatorN is startFullDiskCoordinator with a topic of partitions
// partitions, all in the healthy directory. Past one, placement by partition count
// would put every other one on the tmpfs: their directories are made in the healthy
// directory first, and a partition whose directory exists stays where it is.
func startFullDiskCoordinatorN(t *testing.T, topic string, partitions int32, internalTopic string, ensure func(*testutil.Broker), overrides ...string) (*testutil.Broker, string) {
	t.Helper()
	full := testutil.SmallDisk(t, "4m")
	healthy := t.TempDir()
	b := testutil.StartBroker(t, append([]string{"log.dirs=" + healthy + "," + full}, overrides...)...)
	for p := int32(0); p < partitions && partitions > 1; p++ {
		if err := os.Mkdir(filepath.Join(healthy, fmt.Sprintf("%s-%d", topic, p)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	createTopicOrFail(t, newAdmin(t, b), topic, partitions, nil)
	for p := int32(0); p < partitions; p++ {
		dir := fmt.Sprintf("%s-%d", topic, p)
		testutil.WaitFor(t, 10*time.Second, func() bool {
			_, err := os.Stat(filepath.Join(healthy, dir, "00000000000000000000.log"))
			return err == nil
		}, dir+" opened in the healthy log directory")
		if _, err := os.Stat(filepath.Join(full, dir)); err == nil {
			t.Fatalf("%s is on the small disk", dir)
		}
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
	if refused != kerr.NotCoordinator.Code { // Kafka's answer for a KAFKA_STORAGE_ERROR of its log
		t.Fatalf("the commit that met the full disk: %v, want NOT_COORDINATOR", kerr.ErrorForCode(refused))
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
			t.Fatalf("accepting offset %d on the full disk: %v, want NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE", o, kerr.ErrorForCode(code))
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

// committer is a client for commitRaw: OffsetCommit without topic ids (v9).
func committer(t *testing.T, b *testutil.Broker) *kgo.Client {
	return newClient(t, b, kgo.MaxVersions(func() *kversion.Versions {
		v := kversion.Stable()
		v.SetMaxKeyVersion(8, 9)
		return v
	}()))
}

// commitUntilRefused commits offsets of group "filler" through raw until the
// coordinator refuses one (the full disk's last page used up), and fails if it never
// does or refuses with anything but a retriable coordinator error.
func commitUntilRefused(t *testing.T, raw *kgo.Client, topic string) {
	t.Helper()
	for next := int64(0); next < 2000; next++ {
		switch code := commitRaw(t, raw, "filler", "", -1, topic, next); {
		case code == 0:
		case isCoordinatorRetriable(code):
			return
		default:
			t.Fatalf("commit %d on the full disk: %v, want NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE", next, kerr.ErrorForCode(code))
		}
	}
	t.Fatal("commits on the full disk kept succeeding")
}

// TestCoordinatorFullDiskMigration: a classic group's upgrade to the consumer protocol
// (groups_migration_test.go) meets a full __consumer_offsets disk. Two classic franz-go
// members (cooperative-sticky) share six partitions; a franz-go member on the KIP-848
// path joins while the disk is full: the conversion's records cannot be written, so the
// group stays the classic group it was (Stable, same members, same generation), its
// members keep consuming (their commits refused with a retriable coordinator error) and
// the joining member gets no partition. Once space is freed the upgrade completes on
// its own (the client retries): three members, two classic and one consumer, each
// partition owned once. After a restart the mixed group is there again with the same
// members. Then the downgrade meets a full disk: the consumer member leaves, and the
// records that would turn the group back into a classic one cannot be written, so it
// stays the mixed group (the member's leave is refused with a retriable error, the
// coordinator loads its partition again, and the client sends the leave again); once
// space is freed the classic group of the two classic members is back. Every record is processed, the committed offsets reach the end offsets, and
// no partition was ever owned by two members (the members' rebalance callbacks).
func TestCoordinatorFullDiskMigration(t *testing.T) {
	t.Parallel()
	const topic, group, partitions = "mdata", "migrate-full", 6
	b, full := startFullDiskCoordinatorN(t, topic, partitions, "__consumer_offsets", func(b *testutil.Broker) {
		testutil.WaitFor(t, 20*time.Second, func() bool {
			res := newAdmin(t, b).FindGroupCoordinators(ctxT(t, 5*time.Second), "any")
			return res["any"].Err == nil
		}, "the group coordinator available")
	}, "offsets.topic.num.partitions=1", "group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=100",
		"group.consumer.min.session.timeout.ms=500", "group.consumer.session.timeout.ms=6000",
		"group.consumer.min.heartbeat.interval.ms=50", "group.consumer.heartbeat.interval.ms=200")
	adm := newAdmin(t, b)
	produced := []map[int32][]string{produceSpread(t, b, topic, "a", partitions, 20)}
	led := newLedger(t)
	hooks := &ownership{}
	// A commit refused by the full disk fails after 2 s rather than the default 30 s
	// of retries, so that the member polls on meanwhile.
	commitRetry := kgo.RetryTimeoutFn(func(key int16) time.Duration {
		if key == 8 { // OffsetCommit
			return 2 * time.Second
		}
		return 30 * time.Second
	})
	classic := func(name string) *kgoMember {
		return newKgoMember(t, b, name, group, topic, hooks, kgo.DisableAutoCommit(), commitRetry,
			kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(100*time.Millisecond)).
			run(commitLoop(t, name, led, 20))
	}
	c0, c1 := classic("c0"), classic("c1")
	before := waitGroup(t, adm, group, topic, 30*time.Second, "2 classic members on 6 partitions", func(v groupView) bool { return v.balanced(2, partitions) })
	testutil.WaitFor(t, 30*time.Second, func() bool { return led.distinct() == 120 }, "the classic group to process the first 120 records")
	waitDrained(t, adm, group, topic, 30*time.Second)
	generations := map[string]int32{c0.name: c0.generation(), c1.name: c1.generation()}

	// Fill the disk, then write offsets of another group until one is refused: what the
	// segment's last page could still take is used up.
	ballast := testutil.FillDisk(t, full, 0)
	raw := committer(t, b)
	commitUntilRefused(t, raw, topic)

	// The upgrade is tried, and fails; the joining member tries again and again.
	n0 := new848Member(t, b, "n0", group, topic, hooks, commitRetry).run(commitLoop(t, "n0", led, 20))
	const attempt = "classic group with members becomes a consumer group"
	testutil.WaitFor(t, 30*time.Second, func() bool { return strings.Contains(b.Log(), attempt) }, "an attempt to convert the group")
	produced = append(produced, produceSpread(t, b, topic, "b", partitions, 20))
	testutil.WaitFor(t, 30*time.Second, func() bool { return led.distinct() == 240 }, "the classic members to process 240 records on the full disk")
	// A classic member's commit is refused with an error clients retry (the coordinator
	// may be reloading its partition after the last failed upgrade).
	retrying := func(code int16) bool {
		return isCoordinatorRetriable(code) || code == kerr.CoordinatorLoadInProgress.Code
	}
	if code := commitRaw(t, raw, group, c0.memberID(), c0.generation(), topic, 20); !retrying(code) {
		t.Fatalf("a classic member's commit on the full disk: %v, want a retriable coordinator error", kerr.ErrorForCode(code))
	}
	during := waitGroup(t, adm, group, topic, 30*time.Second, "the classic group, 2 members on 6 partitions, on the full disk", func(v groupView) bool { return v.balanced(2, partitions) })
	if fmt.Sprint(during.Members) != fmt.Sprint(before.Members) {
		t.Fatalf("the classic group changed on the full disk: %v, was %v", during, before)
	}
	for _, m := range []*kgoMember{c0, c1} {
		if got := m.generation(); got != generations[m.name] {
			t.Fatalf("%s went from generation %d to %d on the full disk", m.name, generations[m.name], got)
		}
	}
	if got := n0.ownedSorted(); len(got) > 0 {
		t.Fatalf("the joining member got partitions %v though the upgrade could not be written", got)
	}
	if n := strings.Count(b.Log(), attempt); n < 2 {
		t.Fatalf("the joining member tried the upgrade %d times while the disk was full, want it retried", n)
	}
	if strings.Count(b.Log(), "loaded group coordinator partition") < 2 {
		t.Fatalf("no failed write made the coordinator load its partition again:\n%s", b.Log())
	}
	if exited, err := b.Exited(); exited {
		t.Fatalf("the broker exited on the full disk: %v\n%s", err, b.Log())
	}
	noPanic(t, b)

	// Space freed: the joining member's retries convert the group.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	v := wait848(t, adm, group, topic, 60*time.Second, "2 classic members and a consumer member on 6 partitions", func(v view848) bool { return v.balanced(3, partitions) })
	want := map[string]int8{c0.memberID(): 0, c1.memberID(): 0, n0.memberID(): 1}
	if types := memberTypes(t, b, group); fmt.Sprint(types) != fmt.Sprint(want) {
		t.Fatalf("member types after the upgrade: %v, want %v (0 classic, 1 consumer); group %v", types, want, v)
	}
	produced = append(produced, produceSpread(t, b, topic, "c", partitions, 20))
	testutil.WaitFor(t, 30*time.Second, func() bool { return led.distinct() == 360 }, "the mixed group to process 360 records")
	noPanic(t, b)

	// After a restart the mixed group is loaded from the log with the same members.
	b.Restart(t)
	adm = newAdmin(t, b)
	v = wait848(t, adm, group, topic, 60*time.Second, "the mixed group back after a restart", func(v view848) bool { return v.balanced(3, partitions) })
	if types := memberTypes(t, b, group); fmt.Sprint(types) != fmt.Sprint(want) {
		t.Fatalf("member types after a restart: %v, want %v; group %v", types, want, v)
	}
	produced = append(produced, produceSpread(t, b, topic, "d", partitions, 20))
	testutil.WaitFor(t, 30*time.Second, func() bool { return led.distinct() == 480 }, "the mixed group to process 480 records")
	waitDrained(t, adm, group, topic, 30*time.Second)

	// The downgrade on a full disk: n0 leaves; the group cannot go back to the classic
	// protocol while nothing can be written.
	ballast = testutil.FillDisk(t, full, 0)
	raw = committer(t, b)
	commitUntilRefused(t, raw, topic)
	const downgrade = "consumer group goes back to the classic protocol"
	tried := strings.Count(b.Log(), downgrade)
	n0.close()
	hooks.releaseAll("n0")
	testutil.WaitFor(t, 60*time.Second, func() bool { return strings.Count(b.Log(), downgrade) >= tried+2 },
		"two attempts to turn the group back into a classic one on the full disk")
	// Described between two of the coordinator's reloads of its partition.
	testutil.WaitFor(t, 30*time.Second, func() bool {
		types, err := tryMemberTypes(b, group)
		_, c0ok := types[c0.memberID()]
		_, c1ok := types[c1.memberID()]
		return err == nil && c0ok && c1ok && types[c0.memberID()] == 0 && types[c1.memberID()] == 0
	}, "the mixed group still there on the full disk, c0 and c1 classic members of it")
	if exited, err := b.Exited(); exited {
		t.Fatalf("the broker exited on the full disk: %v\n%s", err, b.Log())
	}
	noPanic(t, b)

	// Space freed: the classic group of c0 and c1 is back.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	waitGroup(t, adm, group, topic, 60*time.Second, "the classic group back, c0 and c1 on 6 partitions", func(v groupView) bool {
		return v.balanced(2, partitions) && len(v.Members[c0.memberID()]) > 0 && len(v.Members[c1.memberID()]) > 0
	})
	produced = append(produced, produceSpread(t, b, topic, "e", partitions, 20))
	all := mergeProduced(produced)
	testutil.WaitFor(t, 30*time.Second, func() bool { return led.distinct() == 600 }, "the group to process all 600 records")
	waitDrained(t, adm, group, topic, 30*time.Second)
	for _, m := range []*kgoMember{c0, c1} {
		m.close()
	}
	noPanic(t, b)
	hooks.check(t)
	// A record processed while commits were refused is processed again by the member
	// that takes its partition over in the upgrade.
	uncommitted := map[string]bool{}
	for _, vs := range produced[1] {
		for _, v := range vs {
			uncommitted[v] = true
		}
	}
	checkAll(t, all, led.all(), uncommitted)
}
