package integration

// Share groups (KIP-932) with franz-go's share consumer (kgo.ShareGroup): several
// consumers split one partition, each record accepted once; a hung consumer's records
// come back once their acquisition locks expire, a killed consumer's (its connections
// closed) at once; rejected records are archived; a record released too often is
// archived at the delivery count limit; the share-partition state survives a broker
// restart.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// alterGroupConfigs sets a group's configs with IncrementalAlterConfigs on its GROUP
// resource and returns the resource's error code and message.
func alterGroupConfigs(t *testing.T, cl *kgo.Client, group string, kvs map[string]string) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for k, v := range kvs {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.Resources[0]
	msg := ""
	if r.ErrorMessage != nil {
		msg = *r.ErrorMessage
	}
	return r.ErrorCode, msg
}

// setGroupConfigs sets a group's configs (IncrementalAlterConfigs on a
// GROUP resource) and waits until DescribeConfigs shows them.
func setGroupConfigs(t *testing.T, b *testutil.Broker, group string, kvs map[string]string) {
	t.Helper()
	cl := newClient(t, b)
	if code, msg := alterGroupConfigs(t, cl, group, kvs); code != 0 {
		t.Fatalf("IncrementalAlterConfigs: %v %s", kerr.ErrorForCode(code), msg)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		d := kmsg.NewPtrDescribeConfigsRequest()
		dr := kmsg.NewDescribeConfigsRequestResource()
		dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		d.Resources = append(d.Resources, dr)
		resp, err := d.RequestWith(ctxT(t, 5*time.Second), cl)
		if err != nil || len(resp.Resources) != 1 {
			return false
		}
		got := map[string]string{}
		for _, c := range resp.Resources[0].Configs {
			if c.Value != nil {
				got[c.Name] = *c.Value
			}
		}
		for k, v := range kvs {
			if got[k] != v {
				return false
			}
		}
		return true
	}, "the group configs to apply")
}

// shareSeen is one record as a share consumer processed it.
type shareSeen struct {
	member     string
	offset     int64
	value      string
	deliveries int32
	ack        kgo.AckStatus
}

type shareLedger struct {
	mu   sync.Mutex
	recs []shareSeen
}

func (l *shareLedger) add(s shareSeen) {
	l.mu.Lock()
	l.recs = append(l.recs, s)
	l.mu.Unlock()
}

func (l *shareLedger) all() []shareSeen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]shareSeen(nil), l.recs...)
}

// accepted counts, per value, the acknowledged-as-accepted deliveries.
func (l *shareLedger) accepted() map[string]int {
	out := map[string]int{}
	for _, s := range l.all() {
		if s.ack == kgo.AckAccept {
			out[s.value]++
		}
	}
	return out
}

// acceptedAll reports whether every one of vals has an accepted delivery.
func (l *shareLedger) acceptedAll(vals []string) bool {
	accepted := l.accepted()
	for _, v := range vals {
		if accepted[v] == 0 {
			return false
		}
	}
	return true
}

// acceptAll, as decide, accepts every record.
func acceptAll(*kgo.Record) kgo.AckStatus { return kgo.AckAccept }

// holdAck, as decide's answer, acknowledges nothing and stops the member polling: it
// holds the records it got until it dies.
const holdAck kgo.AckStatus = 0

func holdRecords(*kgo.Record) kgo.AckStatus { return holdAck }

