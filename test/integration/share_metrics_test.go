package integration

// Share-group metrics (KIP-932, KIP-1103) on a real broker, driven by raw ShareFetch
// and ShareAcknowledge requests and by franz-go's share consumer.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// rawKafkaConn sends requests on one TCP connection of its own, pipelined: the
// broker handles a connection's requests in the order they come (it reads the next
// once the handler of the previous one returned) and answers them in that order.
type rawKafkaConn struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
	corr int32
}

func dialRaw(t *testing.T, b *testutil.Broker) *rawKafkaConn {
	t.Helper()
	conn, err := net.Dial("tcp", b.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawKafkaConn{t: t, conn: conn, r: bufio.NewReader(conn)}
}

// send writes req (at the version it has set) without waiting for its answer.
func (c *rawKafkaConn) send(req kmsg.Request) {
	c.t.Helper()
	c.corr++
	if _, err := c.conn.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, c.corr)); err != nil {
		c.t.Fatal(err)
	}
}

// read reads the next answer into resp (of the request's version), within 20 s.
func (c *rawKafkaConn) read(resp kmsg.Response) {
	c.t.Helper()
	if err := c.conn.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		c.t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		c.t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.r, body); err != nil {
		c.t.Fatal(err)
	}
	body = body[4:] // correlation id
	if resp.IsFlexible() {
		tags, n := binary.Uvarint(body)
		if n <= 0 || tags != 0 {
			c.t.Fatalf("response header tags: %d (%d bytes)", tags, n)
		}
		body = body[n:]
	}
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatal(err)
	}
}

// shareFetchRequest is a ShareFetch (v2, record limit) of partition 0 of topicID.
func shareFetchRequest(group, member string, topicID [16]byte, epoch, maxWaitMillis, maxRecords int32) *kmsg.ShareFetchRequest {
	req := kmsg.NewPtrShareFetchRequest()
	req.SetVersion(2)
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &group, &member, epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = maxWaitMillis, 1, 1<<20, maxRecords, maxRecords
	req.ShareAcquireMode = 1
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = topicID
	rt.Partitions = append(rt.Partitions, kmsg.NewShareFetchRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	return req
}

// shareAckRange acknowledges [first, last] with one type.
type shareAckRange struct {
	first, last int64
	ackType     int8
}

// shareAcknowledgeRequest is a ShareAcknowledge of partition 0 of topicID; it sets
// IsRenewAck when a range is a RENEW (type 4), as clients do and Kafka requires.
func shareAcknowledgeRequest(group, member string, topicID [16]byte, epoch int32, acks ...shareAckRange) *kmsg.ShareAcknowledgeRequest {
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.SetVersion(2)
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &group, &member, epoch
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = topicID
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	for _, a := range acks {
		ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
		ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = a.first, a.last, []int8{a.ackType}
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
		req.IsRenewAck = req.IsRenewAck || a.ackType == 4
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// shareAckErr is the error a ShareAcknowledge answered, top level or partition.
func shareAckErr(resp *kmsg.ShareAcknowledgeResponse) error {
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return err
			}
		}
	}
	return nil
}

// acquiredIn lists the offsets a ShareFetch answer acquired, failing on its errors.
func acquiredIn(t *testing.T, resp *kmsg.ShareFetchResponse) []int64 {
	t.Helper()
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("ShareFetch: %v", err)
	}
	var out []int64
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Fatalf("ShareFetch partition: %v", err)
			}
			for _, a := range p.AcquiredRecords {
				for o := a.FirstOffset; o <= a.LastOffset; o++ {
					out = append(out, o)
				}
			}
		}
	}
	return out
}