// shareMember runs a share consumer whose decide picks each record's acknowledgement.
// Acks are flushed after every poll, so an accept is recorded once the broker has it:
// FlushAcks returns nil even when the broker refused them, so the refusals reported to
// the ack callback (before FlushAcks returns) mark the partition's acks of that poll
// as not known to be applied.
func shareMember(t *testing.T, b *testutil.Broker, name, group, topic string, led *shareLedger, decide func(r *kgo.Record) kgo.AckStatus, opts ...kgo.Opt) (*kgo.Client, *killSwitch, func()) {
	t.Helper()
	ks := &killSwitch{}
	var refusedMu sync.Mutex
	refused := map[int32]error{} // since the last flush, by partition
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			refusedMu.Lock()
			defer refusedMu.Unlock()
			for _, r := range rs {
				if r.Err != nil {
					refused[r.Partition] = r.Err
				}
			}
		}),
		kgo.SeedBrokers(b.Addr), kgo.Dialer(ks.DialContext),
		kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(200 * time.Millisecond), kgo.ShareMaxRecords(25),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if fs.IsClientClosed() || ctx.Err() != nil {
				return
			}
			var pending []shareSeen
			var partitionOf []int32
			holding := false
			fs.EachRecord(func(r *kgo.Record) {
				ack := decide(r)
				if ack != holdAck {
					r.Ack(ack)
				}
				holding = holding || ack == holdAck
				pending = append(pending, shareSeen{member: name, offset: r.Offset, value: string(r.Value), deliveries: r.DeliveryCount(), ack: ack})
				partitionOf = append(partitionOf, r.Partition)
			})
			if len(pending) == 0 {
				continue
			}
			// The flush is not cut short by stop: the broker may have applied the
			// acks (and the test seen it) before their response arrives, and the
			// ledger must then say so.
			flushCtx, cancelFlush := context.WithTimeout(context.Background(), 15*time.Second)
			err := cl.FlushAcks(flushCtx)
			cancelFlush()
			refusedMu.Lock()
			for i := range pending {
				if p := partitionOf[i]; err != nil || refused[p] != nil {
					pending[i].ack = 0 // not known to be applied
				}
			}
			if err != nil {
				t.Logf("%s: flushing acks: %v", name, err)
			}
			for p, rerr := range refused {
				t.Logf("%s: acknowledgements of partition %d refused: %v", name, p, rerr)
			}
			clear(refused)
			refusedMu.Unlock()
			for _, s := range pending {
				led.add(s)
			}
			if holding {
				// Never poll again, even when the same poll also had records
				// acknowledged: kgo would accept the held records then.
				<-ctx.Done()
				return
			}
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			cl.Close()
		})
	}
	t.Cleanup(stop)
	return cl, ks, stop
}

func shareStartOffset(t *testing.T, cl *kgo.Client, group, topic string) (start, lag int64) {
	t.Helper()
	start, lag, err := shareStart(ctxT(t, 5*time.Second), cl, group, topic)
	if err != nil {
		return -2, -2
	}
	return start, lag
}

func produceValues(t *testing.T, b *testutil.Broker, topic, prefix string, n int) []string {
	t.Helper()
	c := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	var recs []*kgo.Record
	var vals []string
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("%s-%05d", prefix, i)
		vals = append(vals, v)
		recs = append(recs, kgo.StringRecord(v))
	}
	produceSync(t, c, recs...)
	return vals
}

// TestShareGroupsSplitOnePartition: four share consumers on one partition each get a
// share of its records and every record is accepted exactly once.
func TestShareGroupsSplitOnePartition(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t, "group.share.min.heartbeat.interval.ms=1000", "group.share.heartbeat.interval.ms=1000")
	adm := newAdmin(t, b)
	const topic, group = "share-split", "share-split-g"
	createTopic(t, adm, topic, 1, nil)
	raw := newClient(t, b)
	setGroupConfigs(t, b, group, map[string]string{"share.auto.offset.reset": "earliest"})

	led := &shareLedger{}
	for i := 0; i < 4; i++ {
		shareMember(t, b, fmt.Sprintf("c%d", i), group, topic, led, acceptAll)
	}
	// The four joins are assigned together once the group's assignment interval has
	// passed (KIP-1263): then all four hold the one partition.
	testutil.WaitFor(t, 30*time.Second, func() bool {
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.GroupIDs = []string{group}
		resp, err := req.RequestWith(ctxT(t, 10*time.Second), raw)
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || len(resp.Groups[0].Members) != 4 {
			return false
		}
		for _, m := range resp.Groups[0].Members {
			if len(m.Assignment.TopicPartitions) != 1 || !slices.Equal(m.Assignment.TopicPartitions[0].Partitions, []int32{0}) {
				return false
			}
		}
		return true
	}, "the four members to share the partition")
	var vals []string
	for i := 0; i < 100; i++ { // small batches: a batch is acquired whole
		vals = append(vals, produceValues(t, b, topic, fmt.Sprintf("s%03d", i), 20)...)
	}
	testutil.WaitFor(t, 60*time.Second, func() bool {
		start, lag := shareStartOffset(t, raw, group, topic)
		return len(led.accepted()) == len(vals) && start == int64(len(vals)) && lag == 0
	}, "every record accepted and the share-partition start at the end")

	accepted := led.accepted()
	for _, v := range vals {
		if accepted[v] != 1 {
			t.Fatalf("record %s accepted %d times", v, accepted[v])
		}
	}
	per := map[string]int{}
	for _, s := range led.all() {
		per[s.member]++
		if s.deliveries != 1 {
			t.Fatalf("record %s delivered %d times with no consumer failing", s.value, s.deliveries)
		}
	}
	if len(per) < 2 {
		t.Fatalf("one partition was not shared: records per consumer %v", per)
	}
	t.Logf("records per consumer: %v", per)
}

// TestShareGroupsEveryPartitionGetsItsTurn: one share consumer on two partitions,
// each with far more records than a fetch takes, gets records of both early on: the
// broker starts each fetch of a share session at its next partition, as Kafka
// rotates them, instead of reading the first until it runs dry.
func TestShareGroupsEveryPartitionGetsItsTurn(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t)
	adm := newAdmin(t, b)
	const topic, group, perPartition = "share-turns", "share-turns-g", 1000
	createTopic(t, adm, topic, 2, nil)
	setGroupConfigs(t, b, group, map[string]string{"share.auto.offset.reset": "earliest"})
	prod := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	for p := range int32(2) {
		for i := 0; i < perPartition; i += 20 { // small batches: a batch is acquired whole
			var recs []*kgo.Record
			for j := i; j < i+20; j++ {
				recs = append(recs, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "p%d-%05d", p, j)})
			}
			produceSync(t, prod, recs...)
		}
	}

	led := &shareLedger{}
	shareMember(t, b, "c", group, topic, led, acceptAll)
	testutil.WaitFor(t, 60*time.Second, func() bool { return len(led.accepted()) == 2*perPartition }, "every record accepted")
	// A fetch takes up to 25 records (two batches of 20), and the member acknowledges
	// apart from its fetches (FlushAcks after each poll): the first 200 records span
	// several fetches of each partition.
	per := map[string]int{}
	for _, s := range led.all()[:200] {
		per[s.value[:2]]++
	}
	if per["p0"] == 0 || per["p1"] == 0 {
		t.Fatalf("the first 200 records processed came from one partition only: %v", per)
	}
	t.Logf("first 200 records processed, by partition: %v", per)
}