// TestShareGroupMetrics: the share-group metrics count exactly what the broker did.
// Raw share sessions acquire, release, reject, renew and accept records; a ShareFetch
// on a drained partition waits and ends empty, and one woken by a produce (sent behind
// it on the same connection, so after it started waiting) ends with records; a member
// that never acknowledges loses its records when their acquisition locks expire (the
// group's share.record.lock.duration.ms at the broker's minimum); franz-go's share
// consumer accepts every record. The in-flight gauge is each share partition's window
// while records are held, 0 once they are acknowledged.
func TestShareGroupMetrics(t *testing.T) {
	t.Parallel()
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	b := startGroupBroker(t, "metrics.listener="+metricsAddr,
		"group.share.min.heartbeat.interval.ms=1000", "group.share.heartbeat.interval.ms=1000")
	const topic = "share-metrics"
	const rawGroup, lockGroup, consumerGroup = "share-metrics-raw", "share-metrics-lock", "share-metrics-consumer"
	createTopic(t, newAdmin(t, b), topic, 1, nil)
	cl := newClient(t, b)
	id := topicID(t, cl, topic)
	for _, g := range []string{rawGroup, consumerGroup} {
		setGroupConfigs(t, b, g, map[string]string{"share.auto.offset.reset": "earliest"})
	}
	setGroupConfigs(t, b, lockGroup, map[string]string{"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "1000"})

	type want struct {
		acquired, accept, release, reject, renew, lockTimeouts, waitedRecords, waitedEmpty float64
	}
	var families map[string]*dto.MetricFamily
	got := func() want {
		families = scrape(t, metricsAddr)
		ack := func(typ string) float64 {
			return testutil.MetricValue(families, "samsa_share_records_acknowledged_total", map[string]string{"type": typ})
		}
		wait := func(result string) float64 {
			return testutil.MetricValue(families, "samsa_share_fetch_waits_total", map[string]string{"result": result})
		}
		acquired := max(testutil.MetricValue(families, "samsa_share_records_acquired_total", map[string]string{"topic": topic}), 0)
		return want{acquired, ack("accept"), ack("release"), ack("reject"), ack("renew"),
			testutil.MetricValue(families, "samsa_share_lock_timeouts_total", nil), wait("records"), wait("empty")}
	}
	check := func(when string, w want) {
		t.Helper()
		if g := got(); g != w {
			t.Fatalf("%s: counted %+v, want %+v", when, g, w)
		}
	}
	inFlight := func(group string) float64 {
		return testutil.MetricValue(families, "samsa_share_partition_in_flight_records", map[string]string{"group": group, "topic": topic, "partition": "0"})
	}
	check("before any share fetch", want{}) // every type and result exported at 0
	if v := inFlight(rawGroup); v != -1 {
		t.Fatalf("in flight of a share partition never used: %v, want no series", v)
	}

	// Raw sessions: acquire 10 of 20 records; release 3, reject 2, renew 5; accept
	// the renewed ones and acquire the released ones again; accept those and acquire
	// the other 10; accept them.
	produceValues(t, b, topic, "a", 20)
	ctx := ctxT(t, 2*time.Minute)
	s := &rawShareSession{c: newClient(t, b), group: rawGroup, member: "raw-member", topicID: id}
	fetch := func(maxRecords int32, acked []int64, want []int64) {
		t.Helper()
		got, err := s.fetch(ctx, 0, maxRecords, acked, 1) // accept
		if err != nil || s.epoch == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("ShareFetch acquired %v (%v, epoch %d), want %v", got, err, s.epoch, want)
		}
	}
	offsets := func(first, last int64) (out []int64) {
		for o := first; o <= last; o++ {
			out = append(out, o)
		}
		return out
	}
	fetch(10, nil, offsets(0, 9))
	resp, err := shareAcknowledgeRequest(rawGroup, s.member, id, s.epoch,
		shareAckRange{0, 2, 2}, shareAckRange{3, 4, 3}, shareAckRange{5, 9, 4}).RequestWith(ctx, s.c)
	if err == nil {
		err = shareAckErr(resp)
	}
	if err != nil {
		t.Fatalf("ShareAcknowledge: %v", err)
	}
	s.epoch++
	check("after release, reject and renew", want{acquired: 10, release: 3, reject: 2, renew: 5})
	fetch(3, offsets(5, 9), offsets(0, 2))
	fetch(10, offsets(0, 2), offsets(10, 19))
	fetch(10, offsets(10, 19), nil)
	check("after the raw session accepted everything", want{acquired: 23, accept: 18, release: 3, reject: 2, renew: 5})
	if v := inFlight(rawGroup); v != 0 {
		t.Fatalf("in flight once every record is done: %v, want 0", v)
	}

	// Waits, on a connection of their own: one expires empty; one that a produce
	// behind it on the connection wakes ends with the new record.
	raw := dialRaw(t, b)
	const waiter = "raw-waiter"
	raw.send(shareFetchRequest(rawGroup, waiter, id, 0, 300, 10))
	empty := kmsg.NewPtrShareFetchResponse()
	empty.SetVersion(2)
	raw.read(empty)
	if got := acquiredIn(t, empty); len(got) != 0 {
		t.Fatalf("a drained partition answered %v", got)
	}
	raw.send(shareFetchRequest(rawGroup, waiter, id, 1, 15000, 10))
	batch, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Value: []byte("wake")}})
	if err != nil {
		t.Fatal(err)
	}
	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(9)
	produce.Acks, produce.TimeoutMillis = -1, 10000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = batch
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	raw.send(produce)
	woken := kmsg.NewPtrShareFetchResponse()
	woken.SetVersion(2)
	raw.read(woken)
	if got := acquiredIn(t, woken); fmt.Sprint(got) != "[20]" {
		t.Fatalf("the woken ShareFetch acquired %v, want [20]", got)
	}
	produced := kmsg.NewPtrProduceResponse()
	produced.SetVersion(9)
	raw.read(produced)
	if code := produced.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(code))
	}
	raw.send(shareAcknowledgeRequest(rawGroup, waiter, id, 2, shareAckRange{20, 20, 1}))
	acked := kmsg.NewPtrShareAcknowledgeResponse()
	acked.SetVersion(2)
	raw.read(acked)
	if err := shareAckErr(acked); err != nil {
		t.Fatalf("ShareAcknowledge of the woken fetch's record: %v", err)
	}
	check("after the waits", want{acquired: 24, accept: 19, release: 3, reject: 2, renew: 5, waitedRecords: 1, waitedEmpty: 1})

	// A member takes 5 records and never acknowledges them: their 1 s locks expire.
	// Another member gets them again and accepts them.
	holder := &rawShareSession{c: newClient(t, b), group: lockGroup, member: "holder", topicID: id}
	if got, err := holder.fetch(ctx, 0, 5, nil, 0); err != nil || fmt.Sprint(got) != fmt.Sprint(offsets(0, 4)) {
		t.Fatalf("the holder acquired %v (%v), want 0-4", got, err)
	}
	got() // in flight whether or not the locks expired yet: they are in the window
	if v := inFlight(lockGroup); v != 5 {
		t.Fatalf("in flight while 0-4 are held: %v, want 5", v)
	}
	testutil.WaitFor(t, 30*time.Second, func() bool { return got().lockTimeouts >= 5 }, "the holder's locks to expire")
	check("after the locks expired", want{acquired: 29, accept: 19, release: 3, reject: 2, renew: 5, lockTimeouts: 5, waitedRecords: 1, waitedEmpty: 1})
	taker := &rawShareSession{c: newClient(t, b), group: lockGroup, member: "taker", topicID: id}
	if got, err := taker.fetch(ctx, 0, 5, nil, 0); err != nil || fmt.Sprint(got) != fmt.Sprint(offsets(0, 4)) || taker.deliveries[0] != 2 {
		t.Fatalf("the taker acquired %v, deliveries %v (%v); want 0-4 delivered a second time", got, taker.deliveries, err)
	}
	resp, err = shareAcknowledgeRequest(lockGroup, taker.member, id, taker.epoch, shareAckRange{0, 4, 1}).RequestWith(ctx, taker.c)
	if err == nil {
		err = shareAckErr(resp)
	}
	if err != nil {
		t.Fatalf("the taker's ShareAcknowledge (within its 1 s locks): %v", err)
	}
	check("after the taker accepted", want{acquired: 34, accept: 24, release: 3, reject: 2, renew: 5, lockTimeouts: 5, waitedRecords: 1, waitedEmpty: 1})
	if v := inFlight(lockGroup); v != 0 {
		t.Fatalf("in flight once 0-4 are accepted: %v, want 0", v)
	}

	// franz-go's share consumer accepts all 21 records, each delivered once. (Its
	// fetches wait when it has drained the partition: waits are not checked now.)
	led := &shareLedger{}
	_, _, stop := shareMember(t, b, "consumer", consumerGroup, topic, led, acceptAll)
	testutil.WaitFor(t, 60*time.Second, func() bool { return got().accept >= 24+21 }, "the share consumer to accept every record")
	stop()
	g := got()
	if g.acquired != 34+21 || g.accept != 24+21 || g.lockTimeouts != 5 || g.release != 3 || g.reject != 2 {
		t.Fatalf("after the share consumer: counted %+v, want 55 acquired, 45 accepted, 5 lock timeouts, 3 released, 2 rejected", g)
	}
}