// TestShareGroupsRedeliveryRejectLimitRestart runs, on one partition: a consumer that
// hangs holding records, its connections open (they come back after the lock expires,
// delivery count 2; TestShareGroupsConnectionClose kills one); rejected records (never
// delivered again); a record released at every delivery (archived at the delivery
// count limit); and a broker restart (what was accepted before it is not delivered
// again, everything else is).
func TestShareGroupsRedeliveryRejectLimitRestart(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t, "group.share.min.heartbeat.interval.ms=1000", "group.share.heartbeat.interval.ms=1000")
	adm := newAdmin(t, b)
	const topic, group = "share-faults", "share-faults-g"
	createTopic(t, adm, topic, 1, nil)
	raw := newClient(t, b)
	setGroupConfigs(t, b, group, map[string]string{
		"share.auto.offset.reset":       "earliest",
		"share.record.lock.duration.ms": "1000",
		"share.delivery.count.limit":    "2",
	})

	// A consumer takes records and hangs without acknowledging them, as a stopped
	// process: its link to the broker passes nothing from then on, its connections
	// stay open.
	first := produceValues(t, b, topic, "a", 100)
	led := &shareLedger{}
	held := &shareLedger{}
	link := testutil.StartProxy(t, b.Addr)
	shareMember(t, b, "doomed", group, topic, held, holdRecords, kgo.Dialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, link.Addr)
	}))
	testutil.WaitFor(t, 30*time.Second, func() bool { return len(held.all()) > 0 }, "the doomed consumer to acquire records")
	link.Blackhole()
	heldVals := map[string]bool{}
	for _, s := range held.all() {
		heldVals[s.value] = true
	}

	// Phase 2: reject every record whose number ends in 3, release a-00007 every
	// time, accept the rest.
	decide := func(r *kgo.Record) kgo.AckStatus {
		v := string(r.Value)
		switch {
		case v == "a-00007":
			return kgo.AckRelease
		case strings.HasSuffix(v, "3"):
			return kgo.AckReject
		}
		return kgo.AckAccept
	}
	_, _, stopSurvivor := shareMember(t, b, "survivor", group, topic, led, decide)
	testutil.WaitFor(t, 60*time.Second, func() bool {
		start, lag := shareStartOffset(t, raw, group, topic)
		return start == int64(len(first)) && lag == 0
	}, "the first 100 records to be done")
	stopSurvivor()
	link.Cut() // the doomed consumer dies: its client closes at once when the test ends

	deliveries := map[string][]int32{}
	for _, s := range led.all() {
		deliveries[s.value] = append(deliveries[s.value], s.deliveries)
	}
	accepted := led.accepted()
	for _, v := range first {
		switch {
		case v == "a-00007":
			if n := len(deliveries[v]); n > 2 || n == 0 {
				t.Fatalf("%s delivered %d times to the survivor with a delivery count limit of 2 (%v)", v, n, deliveries[v])
			}
		case strings.HasSuffix(v, "3"):
			if len(deliveries[v]) != 1 {
				t.Fatalf("rejected %s delivered %d times: %v", v, len(deliveries[v]), deliveries[v])
			}
		default:
			if accepted[v] != 1 {
				t.Fatalf("%s accepted %d times (deliveries %v; survivor saw %d records, doomed held %d)", v, accepted[v], deliveries[v], len(led.all()), len(held.all()))
			}
		}
		if heldVals[v] && v != "a-00007" && (len(deliveries[v]) != 1 || deliveries[v][0] != 2) {
			t.Fatalf("%s, held by the killed consumer, came back with deliveries %v (want one, count 2)", v, deliveries[v])
		}
	}

	// Phase 3: accept half of the next records, hold some more, restart the broker:
	// a new consumer gets exactly the other half.
	second := produceValues(t, b, topic, "b", 60)
	half := &shareLedger{}
	_, halfKill, _ := shareMember(t, b, "half", group, topic, half, acceptFirst(30), kgo.ShareMaxRecords(10), kgo.ShareMaxRecordsStrict())
	testutil.WaitFor(t, 30*time.Second, func() bool { return len(half.accepted()) >= 30 }, "30 records accepted before the restart")
	halfKill.Kill() // it holds what it acquired after those 30
	b.Restart(t)

	after := &shareLedger{}
	_, _, stopAfter := shareMember(t, b, "after", group, topic, after, acceptAll)
	raw = newClient(t, b)
	testutil.WaitFor(t, 60*time.Second, func() bool {
		start, lag := shareStartOffset(t, raw, group, topic)
		return start == int64(len(first)+len(second)) && lag == 0
	}, "the rest to be accepted after the restart")
	stopAfter() // its last acks may be applied before their response is in its ledger
	before := half.accepted()
	got := after.accepted()
	for _, v := range second {
		if before[v]+got[v] != 1 {
			t.Fatalf("%s accepted %d times before the restart and %d after", v, before[v], got[v])
		}
	}
	for _, v := range first {
		if got[v] > 0 {
			t.Fatalf("%s, done before the restart, delivered again", v)
		}
	}
}

// TestShareGroupsConnectionClose: a share consumer whose connections close while it
// holds records (its process died) gives them back at once, as Kafka does since
// KAFKA-19015 — long before their acquisition locks would expire — with their delivery
// count lowered, so another consumer gets them as first deliveries. A consumer whose
// connections are cut dials again, opens a new share session and goes on.
func TestShareGroupsConnectionClose(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t, "group.share.min.heartbeat.interval.ms=1000", "group.share.heartbeat.interval.ms=1000")
	adm := newAdmin(t, b)
	const topic, group = "share-close", "share-close-g"
	createTopic(t, adm, topic, 1, nil)
	raw := newClient(t, b)
	setGroupConfigs(t, b, group, map[string]string{
		"share.auto.offset.reset":       "earliest",
		"share.record.lock.duration.ms": "60000", // the most group.share.max.record.lock.duration.ms allows
	})
	first := produceValues(t, b, topic, "c", 50)

	held := &shareLedger{}
	_, doomed, _ := shareMember(t, b, "doomed", group, topic, held, holdRecords)
	testutil.WaitFor(t, 30*time.Second, func() bool { return len(held.all()) > 0 }, "the doomed consumer to acquire records")
	doomed.Kill()

	led := &shareLedger{}
	_, survivor, stopSurvivor := shareMember(t, b, "survivor", group, topic, led, acceptAll)
	done := func(n int) func() bool {
		return func() bool {
			start, lag := shareStartOffset(t, raw, group, topic)
			return start == int64(n) && lag == 0
		}
	}
	testutil.WaitFor(t, 20*time.Second, done(len(first)), "the records the killed consumer held, and the rest, to be accepted well before their locks expire")
	// The broker applies an acknowledgement before its answer reaches the survivor,
	// which records it in its ledger once FlushAcks returns.
	testutil.WaitFor(t, 20*time.Second, func() bool { return led.acceptedAll(first) },
		"the survivor's ledger to hold the accepts the broker applied")
	deliveries := map[string][]int32{}
	for _, s := range led.all() {
		deliveries[s.value] = append(deliveries[s.value], s.deliveries)
	}
	for _, s := range held.all() {
		if d := deliveries[s.value]; len(d) != 1 || d[0] != 1 {
			t.Fatalf("%s, held by the killed consumer, came back with deliveries %v (want one, count 1)", s.value, d)
		}
	}

	// The survivor's connections are cut while it waits for records: it dials again.
	survivor.Cut()
	second := produceValues(t, b, topic, "d", 50)
	testutil.WaitFor(t, 30*time.Second, done(len(first)+len(second)), "the records produced after the cut to be accepted")
	stopSurvivor() // its last acks may be applied before their answer is in its ledger
	accepted := led.accepted()
	for _, v := range append(first, second...) {
		if accepted[v] != 1 {
			t.Fatalf("%s accepted %d times", v, accepted[v])
		}
	}
}

// TestShareGroupsReadCommitted: a share group with share.isolation.level=read_committed
// gets the records of committed transactions only, and those of an open transaction
// (and what follows it) once it commits; the records of an aborted transaction are
// archived and its share-partition start moves past them. A read_uncommitted group on
// the same partition gets everything.
func TestShareGroupsReadCommitted(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t, "group.share.min.heartbeat.interval.ms=1000", "group.share.heartbeat.interval.ms=1000")
	const topic, committed, uncommitted = "share-rc", "share-rc-g", "share-ru-g"
	createTopic(t, newAdmin(t, b), topic, 1, nil)
	raw := newClient(t, b)
	setGroupConfigs(t, b, committed, map[string]string{"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"})
	setGroupConfigs(t, b, uncommitted, map[string]string{"share.auto.offset.reset": "earliest"})

	p := newTxnProducer(t, b, "share-rc-producer")
	inTxn(t, p, true, recordsTo(topic, 0, "c1", "c2")...)  // offsets 0–1, marker 2
	inTxn(t, p, false, recordsTo(topic, 0, "a1", "a2")...) // offsets 3–4, marker 5
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctxT(t, 10*time.Second), recordsTo(topic, 0, "o1")...).FirstErr(); err != nil {
		t.Fatal(err) // offset 6, open
	}
	plain := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceSync(t, plain, recordsTo(topic, 0, "n1")...) // offset 7, after the open transaction

	rc, ru := &shareLedger{}, &shareLedger{}
	shareMember(t, b, "rc", committed, topic, rc, acceptAll)
	shareMember(t, b, "ru", uncommitted, topic, ru, acceptAll)
	testutil.WaitFor(t, 30*time.Second, func() bool {
		start, _ := shareStartOffset(t, raw, committed, topic)
		return len(rc.accepted()) == 2 && start == 6
	}, "read_committed: the committed records accepted, the start at the open transaction")
	if got := rc.accepted(); got["c1"] != 1 || got["c2"] != 1 {
		t.Fatalf("read_committed before the commit: %v", got)
	}
	testutil.WaitFor(t, 30*time.Second, func() bool { return len(ru.accepted()) == 6 }, "read_uncommitted: every record")

	if err := p.EndTransaction(ctxT(t, 10*time.Second), kgo.TryCommit); err != nil {
		t.Fatal(err) // marker 8
	}
	testutil.WaitFor(t, 30*time.Second, func() bool {
		start, lag := shareStartOffset(t, raw, committed, topic)
		return len(rc.accepted()) == 4 && start == 9 && lag == 0
	}, "read_committed: the records of the committed transaction and after it, the start at the end")
	got := rc.accepted()
	for _, v := range []string{"c1", "c2", "o1", "n1"} {
		if got[v] != 1 {
			t.Fatalf("read_committed: %s accepted %d times (%v)", v, got[v], got)
		}
	}
	for _, s := range rc.all() {
		if s.value == "a1" || s.value == "a2" {
			t.Fatalf("read_committed delivered %s of the aborted transaction", s.value)
		}
	}
}

// TestShareGroupsLeaveAndJoin: a share consumer accepts some records and leaves the
// group (Close) while it holds others; once it is gone the group has no share session
// on the broker, which drops its share partition from memory. A consumer that joins
// then gets exactly the records not yet accepted — the ones the first held and the
// ones it never got — and none it accepted.
func TestShareGroupsLeaveAndJoin(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t, "group.share.min.heartbeat.interval.ms=1000", "group.share.heartbeat.interval.ms=1000")
	const topic, group = "share-leave", "share-leave-g"
	createTopic(t, newAdmin(t, b), topic, 1, nil)
	raw := newClient(t, b)
	setGroupConfigs(t, b, group, map[string]string{
		"share.auto.offset.reset":       "earliest",
		"share.record.lock.duration.ms": "60000", // records come back by the leave, not by a lock expiring
	})
	vals := produceValues(t, b, topic, "l", 60)

	first := &shareLedger{}
	_, _, stopFirst := shareMember(t, b, "first", group, topic, first, acceptFirst(25), kgo.ShareMaxRecords(10), kgo.ShareMaxRecordsStrict())
	testutil.WaitFor(t, 30*time.Second, func() bool {
		held := false
		for _, s := range first.all() {
			held = held || s.ack == holdAck
		}
		return len(first.accepted()) == 25 && held
	}, "the first consumer to accept 25 records and hold more")
	stopFirst() // leaves the group, closes its share sessions and connections

	second := &shareLedger{}
	_, _, stopSecond := shareMember(t, b, "second", group, topic, second, acceptAll)
	testutil.WaitFor(t, 60*time.Second, func() bool {
		start, lag := shareStartOffset(t, raw, group, topic)
		return start == int64(len(vals)) && lag == 0
	}, "every record to be accepted after the first consumer left")
	stopSecond() // its last acks may be applied before their answer is in its ledger

	before, after := first.accepted(), second.accepted()
	for _, s := range second.all() {
		if before[s.value] > 0 {
			t.Fatalf("%s, accepted by the consumer that left, delivered again (delivery %d)", s.value, s.deliveries)
		}
	}
	for _, v := range vals {
		if before[v]+after[v] != 1 {
			t.Fatalf("%s accepted %d times by the consumer that left and %d by the one that joined", v, before[v], after[v])
		}
	}
}

// acceptFirst returns a share consumer's acknowledgement that accepts the first n
// records it is given and holds every later one (holdAck).
func acceptFirst(n int) func(*kgo.Record) kgo.AckStatus {
	var mu sync.Mutex
	taken := 0
	return func(*kgo.Record) kgo.AckStatus {
		mu.Lock()
		defer mu.Unlock()
		if taken < n {
			taken++
			return kgo.AckAccept
		}
		return holdAck
	}
}

// TestShareGroupsNewPartitionsFromStart: with share.auto.offset.reset at its default
// (latest), the partitions a topic gains after a share group first consumed it are
// read from offset 0, as in Kafka 4.1 — records written to them before the group's
// first fetch of them are delivered, not skipped — both when the partitions are added
// while the group is empty and while a member consumes. The topic's first partition
// follows the reset: what was written before the group existed is not delivered.
func TestShareGroupsNewPartitionsFromStart(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t, "group.share.min.heartbeat.interval.ms=1000", "group.share.heartbeat.interval.ms=1000")
	adm := newAdmin(t, b)
	const topic, group = "share-grow", "share-grow-g"
	createTopic(t, adm, topic, 1, nil)
	before := produceValues(t, b, topic, "before", 5)
	led := &shareLedger{}

	// The member joins; records count from its first fetch (latest).
	_, _, stop := shareMember(t, b, "first", group, topic, led, acceptAll)
	var warm []string
	testutil.WaitFor(t, 60*time.Second, func() bool {
		warm = append(warm, produceValues(t, b, topic, fmt.Sprintf("warm%03d", len(warm)), 1)...)
		return len(led.accepted()) > 0
	}, "the member to accept a record produced after it joined")
	stop() // leaves: the group is empty

	// Partitions added while the group is empty, and records on every partition.
	grow := func(to int) *kgo.Client {
		t.Helper()
		ctx := ctxT(t, 10*time.Second)
		td, err := adm.ListTopics(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := adm.CreatePartitions(ctx, to-len(td[topic].Partitions), topic); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, 10*time.Second, func() bool {
			td, err := adm.ListTopics(ctxT(t, 5*time.Second), topic)
			return err == nil && len(td[topic].Partitions) == to
		}, "the topic's new partitions")
		return newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	}
	produceTo := func(cl *kgo.Client, partition int32, prefix string, n int) []string {
		t.Helper()
		var recs []*kgo.Record
		var vals []string
		for i := range n {
			v := fmt.Sprintf("%s-p%d-%03d", prefix, partition, i)
			vals = append(vals, v)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: partition, Value: []byte(v)})
		}
		produceSync(t, cl, recs...)
		return vals
	}
	p := grow(3)
	var want []string
	for part := range int32(3) {
		want = append(want, produceTo(p, part, "away", 20)...)
	}

	_, _, stop = shareMember(t, b, "second", group, topic, led, acceptAll)
	defer stop()
	waitAccepted := func(vals []string, what string) {
		t.Helper()
		testutil.WaitFor(t, 60*time.Second, func() bool { return led.acceptedAll(vals) }, what)
	}
	waitAccepted(want, "the records produced while the group was empty, on the old and the new partitions")

	// A partition added while the member consumes: records written to it at once.
	p = grow(4)
	live := produceTo(p, 3, "live", 20)
	waitAccepted(live, "the records of the partition added while the member consumed")

	got := led.accepted()
	for _, v := range append(append(want, live...), warm[len(warm)-1]) {
		if got[v] != 1 {
			t.Fatalf("%s accepted %d times, want once", v, got[v])
		}
	}
	for _, v := range before {
		if got[v] != 0 {
			t.Fatalf("%s, written before the group existed, was delivered under share.auto.offset.reset=latest", v)
		}
	}
}

// TestShareGroupsSessionStorm: raw clients misuse a share group for a few seconds —
// five connections acting as three member ids, so that each member's share session
// is opened, advanced, closed and replaced from several connections at once, with
// heartbeats, leaves, and acknowledgements of every kind for records that may no
// longer be theirs. Each answer is one Kafka gives such a client (the session or
// member epoch refused, the member unknown), and afterwards a well-behaved consumer
// of the group finishes the partition: no record is left acquired or lost, and the
// share-partition start offset reaches the end.
func TestShareGroupsSessionStorm(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t, "group.share.record.lock.duration.ms=1000",
		"group.share.min.session.timeout.ms=1000", "group.share.session.timeout.ms=2000",
		"group.share.min.heartbeat.interval.ms=200", "group.share.heartbeat.interval.ms=200")
	const topic, group = "share-storm", "share-storm-g"
	createTopic(t, newAdmin(t, b), topic, 1, nil)
	setGroupConfigs(t, b, group, map[string]string{"share.auto.offset.reset": "earliest"})
	vals := produceValues(t, b, topic, "storm", 3000)
	raw := newClient(t, b)
	storm := shareStorm{group: group, topic: topic, topicID: topicID(t, raw, topic), answers: map[string]int{}}
	// The group's coordinator is ready once a member can join.
	testutil.WaitFor(t, 30*time.Second, func() bool {
		return storm.heartbeat(raw, "ready-member-0000000000", 0) == 0
	}, "a share group member joining")

	deadline := time.Now().Add(8 * time.Second)
	var wg sync.WaitGroup
	for range 5 {
		c := newClient(t, b)
		wg.Go(func() { storm.run(c, deadline) })
	}
	wg.Wait()
	allowed := map[string]bool{"heartbeat NONE": true, "heartbeat UNKNOWN_MEMBER_ID": true, "heartbeat FENCED_MEMBER_EPOCH": true}
	for _, api := range []string{"fetch", "acknowledge"} {
		for _, code := range []string{"NONE", "SHARE_SESSION_NOT_FOUND", "INVALID_SHARE_SESSION_EPOCH"} {
			allowed[api+" "+code] = true
		}
	}
	for answer := range storm.answers {
		if !allowed[answer] {
			t.Errorf("unexpected answer %s", answer)
		}
	}
	t.Logf("answers: %v", storm.answers)

	shareMember(t, b, "final", group, topic, &shareLedger{}, acceptAll)
	testutil.WaitFor(t, 60*time.Second, func() bool {
		start, lag := shareStartOffset(t, raw, group, topic)
		return start == int64(len(vals)) && lag == 0
	}, "the share-partition start offset reaching the end")
}

// shareStorm drives TestShareGroupsSessionStorm's raw clients.
type shareStorm struct {
	group, topic string
	topicID      [16]byte
	mu           sync.Mutex
	answers      map[string]int // "api ERROR_NAME" -> how often
}

func (s *shareStorm) answered(api string, code int16) {
	name := "NONE"
	if code != 0 {
		name = kerr.ErrorForCode(code).(*kerr.Error).Message
	}
	s.mu.Lock()
	s.answers[api+" "+name]++
	s.mu.Unlock()
}

// heartbeat sends a ShareGroupHeartbeat of member at epoch and returns its error code
// (-1: no answer).
func (s *shareStorm) heartbeat(c *kgo.Client, member string, epoch int32) int16 {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch = s.group, member, epoch
	req.SubscribedTopicNames = []string{s.topic}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, c)
	if err != nil {
		return -1
	}
	return resp.ErrorCode
}

// run acts as random members on c until deadline.
func (s *shareStorm) run(c *kgo.Client, deadline time.Time) {
	members := []string{"storm-member-a-00000000", "storm-member-b-00000000", "storm-member-c-00000000"}
	memberEpoch := map[string]int32{}
	sessionEpoch := map[string]int32{}
	var held [][2]int64 // acquired ranges, whoever holds them now
	ackBatch := func() (first, last int64, ok bool) {
		if len(held) == 0 {
			return 0, 0, false
		}
		r := held[0]
		held = held[1:]
		return r[0], r[1], true
	}
	for time.Now().Before(deadline) {
		m := members[rand.IntN(len(members))]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		switch op := rand.IntN(6); {
		case op == 0: // heartbeat, now and then a leave
			epoch := memberEpoch[m]
			if rand.IntN(6) == 0 {
				epoch = -1
			}
			req := kmsg.NewPtrShareGroupHeartbeatRequest()
			req.GroupID, req.MemberID, req.MemberEpoch = s.group, m, epoch
			req.SubscribedTopicNames = []string{s.topic}
			if resp, err := req.RequestWith(ctx, c); err == nil {
				s.answered("heartbeat", resp.ErrorCode)
				memberEpoch[m] = 0
				if resp.ErrorCode == 0 && epoch >= 0 {
					memberEpoch[m] = resp.MemberEpoch
				}
			}
		case op <= 3: // fetch, acknowledging what this connection last got; now and then closing the session
			epoch := sessionEpoch[m]
			if rand.IntN(8) == 0 {
				epoch = -1
			}
			req := kmsg.NewPtrShareFetchRequest()
			req.GroupID, req.MemberID, req.ShareSessionEpoch = &s.group, &m, epoch
			req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = 100, 1, 1<<20, 100, 100
			rt := kmsg.NewShareFetchRequestTopic()
			rt.TopicID = s.topicID
			rp := kmsg.NewShareFetchRequestTopicPartition()
			for rand.IntN(2) == 0 {
				first, last, ok := ackBatch()
				if !ok {
					break
				}
				ab := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
				ab.FirstOffset, ab.LastOffset = first, last
				ab.AcknowledgeTypes = []int8{int8(1 + rand.IntN(3))} // accept, release, reject
				rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
			}
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			if resp, err := req.RequestWith(ctx, c); err == nil {
				s.answered("fetch", resp.ErrorCode)
				sessionEpoch[m] = 0
				if resp.ErrorCode == 0 && epoch >= 0 {
					sessionEpoch[m] = epoch + 1
					for _, tp := range resp.Topics {
						for _, p := range tp.Partitions {
							for _, a := range p.AcquiredRecords {
								held = append(held, [2]int64{a.FirstOffset, a.LastOffset})
							}
						}
					}
				}
			}
		default: // acknowledge, renewals included
			req := kmsg.NewPtrShareAcknowledgeRequest()
			req.GroupID, req.MemberID, req.ShareSessionEpoch = &s.group, &m, sessionEpoch[m]
			rt := kmsg.NewShareAcknowledgeRequestTopic()
			rt.TopicID = s.topicID
			rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
			if first, last, ok := ackBatch(); ok {
				ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
				ab.FirstOffset, ab.LastOffset = first, last
				ab.AcknowledgeTypes = []int8{int8(1 + rand.IntN(4))} // accept, release, reject, renew
				rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
				req.IsRenewAck = ab.AcknowledgeTypes[0] == 4 // as clients send a renewal (KIP-1222)
			}
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			if resp, err := req.RequestWith(ctx, c); err == nil {
				s.answered("acknowledge", resp.ErrorCode)
				if resp.ErrorCode == 0 && sessionEpoch[m] > 0 {
					sessionEpoch[m]++
				}
			}
		}
		cancel()
	}
}
